package ensure

import (
	"math/rand"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/randfill"
)

// TestToTreeIsTheConverters: for randomly filled objects of many kinds
// (nil, empty and zero values included; the custom leaves Time, MicroTime,
// Quantity, IntOrString, Duration, RawExtension and JSON among them),
// toTree returns exactly what runtime.DefaultUnstructuredConverter
// returns, or fails exactly when it fails.
func TestToTreeIsTheConverters(t *testing.T) {
	protos := []runtime.Object{
		&appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}, &corev1.Pod{}, &corev1.Service{},
		&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.PersistentVolumeClaim{}, &batchv1.Job{}, &batchv1.CronJob{},
		&networkingv1.Ingress{}, &networkingv1.NetworkPolicy{}, &policyv1.PodDisruptionBudget{},
		&autoscalingv2.HorizontalPodAutoscaler{}, &rbacv1.Role{}, &apiextensionsv1.CustomResourceDefinition{},
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.NewSource(seed)
	f := treeFiller(rng)
	for _, proto := range protos {
		for range 60 {
			obj := reflect.New(reflect.TypeOf(proto).Elem()).Interface().(runtime.Object)
			f.Fill(obj)
			want, wantErr := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			got, err := toTree(obj)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("%T: toTree error %v, converter error %v", obj, err, wantErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%T: toTree differs from the converter\n got: %#v\nwant: %#v", obj, got, want)
			}
		}
	}
}

// TestToTreeWithinDecidesAsToTree: for randomly filled objects of many
// kinds and declarations of two sorts — another random object of the kind
// (subset mostly false, deep in the tree) and the object's own tree with
// random keys dropped (subset mostly true) — subset answers the same on the part
// toTreeWithin converts as on the whole of toTree, in both list modes.
func TestToTreeWithinDecidesAsToTree(t *testing.T) {
	protos := []runtime.Object{
		&appsv1.Deployment{}, &appsv1.StatefulSet{}, &corev1.Pod{}, &corev1.Service{}, &corev1.ConfigMap{},
		&corev1.Secret{}, &batchv1.Job{}, &networkingv1.Ingress{}, &networkingv1.NetworkPolicy{},
		&autoscalingv2.HorizontalPodAutoscaler{}, &rbacv1.Role{},
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	f := treeFiller(rng)
	s := &schemas{}
	fill := func(proto runtime.Object) runtime.Object {
		obj := reflect.New(reflect.TypeOf(proto).Elem()).Interface().(runtime.Object)
		f.Fill(obj)
		return obj
	}
	checked, held := 0, 0
	for _, proto := range protos {
		gvks, _, err := clientgoscheme.Scheme.ObjectKinds(proto)
		if err != nil {
			t.Fatal(err)
		}
		sh, err := s.shapeOf(gvks[0])
		if err != nil {
			t.Fatal(err)
		}
		for range 60 {
			obj := fill(proto)
			whole, err := toTree(obj)
			if err != nil {
				continue // the converter's failure: toTreeWithin's caller converts the whole object
			}
			other, err := toTree(fill(proto))
			if err != nil {
				continue
			}
			own, _ := dropKeys(runtime.DeepCopyJSONValue(whole), rng).(map[string]any)
			for _, decl := range []map[string]any{other, own} {
				part, ok := toTreeWithin(obj, decl, sh)
				if !ok {
					t.Fatalf("%T: toTreeWithin fell back where toTree did not", obj)
				}
				for _, mode := range []listMode{keyedSubset, exactLists} {
					if got, want := subset(decl, part, sh, mode), subset(decl, whole, sh, mode); got != want {
						t.Fatalf("%T: subset on toTreeWithin = %v, on toTree = %v\ndecl: %#v\npart: %#v\nwhole: %#v", obj, got, want, decl, part, whole)
					}
				}
				checked++
			}
			if subset(own, whole, sh, keyedSubset) {
				held++
			}
		}
	}
	// Both answers must occur often, or the comparison shows little.
	if checked < 600 || held < 100 {
		t.Fatalf("%d declarations compared, %d of them held", checked, held)
	}
}

// dropKeys drops about a third of the keys of every map in v, in place,
// but inside lists (an item without its key matches nothing).
func dropKeys(v any, rng *rand.Rand) any {
	if x, ok := v.(map[string]any); ok {
		for k, e := range x {
			if rng.Intn(3) == 0 {
				delete(x, k)
				continue
			}
			x[k] = dropKeys(e, rng)
		}
	}
	return v
}

// treeFiller fills objects randomly for the toTree tests: nil, empty and
// zero values included, and the converter's custom leaves (Quantity,
// IntOrString, JSON, RawExtension, Time, MicroTime) given valid values.
func treeFiller(src rand.Source) *randfill.Filler {
	return randfill.New().NilChance(0.3).NumElements(0, 2).MaxDepth(8).RandSource(src).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(1<<40), resource.DecimalSI)
		},
		func(i *intstr.IntOrString, c randfill.Continue) {
			if c.Bool() {
				*i = intstr.FromInt32(c.Int31())
			} else {
				*i = intstr.FromString(c.String(8))
			}
		},
		func(j *apiextensionsv1.JSON, c randfill.Continue) {
			j.Raw = []byte(`{"a":[1,"b",null]}`)
		},
		func(r *runtime.RawExtension, c randfill.Continue) {
			if c.Bool() {
				r.Raw = []byte(`{"kind":"X","n":1}`)
			}
		},
		func(tm *metav1.Time, c randfill.Continue) {
			if c.Bool() {
				*tm = metav1.Unix(c.Int63n(1<<32), 0)
			}
		},
		func(tm *metav1.MicroTime, c randfill.Continue) {
			if c.Bool() {
				*tm = metav1.NewMicroTime(time.Unix(c.Int63n(1<<32), c.Int63n(1e9)))
			}
		},
	)
}

// oddObject has an unexported field, which the converter converts (under
// its Go name) and toTree does not.
type oddObject struct {
	metav1.TypeMeta `json:",inline"`
	Name            string `json:"name"`
	hidden          int
}

func (o *oddObject) DeepCopyObject() runtime.Object { c := *o; return &c }

// TestToTreeFallsBackExactly: a type the fast path does not convert itself
// gets the converter's answer.
func TestToTreeFallsBackExactly(t *testing.T) {
	o := &oddObject{Name: "x", hidden: 7}
	if ci := convOf(reflect.TypeOf(*o)); !ci.unsupported {
		t.Fatal("a struct with an unexported field is not marked unsupported")
	}
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := toTree(o)
	if err != nil || !reflect.DeepEqual(got, want) || got["hidden"] != int64(7) {
		t.Fatalf("toTree = %#v, %v; want the converter's %#v", got, err, want)
	}
}

// cachedDeployment is a Deployment as ensure reads it from a cache after a
// restart: its metadata, a small declared spec with the API server's
// defaults, and a status with two conditions.
func cachedDeployment() *appsv1.Deployment {
	now := metav1.Unix(1764700000, 0)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "app-00001", Namespace: "bench", UID: "0f6a3c1e-5b7d-4c2a-9e8f-1a2b3c4d5e6f", ResourceVersion: "12345", Generation: 1, CreationTimestamp: now,
			Labels:          map[string]string{"app": "app-00001", LabelOwnerUID: "0f6a3c1e-5b7d-4c2a-9e8f-1a2b3c4d5e6f", LabelManager: "webapp"},
			Annotations:     map[string]string{AnnotationDeclared: `{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{}}}}}`, AnnotationOwner: "WebApp.example.opkit.dev bench/app-00001", "deployment.kubernetes.io/revision": "1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.opkit.dev/v1", Kind: "WebApp", Name: "app-00001", UID: "0f6a3c1e-5b7d-4c2a-9e8f-1a2b3c4d5e6f", Controller: new(true), BlockOwnerDeletion: new(true)}}},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "app-00001"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "app-00001"}, Annotations: map[string]string{"apps.example.com/config-hash": "abcdef0123456789"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: "TCP"}},
					VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/webapp", ReadOnly: true}}, TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: "File", ImagePullPolicy: "IfNotPresent"}},
					Volumes:       []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-00001-config"}, DefaultMode: new(int32(420))}}}},
					RestartPolicy: "Always", DNSPolicy: "ClusterFirst", SchedulerName: "default-scheduler", TerminationGracePeriodSeconds: new(int64(30)), SecurityContext: &corev1.PodSecurityContext{}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: "Available", Status: "True", Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability.", LastUpdateTime: now, LastTransitionTime: now},
				{Type: "Progressing", Status: "True", Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "app-00001-5d8f" has successfully progressed.`, LastUpdateTime: now, LastTransitionTime: now}}},
	}
	return d
}

// BenchmarkLiveTree: a cached Deployment to its tree, by the converter and
// by toTree (the first comparison of each child after a restart does this).
func BenchmarkLiveTree(b *testing.B) {
	d := cachedDeployment()
	b.Run("converter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("toTree", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := toTree(d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

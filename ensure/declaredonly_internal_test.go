package ensure

import (
	"encoding/json"
	"maps"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// declaredDeployment is what an operator declares, and the record Ensure
// would write for it.
func declaredDeployment(t *testing.T) (*appsv1.Deployment, map[string]any, string, shape) {
	t.Helper()
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "web", Image: "nginx:1",
						Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
						Env:   []corev1.EnvVar{{Name: "A", Value: "1"}},
						Args:  []string{"--port", "8080"},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}},
					}}},
				},
			},
		},
	}
	decl, err := declared(dep)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := (&schemas{}).shapeOf(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := fieldSet(decl, sh).ToJSON()
	if err != nil {
		t.Fatal(err)
	}
	return dep, decl, string(rec), sh
}

// liveDeployment is dep as the API server returns it: defaulted, with
// another actor's sidecar and env var, a replica count an autoscaler set,
// status, and the record.
func liveDeployment(dep *appsv1.Deployment, rec string) *appsv1.Deployment {
	live := dep.DeepCopy()
	live.UID, live.ResourceVersion, live.Generation = "u1", "42", 3
	live.Annotations = map[string]string{AnnotationDeclared: rec, "deployment.kubernetes.io/revision": "1"}
	live.Spec.Replicas = ptr.To[int32](3)
	live.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	live.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	live.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}
	ps := &live.Spec.Template.Spec
	ps.RestartPolicy, ps.DNSPolicy, ps.SchedulerName = corev1.RestartPolicyAlways, corev1.DNSClusterFirst, "default-scheduler"
	ps.TerminationGracePeriodSeconds = ptr.To[int64](30)
	ps.SecurityContext = &corev1.PodSecurityContext{}
	c := &ps.Containers[0]
	c.ImagePullPolicy, c.TerminationMessagePath = corev1.PullIfNotPresent, "/dev/termination-log"
	c.Ports[0].Protocol = corev1.ProtocolTCP
	c.Env = append(c.Env, corev1.EnvVar{Name: "INJECTED", Value: "x"})
	ps.Containers = append(ps.Containers, corev1.Container{Name: "sidecar", Image: "proxy"})
	ps.Volumes[0].ConfigMap.DefaultMode = ptr.To[int32](0o644)
	live.Status = appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, ReadyReplicas: 3,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}
	return live
}

func TestDeclaredOnlyTrimsTypedToRecord(t *testing.T) {
	dep, decl, rec, sh := declaredDeployment(t)
	live := liveDeployment(dep, rec)
	obj, err := NewDeclaredOnly("spec.replicas").Transform(live)
	if err != nil || obj != any(live) {
		t.Fatalf("Transform = %v, %v; want the same object, no error", obj, err)
	}

	if live.Annotations[AnnotationTrimmed] != "true" || live.Annotations[AnnotationDeclared] != rec {
		t.Fatalf("annotations after trimming = %v, want the record kept and %s set", live.Annotations, AnnotationTrimmed)
	}
	want := dep.DeepCopy()
	want.UID, want.ResourceVersion, want.Generation = "u1", "42", 3
	want.Annotations = live.Annotations
	want.Spec.Replicas = ptr.To[int32](3) // kept: "spec.replicas"
	want.Status = live.Status
	if d := cmp.Diff(want, live); d != "" {
		t.Fatalf("trimmed Deployment (-want +got):\n%s", d)
	}
	tree, err := liveTree(live)
	if err != nil {
		t.Fatal(err)
	}
	if !subset(decl, tree, sh, keyedSubset) {
		t.Fatal("the trimmed object no longer holds the declaration")
	}
}

func TestDeclaredOnlyKeepsDriftOfDeclaredFields(t *testing.T) {
	dep, decl, rec, sh := declaredDeployment(t)
	live := liveDeployment(dep, rec)
	live.Spec.Template.Spec.Containers[0].Image = "nginx:drifted"
	live.Spec.Template.Spec.Containers[0].Env[0].Value = "changed"
	if _, err := NewDeclaredOnly().Transform(live); err != nil {
		t.Fatal(err)
	}
	if got := live.Spec.Template.Spec.Containers[0].Image; got != "nginx:drifted" {
		t.Fatalf("image = %q, want the drifted value kept", got)
	}
	tree, _ := liveTree(live)
	if subset(decl, tree, sh, keyedSubset) {
		t.Fatal("a drifted declared field is not a difference after trimming")
	}
	if live.Spec.Replicas != nil {
		t.Fatalf("undeclared replicas kept without a keep path: %d", *live.Spec.Replicas)
	}
}

func TestDeclaredOnlyTrimsUnstructuredLikeTyped(t *testing.T) {
	dep, _, rec, _ := declaredDeployment(t)
	typed := liveDeployment(dep, rec)
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: content}
	d := NewDeclaredOnly("spec.replicas")
	if _, err := d.Transform(u); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Transform(typed); err != nil {
		t.Fatal(err)
	}
	want, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	// The typed form has creationTimestamp: null and empty structs the
	// converter writes; compare through JSON of the typed object.
	var fromU appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &fromU); err != nil {
		t.Fatal(err)
	}
	got, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&fromU)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("unstructured trimmed differently from typed (-typed +unstructured):\n%s", diff)
	}
}

func TestDeclaredOnlyLeavesObjectsWithoutRecord(t *testing.T) {
	dep, _, rec, _ := declaredDeployment(t)
	for name, mutate := range map[string]func(*appsv1.Deployment){
		"no record":       func(d *appsv1.Deployment) { delete(d.Annotations, AnnotationDeclared) },
		"broken record":   func(d *appsv1.Deployment) { d.Annotations[AnnotationDeclared] = "{not json" },
		"record not json": func(d *appsv1.Deployment) { d.Annotations[AnnotationDeclared] = "" },
	} {
		t.Run(name, func(t *testing.T) {
			live := liveDeployment(dep, rec)
			mutate(live)
			before := live.DeepCopy()
			if _, err := NewDeclaredOnly().Transform(live); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(before, live); d != "" {
				t.Fatalf("object changed (-before +after):\n%s", d)
			}
		})
	}
	if obj, err := NewDeclaredOnly().Transform("not an object"); err != nil || obj != "not an object" {
		t.Fatalf("non-object: %v, %v", obj, err)
	}
}

func TestDeclaredOnlyKeepsItemsItCannotMatch(t *testing.T) {
	// A record naming a keyed list item by a key field the live item lacks.
	rec := `{"f:spec":{"f:ports":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:port":{}}}}}`
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Annotations: map[string]string{AnnotationDeclared: rec}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []corev1.ServicePort{
			{Port: 80, TargetPort: intOrString(8080)}, // no protocol: may be the declared item
			{Port: 82, Protocol: corev1.ProtocolUDP},  // certainly not declared
		}},
	}
	if _, err := NewDeclaredOnly().Transform(svc); err != nil {
		t.Fatal(err)
	}
	want := []corev1.ServicePort{{Port: 80, TargetPort: intOrString(8080)}} // kept whole
	if d := cmp.Diff(want, svc.Spec.Ports); d != "" || svc.Spec.ClusterIP != "" {
		t.Fatalf("ports (-want +got):\n%s\nclusterIP %q", d, svc.Spec.ClusterIP)
	}
}

func TestDeclaredOnlyParsesEachRecordOnce(t *testing.T) {
	_, _, rec, _ := declaredDeployment(t)
	d := NewDeclaredOnly()
	a, b := d.parsed(rec), d.parsed(rec)
	if a.set == nil || a != b {
		t.Fatalf("parsed twice: %p, %p", a, b)
	}
	raw, _ := json.Marshal(map[string]any{"f:data": map[string]any{}})
	for i := range declaredOnlyMemo + 1 {
		d.parsed(string(raw) + string(rune('a'+i%26)) + string(rune(i)))
	}
	if len(d.records) > declaredOnlyMemo {
		t.Fatalf("memo holds %d records, bound %d", len(d.records), declaredOnlyMemo)
	}
}

// TestDeclaredOnlySharesEqualMarkedAnnotations: children whose annotations
// are equal (ensure's record only, the usual child) get one marked map in
// the cache; any other annotations get a map of their own, each holding
// exactly the object's annotations and the mark.
func TestDeclaredOnlySharesEqualMarkedAnnotations(t *testing.T) {
	_, _, rec, _ := declaredDeployment(t)
	d := NewDeclaredOnly()
	transform := func(annotations map[string]string) map[string]string {
		t.Helper()
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: annotations}}
		if _, err := d.Transform(dep); err != nil {
			t.Fatal(err)
		}
		want := maps.Clone(annotations)
		want[AnnotationTrimmed] = "true"
		if !maps.Equal(dep.Annotations, want) {
			t.Fatalf("annotations %v, want %v", dep.Annotations, want)
		}
		return dep.Annotations
	}
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	a := transform(map[string]string{AnnotationDeclared: rec})
	b := transform(map[string]string{AnnotationDeclared: rec})
	if !same(a, b) {
		t.Errorf("equal annotations got two maps")
	}
	c := transform(map[string]string{AnnotationDeclared: rec, "deployment.kubernetes.io/revision": "2"})
	if same(a, c) {
		t.Errorf("different annotations share a map")
	}
	if same(c, transform(map[string]string{AnnotationDeclared: rec, "deployment.kubernetes.io/revision": "3"})) {
		t.Errorf("annotations differing in a value share a map")
	}
	// Equal once marked: whatever the object held under the mark's key.
	e := transform(map[string]string{AnnotationDeclared: rec, AnnotationTrimmed: "false"})
	if !same(e, transform(map[string]string{AnnotationDeclared: rec})) || !same(e, transform(map[string]string{AnnotationDeclared: rec, AnnotationTrimmed: "true"})) {
		t.Errorf("annotations equal once marked got maps of their own")
	}
	if len(a) != 2 || len(b) != 2 {
		t.Errorf("a shared map changed: %v", a)
	}
}

func intOrString(i int) intstr.IntOrString { return intstr.FromInt(i) }

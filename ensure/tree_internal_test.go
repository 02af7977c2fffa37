package ensure

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

func TestDeclaredTypedKeepsOnlySetFields(t *testing.T) {
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", ResourceVersion: "7", Labels: map[string]string{"empty": ""}},
		Spec: appsv1.DeploymentSpec{
			Paused: false,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{
					Name: "web", Image: "nginx",
					Ports:     []corev1.ContainerPort{{ContainerPort: 80}},
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.5")}},
				}},
			}},
		},
		Status: appsv1.DeploymentStatus{Replicas: 3},
	}
	d, err := declared(dep)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(d)
	want := `{"metadata":{"labels":{"empty":""},"name":"web"},"spec":{"template":{"spec":{"containers":[{"image":"nginx","name":"web","ports":[{"containerPort":80}],"resources":{"limits":{"cpu":"500m"}}}],"terminationGracePeriodSeconds":0}}}}`
	if string(got) != want {
		t.Fatalf("declared\n got %s\nwant %s", got, want)
	}

	svc := &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.IntOrString{}}}}}
	d, _ = declared(svc)
	if got, _ := json.Marshal(d); strings.Contains(string(got), "targetPort") {
		t.Fatalf("zero targetPort declared: %s", got)
	}
}

func TestDeclaredUnstructuredDropsNullsAndStatus(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "x", "creationTimestamp": nil, "uid": "u"},
		"data":     map[string]any{"a": "1", "b": nil},
		"status":   map[string]any{"x": 1},
		"n":        int(3),
	}}
	d, _ := declared(u)
	got, _ := json.Marshal(d)
	if want := `{"apiVersion":"v1","data":{"a":"1"},"kind":"ConfigMap","metadata":{"name":"x"},"n":3}`; string(got) != want {
		t.Fatalf("got %s want %s", got, want)
	}
	if _, ok := d["n"].(int64); !ok {
		t.Fatalf("ints are not normalized: %T", d["n"])
	}
	if u.Object["status"] == nil {
		t.Fatal("declared modified its input")
	}
}

func TestSubset(t *testing.T) {
	live := map[string]any{
		"spec": map[string]any{
			"replicas": int64(5), "revisionHistoryLimit": int64(10),
			"containers": []any{
				map[string]any{"name": "sidecar", "image": "envoy"},
				map[string]any{"name": "web", "image": "nginx", "imagePullPolicy": "IfNotPresent",
					"ports": []any{map[string]any{"containerPort": int64(80), "protocol": "TCP"}}},
			},
			"args": []any{"a", "b"},
		},
	}
	cases := []struct {
		name  string
		d     map[string]any
		keyed bool
		exact bool
	}{
		{"empty", map[string]any{}, true, true},
		{"defaults ignored", map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "web", "image": "nginx", "ports": []any{map[string]any{"containerPort": 80.0}}},
			map[string]any{"name": "sidecar"},
		}}}, true, true},
		{"extra live element", map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "web", "image": "nginx"},
		}}}, true, false},
		{"changed image", map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "web", "image": "nginx:2"},
		}}}, false, false},
		{"protocol differs", map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "web", "ports": []any{map[string]any{"containerPort": int64(80), "protocol": "UDP"}}},
		}}}, false, false},
		{"atomic list order", map[string]any{"spec": map[string]any{"args": []any{"b", "a"}}}, false, false},
		{"atomic list shorter", map[string]any{"spec": map[string]any{"args": []any{"a"}}}, false, false},
		{"scalar differs", map[string]any{"spec": map[string]any{"replicas": int64(3)}}, false, false},
		{"missing live", map[string]any{"spec": map[string]any{"paused": true}}, false, false},
	}
	for _, c := range cases {
		if got := subset(c.d, live, keyedSubset); got != c.keyed {
			t.Errorf("%s: keyed subset = %v, want %v", c.name, got, c.keyed)
		}
		if got := subset(c.d, live, exactLists); got != c.exact {
			t.Errorf("%s: exact subset = %v, want %v", c.name, got, c.exact)
		}
	}
}

func TestMergePatchSendsOnlyChangesAndNoNulls(t *testing.T) {
	live := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"a": "1", "user": "x"}, "resourceVersion": "9"},
		"spec":     map[string]any{"replicas": int64(5), "template": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "old"}}}},
	}
	d := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"a": "1"}},
		"spec":     map[string]any{"template": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "new"}}}},
	}
	p, replaced := mergePatch(d, live)
	got, _ := json.Marshal(p)
	if want := `{"spec":{"template":{"containers":[{"image":"new","name":"web"}]}}}`; string(got) != want || !replaced {
		t.Fatalf("patch %s (replaced list %v), want %s", got, replaced, want)
	}
	d = map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "2"}}}
	p, replaced = mergePatch(d, live)
	got, _ = json.Marshal(p)
	if want := `{"metadata":{"labels":{"a":"2"}}}`; string(got) != want || replaced {
		t.Fatalf("patch %s (replaced list %v), want %s", got, replaced, want)
	}
}

func TestOwnsUndeclared(t *testing.T) {
	raw := `{"f:data":{"f:a":{},"f:b":{}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}},"f:finalizers":{"v:\"x\"":{}}}}`
	set := &fieldpath.Set{}
	if err := set.FromJSON(strings.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	full := map[string]any{
		"data": map[string]any{"a": "1", "b": "2"},
		"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": "i", "ports": []any{map[string]any{"containerPort": int64(80)}}}},
			"finalizers": []any{"x"},
		},
	}
	if ownsUndeclared(set, full) {
		t.Fatal("everything owned is declared, but ownsUndeclared = true")
	}
	dropped := runtimeCopy(full)
	delete(dropped["data"].(map[string]any), "b")
	if !ownsUndeclared(set, dropped) {
		t.Fatal("data.b dropped, but ownsUndeclared = false")
	}
	dropped = runtimeCopy(full)
	dropped["spec"].(map[string]any)["finalizers"] = []any{"y"}
	if !ownsUndeclared(set, dropped) {
		t.Fatal("finalizer x dropped, but ownsUndeclared = false")
	}
}

func runtimeCopy(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

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

func podShape(t *testing.T) shape {
	t.Helper()
	sh, err := (&schemas{}).shapeOf(corev1.SchemeGroupVersion.WithKind("Pod"))
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

func TestSubset(t *testing.T) {
	sh := podShape(t)
	live := map[string]any{
		"metadata": map[string]any{"finalizers": []any{"a", "b"}},
		"spec": map[string]any{
			"terminationGracePeriodSeconds": int64(30), "nodeSelector": map[string]any{"disk": "ssd", "zone": "a"},
			"containers": []any{
				map[string]any{"name": "sidecar", "image": "envoy"},
				map[string]any{"name": "web", "image": "nginx", "imagePullPolicy": "IfNotPresent", "args": []any{"a", "b"},
					"ports": []any{map[string]any{"containerPort": int64(80), "protocol": "TCP"}}},
			},
		},
	}
	containers := func(c ...any) map[string]any { return map[string]any{"spec": map[string]any{"containers": c}} }
	cases := []struct {
		name  string
		d     map[string]any
		keyed bool
		exact bool
	}{
		{"empty", map[string]any{}, true, true},
		{"defaults ignored, any order", containers(
			map[string]any{"name": "web", "image": "nginx", "ports": []any{map[string]any{"containerPort": 80.0}}},
			map[string]any{"name": "sidecar"},
		), true, true},
		{"extra live item", containers(map[string]any{"name": "web", "image": "nginx"}), true, false},
		{"changed image", containers(map[string]any{"name": "web", "image": "nginx:2"}), false, false},
		{"protocol differs", containers(
			map[string]any{"name": "web", "ports": []any{map[string]any{"containerPort": int64(80), "protocol": "UDP"}}},
		), false, false},
		{"atomic list order", containers(map[string]any{"name": "web", "args": []any{"b", "a"}}), false, false},
		{"atomic list shorter", containers(map[string]any{"name": "web", "args": []any{"a"}}), false, false},
		{"set item present", map[string]any{"metadata": map[string]any{"finalizers": []any{"b"}}}, true, false},
		{"set item missing", map[string]any{"metadata": map[string]any{"finalizers": []any{"c"}}}, false, false},
		{"atomic map with a dropped key", map[string]any{"spec": map[string]any{"nodeSelector": map[string]any{"disk": "ssd"}}}, false, false},
		{"atomic map equal", map[string]any{"spec": map[string]any{"nodeSelector": map[string]any{"disk": "ssd", "zone": "a"}}}, true, true},
		{"scalar differs", map[string]any{"spec": map[string]any{"terminationGracePeriodSeconds": int64(3)}}, false, false},
		{"missing live", map[string]any{"spec": map[string]any{"hostNetwork": true}}, false, false},
	}
	for _, c := range cases {
		if got := subset(c.d, live, sh, keyedSubset); got != c.keyed {
			t.Errorf("%s: keyed subset = %v, want %v", c.name, got, c.keyed)
		}
		if got := subset(c.d, live, sh, exactLists); got != c.exact {
			t.Errorf("%s: exact subset = %v, want %v", c.name, got, c.exact)
		}
	}
}

func TestMergePatchSendsOnlyChangesAndNoNulls(t *testing.T) {
	sh := podShape(t)
	live := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"a": "1", "user": "x"}, "resourceVersion": "9"},
		"spec":     map[string]any{"priority": int64(5), "containers": []any{map[string]any{"name": "web", "image": "old"}}},
	}
	d := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"a": "1"}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "web", "image": "new"}}},
	}
	p, replaced := mergePatch(d, live, sh)
	got, _ := json.Marshal(p)
	if want := `{"spec":{"containers":[{"image":"new","name":"web"}]}}`; string(got) != want || !replaced {
		t.Fatalf("patch %s (replaced list %v), want %s", got, replaced, want)
	}
	d = map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "2"}}}
	p, replaced = mergePatch(d, live, sh)
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

func deploymentShape(t *testing.T) shape {
	t.Helper()
	sh, err := (&schemas{}).shapeOf(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// The record of a declaration, and what merging a smaller declaration over
// the live object removes and keeps.
func TestRecordRemovesOnlyWhatWasDeclared(t *testing.T) {
	sh := deploymentShape(t)
	container := func(env ...any) map[string]any {
		return map[string]any{"name": "web", "image": "nginx", "env": env,
			"ports": []any{map[string]any{"containerPort": int64(8080)}, map[string]any{"containerPort": int64(9090)}}}
	}
	oldDecl := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": "web", "tier": "x"}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{container(map[string]any{"name": "A", "value": "1"}, map[string]any{"name": "B", "value": "2"}),
				map[string]any{"name": "sidecar", "image": "envoy"}},
			"tolerations": []any{map[string]any{"key": "k", "operator": "Exists"}},
		}}},
	}
	old := fieldSet(oldDecl, sh)
	raw, err := old.ToJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"f:tier":{}`, `"k:{\"name\":\"sidecar\"}"`, `"k:{\"containerPort\":9090,\"protocol\":\"TCP\"}"`, `"f:tolerations":{}`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("record %s lacks %s", raw, want)
		}
	}
	// Live: the server defaulted fields; another actor added a label, an
	// env var and a container.
	live := runtimeCopy(oldDecl)
	live["metadata"].(map[string]any)["labels"].(map[string]any)["user"] = "u"
	ps := live["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	cs := ps["containers"].([]any)
	web := cs[0].(map[string]any)
	web["imagePullPolicy"] = "IfNotPresent"
	web["env"] = append(web["env"].([]any), map[string]any{"name": "INJECTED", "value": "x"})
	for _, p := range web["ports"].([]any) {
		p.(map[string]any)["protocol"] = "TCP"
	}
	ps["containers"] = append(cs, map[string]any{"name": "istio-proxy", "image": "istio"})

	newDecl := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": "nginx", "env": []any{map[string]any{"name": "A", "value": "1"}},
				"ports": []any{map[string]any{"containerPort": int64(8080)}}}},
		}}},
	}
	rm := old.Difference(fieldSet(newDecl, sh))
	want, _ := merged(live, newDecl, rm, sh).(map[string]any)
	patch, replaced := recordedPatch(live, want)
	got, _ := json.Marshal(patch)
	wantPatch := `{"metadata":{"labels":{"tier":null}},"spec":{"template":{"spec":{"containers":[` +
		`{"env":[{"name":"A","value":"1"},{"name":"INJECTED","value":"x"}],"image":"nginx","imagePullPolicy":"IfNotPresent","name":"web","ports":[{"containerPort":8080,"protocol":"TCP"}]},` +
		`{"image":"istio","name":"istio-proxy"}],"tolerations":null}}}}`
	if string(got) != wantPatch || !replaced {
		t.Fatalf("patch\n got %s\nwant %s (replaced list %v)", got, wantPatch, replaced)
	}
	if live["metadata"].(map[string]any)["labels"].(map[string]any)["tier"] != "x" {
		t.Fatal("merged modified the live object")
	}
	// Same declaration again: nothing to remove, nothing to send.
	same, _ := merged(live, oldDecl, old.Difference(fieldSet(oldDecl, sh)), sh).(map[string]any)
	if !subset(oldDecl, live, sh, keyedSubset) {
		t.Fatal("live does not hold the old declaration")
	}
	if p, _ := recordedPatch(live, same); len(p) != 0 {
		t.Fatalf("unchanged declaration patches %v", p)
	}
}

// Part 6: an atomic list whose items have a "name" is compared and written
// whole, not merged by name.
func TestAtomicListWithNamedItemsIsNotKeyed(t *testing.T) {
	// PodSecurityContext.sysctls is atomic, and its items have a name.
	sh := podShape(t).field("spec")
	if kind, _ := sh.field("securityContext").field("sysctls").list(); kind != atomicList {
		t.Fatalf("sysctls: kind %v, want atomic", kind)
	}
	if kind, keys := sh.field("containers").list(); kind != mapList || len(keys) != 1 || keys[0] != "name" {
		t.Fatalf("containers: kind %v keys %v", kind, keys)
	}
	sysctls := func(names ...string) map[string]any {
		var l []any
		for _, n := range names {
			l = append(l, map[string]any{"name": n, "value": "1"})
		}
		return map[string]any{"securityContext": map[string]any{"sysctls": l}}
	}
	live := sysctls("a", "b")
	for _, d := range []map[string]any{sysctls("b"), sysctls("b", "a")} {
		if subset(d, live, sh, keyedSubset) {
			t.Fatalf("atomic list %v counts as held by %v", d, live)
		}
		want, _ := merged(live, d, &fieldpath.Set{}, sh).(map[string]any)
		if !equalTree(want, d) {
			t.Fatalf("merged atomic list %v, want the declared %v", want, d)
		}
	}
	if set := fieldSet(sysctls("a"), sh); !set.Has(fieldpath.MakePathOrDie("securityContext", "sysctls")) || set.Size() != 1 {
		t.Fatalf("record of an atomic list: %v, want the list as one field", set)
	}
}

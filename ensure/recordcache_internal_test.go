package ensure

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// recordDeployment is a declaration whose shape the arguments change.
func recordDeployment(image string, replicas int32, env []corev1.EnvVar, container string, ports ...int32) *appsv1.Deployment {
	c := corev1.Container{Name: container, Image: image, Env: env}
	for _, p := range ports {
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: p})
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
			},
		},
	}
}

// The cached record of a declaration is exactly the record computed from
// it, for every owner and every shape, whatever the order the shapes come
// in: values do not matter, keys, item keys and owner links do.
func TestRecordCacheMatchesFieldSet(t *testing.T) {
	sh := deploymentShape(t)
	gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
	env := []corev1.EnvVar{{Name: "A", Value: "1"}}
	otherRef := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "other"}
	withRef := recordDeployment("nginx", 1, env, "web", 80)
	withRef.OwnerReferences = []metav1.OwnerReference{otherRef}
	withOwnRef := recordDeployment("nginx", 1, env, "web", 80)
	withOwnRef.OwnerReferences = []metav1.OwnerReference{{APIVersion: "x/v1", Kind: "Owner", Name: "o", UID: "owner-b"}}
	variants := []*appsv1.Deployment{
		recordDeployment("nginx", 1, env, "web", 80),
		recordDeployment("httpd", 5, []corev1.EnvVar{{Name: "A", Value: "2"}}, "web", 80), // same shape
		recordDeployment("nginx", 1, append(env, corev1.EnvVar{Name: "B", Value: "x"}), "web", 80),
		recordDeployment("nginx", 1, nil, "web", 80),
		recordDeployment("nginx", 1, env, "app", 80),
		recordDeployment("nginx", 1, env, "web", 8080),
		recordDeployment("nginx", 1, env, "web", 80, 443),
		recordDeployment("nginx", 1, env, "web"),
		withRef,
		withOwnRef,
	}
	owners := []types.UID{"owner-a", "owner-b"}
	e := &Ensurer{managerLabel: "m"}
	for _, order := range [][]int{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}} {
		for _, i := range order {
			for _, uid := range owners {
				for _, ownerRef := range []bool{true, false} {
					for _, ns := range []string{"ns", ""} {
						name := fmt.Sprintf("variant %d owner %s ownerRef %v namespace %q", i, uid, ownerRef, ns)
						tg := &target{key: objectKey{gvk: gvk, namespace: ns, name: "web"}, ownerRef: ownerRef, shape: sh,
							ownerInfo: ownerInfo{gvk: gvk.GroupVersion().WithKind("Owner"), uid: uid, name: "o", annotation: "Owner o"}}
						decl, err := declared(variants[i])
						if err != nil {
							t.Fatal(err)
						}
						decl = e.link(tg, decl)
						want := fieldSet(decl, sh).Difference(fieldSet(e.link(tg, map[string]any{}), sh))
						wantJSON, err := want.ToJSON()
						if err != nil {
							t.Fatal(err)
						}
						built := false
						set, rec, err := e.records.get(gvk, uid, decl, sh, func() (*fieldpath.Set, string, error) {
							built = true
							return want, string(wantJSON), nil
						})
						if err != nil {
							t.Fatal(err)
						}
						if rec != string(wantJSON) || !set.Equals(want) {
							t.Fatalf("%s: cached record\n %s\nwant\n %s", name, rec, wantJSON)
						}
						if i == 1 && built && order[0] == 0 {
							t.Fatalf("%s: same shape as variant 0 with other values, built again", name)
						}
					}
				}
			}
		}
	}
}

// The cache holds at most maxRecordShapes shapes.
func TestRecordCacheBounded(t *testing.T) {
	sh := deploymentShape(t)
	gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
	var c recordCache
	for i := range 3 * maxRecordShapes {
		decl := map[string]any{"metadata": map[string]any{"labels": map[string]any{fmt.Sprintf("l%d", i): "x"}}}
		if _, _, err := c.get(gvk, "u", decl, sh, func() (*fieldpath.Set, string, error) {
			return fieldSet(decl, sh), "", nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(c.entries) > maxRecordShapes {
			t.Fatalf("%d shapes cached, bound %d", len(c.entries), maxRecordShapes)
		}
	}
}

// The memo of verified children holds a child only at the UID,
// resourceVersion and declaration it was verified at, forgets it on
// request, and stays within maxVerified entries.
func TestVerifiedMemo(t *testing.T) {
	gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
	k := objectKey{gvk: gvk, namespace: "ns", name: "web"}
	oi := ownerInfo{uid: "o", annotation: "Owner o", name: "o"}
	d1 := declDigest(map[string]any{"spec": map[string]any{"replicas": int64(1)}}, oi, true)
	d2 := declDigest(map[string]any{"spec": map[string]any{"replicas": int64(2)}}, oi, true)
	d3 := declDigest(map[string]any{"spec": map[string]any{"replicas": int64(1)}}, ownerInfo{uid: "p", annotation: "Owner p", name: "p"}, true)
	d4 := declDigest(map[string]any{"spec": map[string]any{"replicas": "1"}}, oi, true)
	d5 := declDigest(map[string]any{"spec": map[string]any{"replicas": int64(1)}}, oi, false)
	for i, d := range [][32]byte{d2, d3, d4, d5} {
		if d == d1 {
			t.Fatalf("digest %d equals the first: a different declaration or owner must differ", i+2)
		}
	}
	if declDigest(map[string]any{"a": "1", "b": map[string]any{"x": true, "y": 1.5}}, oi, true) !=
		declDigest(map[string]any{"b": map[string]any{"y": 1.5, "x": true}, "a": "1"}, oi, true) {
		t.Fatal("digest depends on map order")
	}
	var v verified
	v.set(k, "u1", "10", d1)
	switch {
	case !v.holds(k, "u1", "10", d1):
		t.Fatal("verified child not held")
	case v.holds(k, "u1", "11", d1):
		t.Fatal("held at another resourceVersion")
	case v.holds(k, "u2", "10", d1):
		t.Fatal("held at another UID")
	case v.holds(k, "u1", "10", d2):
		t.Fatal("held for another declaration")
	case v.holds(objectKey{gvk: gvk, namespace: "ns", name: "other"}, "u1", "10", d1):
		t.Fatal("held under another name")
	}
	v.forget(k)
	if v.holds(k, "u1", "10", d1) {
		t.Fatal("held after forget")
	}
	for i := range maxVerified + 100 {
		v.set(objectKey{gvk: gvk, namespace: "ns", name: fmt.Sprint(i)}, "u", "1", d1)
	}
	if len(v.entries) > maxVerified {
		t.Fatalf("%d entries, bound %d", len(v.entries), maxVerified)
	}
}

// writeItemKey identifies list items exactly as itemKey does: two items get
// the same written key if and only if itemKey gives them equal path
// elements (schema defaults, number types and key order included), and
// items it cannot write fall back without a collision.
func TestWriteItemKeyIsItemKey(t *testing.T) {
	sh := deploymentShape(t)
	pod := sh.field("spec").field("template").field("spec")
	ports := pod.field("containers").elem().field("ports")
	finalizers := sh.field("metadata").field("finalizers")
	cases := []struct {
		name  string
		sh    shape
		items []any
	}{
		{"ports (map list: containerPort, protocol defaulting to TCP)", ports, []any{
			map[string]any{"containerPort": int64(80)},
			map[string]any{"containerPort": int64(80), "protocol": "TCP"},
			map[string]any{"containerPort": float64(80)},
			map[string]any{"containerPort": int64(80), "protocol": "UDP"},
			map[string]any{"containerPort": "80"},
			map[string]any{"containerPort": int64(8080)},
			map[string]any{"containerPort": 80.5},
			map[string]any{"containerPort": true},
			map[string]any{"protocol": "TCP"},
			map[string]any{"containerPort": map[string]any{"x": int64(1)}},
			map[string]any{"containerPort": []any{int64(80)}},
			map[string]any{"name": "http"},
			"not a map",
		}},
		{"finalizers (set)", finalizers, []any{"a", "b", "1", int64(1), float64(1), true, nil, map[string]any{}, []any{"a"}}},
	}
	for _, c := range cases {
		kind, keys := c.sh.list()
		if kind == atomicList {
			t.Fatalf("%s: not a keyed list in the schema", c.name)
		}
		written := func(it any) string {
			var b strings.Builder
			if !writeItemID(&b, it, c.sh, kind, keys) {
				return "none"
			}
			return b.String()
		}
		for i, a := range c.items {
			for j, b := range c.items {
				pa, oka := c.sh.itemKey(kind, keys, a)
				pb, okb := c.sh.itemKey(kind, keys, b)
				same := oka == okb && (!oka || pa.String() == pb.String())
				if got := written(a) == written(b); got != same {
					t.Errorf("%s: items %d (%v) and %d (%v): written keys equal %v (%q, %q), itemKey equal %v", c.name, i, a, j, b, got, written(a), written(b), same)
				}
			}
		}
	}
}

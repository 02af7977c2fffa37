package reconciler_test

import (
	"maps"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/reconciler"
)

// same reports whether a and b are one map.
func same(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// TestSharedMapsMakesEqualMapsOne: a bundle's children decoded separately
// carry equal label maps in separate memory; after the transform equal maps
// are one map, unequal ones stay apart, and every object reads as before
// (managedFields aside).
func TestSharedMapsMakesEqualMapsOne(t *testing.T) {
	labels := func(name string) map[string]string {
		return map[string]string{strings.Clone("app"): strings.Clone(name), "ensure.opkit.dev/owner-uid": "u-" + name}
	}
	app := func(name string) map[string]string {
		return map[string]string{strings.Clone("app"): strings.Clone(name)}
	}
	dep := func(name string) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels(name),
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: app(name)},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: app(name)}},
			},
		}
	}
	svc := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels(name)}, Spec: corev1.ServiceSpec{Selector: app(name)}}
	}
	s := reconciler.NewSharedMaps()
	d1, s1, d2 := dep("a"), svc("a"), dep("b")
	want := []map[string]string{maps.Clone(d1.Labels), maps.Clone(d1.Spec.Selector.MatchLabels), maps.Clone(d2.Labels)}
	if same(d1.Labels, s1.Labels) || same(d1.Spec.Selector.MatchLabels, d1.Spec.Template.Labels) {
		t.Fatal("the test's objects already share maps: the test proves nothing")
	}
	for _, o := range []any{d1, s1, d2} {
		if out, err := s.Transform(o); err != nil || out != o {
			t.Fatalf("Transform = %v, %v; want the object itself", out, err)
		}
	}
	if len(d1.ManagedFields) != 0 {
		t.Fatal("managedFields kept")
	}
	if !maps.Equal(d1.Labels, want[0]) || !maps.Equal(d1.Spec.Selector.MatchLabels, want[1]) || !maps.Equal(d2.Labels, want[2]) {
		t.Fatalf("maps changed: %v %v %v", d1.Labels, d1.Spec.Selector.MatchLabels, d2.Labels)
	}
	if !same(d1.Labels, s1.Labels) {
		t.Error("equal labels of a Deployment and a Service are two maps")
	}
	if !same(d1.Spec.Selector.MatchLabels, d1.Spec.Template.Labels) || !same(d1.Spec.Selector.MatchLabels, s1.Spec.Selector) {
		t.Error("equal selector, template labels and Service selector are not one map")
	}
	if same(d1.Labels, d2.Labels) || same(d1.Spec.Selector.MatchLabels, d2.Spec.Selector.MatchLabels) {
		t.Error("unequal maps were merged")
	}
	if out, err := s.Transform("not an object"); err != nil || out != "not an object" {
		t.Fatalf("a non-object: %v, %v", out, err)
	}
}

// TestSharedMapsSharesEnsureRecordAnnotations: the annotations of ensure's
// children of different owners (its record, nothing of the owner) are one
// map once equal; an ensure child's differing annotations stay apart, and
// annotations without ensure's record stay one map per object.
func TestSharedMapsSharesEnsureRecordAnnotations(t *testing.T) {
	const rec = `{"f:data":{"f:k":{}}}`
	cm := func(annotations map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: annotations}}
	}
	s := reconciler.NewSharedMaps()
	objs := []*corev1.ConfigMap{
		cm(map[string]string{ensure.AnnotationDeclared: strings.Clone(rec)}),
		cm(map[string]string{ensure.AnnotationDeclared: strings.Clone(rec)}),
		cm(map[string]string{ensure.AnnotationDeclared: strings.Clone(rec), "note": "x"}),
		cm(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}),
		cm(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}),
	}
	want := make([]map[string]string, len(objs))
	for i, o := range objs {
		want[i] = maps.Clone(o.Annotations)
		if _, err := s.Transform(o); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(o.Annotations, want[i]) {
			t.Fatalf("object %d: annotations %v, want %v", i, o.Annotations, want[i])
		}
	}
	if !same(objs[0].Annotations, objs[1].Annotations) {
		t.Error("equal ensure records are two maps")
	}
	if same(objs[0].Annotations, objs[2].Annotations) {
		t.Error("unequal annotations were merged")
	}
	if same(objs[3].Annotations, objs[4].Annotations) {
		t.Error("annotations without ensure's record were shared (a table entry per unique map)")
	}
}

// TestSharedMapsMakesEqualOwnerReferencesOne: the children of one owner,
// decoded separately, each carry the owner's controller reference in a list
// of their own; after the transform equal lists are one list, unequal ones
// (another owner, or the same owner without controller) stay apart, and
// every list reads as before.
func TestSharedMapsMakesEqualOwnerReferencesOne(t *testing.T) {
	ref := func(owner string, controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "example.opkit.dev/v1", Kind: "WebApp", Name: owner,
			UID: types.UID("uid-" + owner), Controller: ptr.To(controller), BlockOwnerDeletion: ptr.To(true)}}
	}
	child := func(name, owner string, controller bool) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: ref(owner, controller)}}
	}
	a1, a2, b1, a3 := child("a-1", "a", true), child("a-2", "a", true), child("b-1", "b", true), child("a-3", "a", false)
	one := func(x, y *corev1.ConfigMap) bool { return &x.OwnerReferences[0] == &y.OwnerReferences[0] }
	if one(a1, a2) {
		t.Fatal("the test's objects already share their lists: the test proves nothing")
	}
	s := reconciler.NewSharedMaps()
	for _, o := range []*corev1.ConfigMap{a1, a2, b1, a3} {
		if _, err := s.Transform(o); err != nil {
			t.Fatal(err)
		}
	}
	if !one(a1, a2) {
		t.Error("equal ownerReferences of one owner's children are two lists")
	}
	if one(a1, b1) || one(a1, a3) {
		t.Error("unequal ownerReferences were merged")
	}
	for _, c := range []struct {
		o          *corev1.ConfigMap
		owner      string
		controller bool
	}{{a1, "a", true}, {a2, "a", true}, {b1, "b", true}, {a3, "a", false}} {
		if !reflect.DeepEqual(c.o.OwnerReferences, ref(c.owner, c.controller)) {
			t.Errorf("%s: ownerReferences changed: %+v", c.o.Name, c.o.OwnerReferences)
		}
	}
}

package reconciler_test

import (
	"slices"
	"strings"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/opkit/opkit/reconciler"
)

// TestCompactMetadataSharesEqualStrings: two objects decoded separately
// carry equal label and annotation strings in separate memory; after the
// transform they read the same, managedFields are gone, and the equal
// strings share one copy.
func TestCompactMetadataSharesEqualStrings(t *testing.T) {
	decoded := func(name string) *appsv1.Deployment {
		// strings.Clone: separate memory per object, as a decoder leaves it.
		record := strings.Clone(`{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{}}}}}`)
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
			Name:          name,
			Labels:        map[string]string{strings.Clone("ensure.opkit.dev/manager"): strings.Clone("webapp"), "app": name},
			Annotations:   map[string]string{strings.Clone("ensure.opkit.dev/declared"): record},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "webapp", Operation: metav1.ManagedFieldsOperationApply}},
		}}
	}
	a, b := decoded("a"), decoded("b")
	if unsafe.StringData(a.Annotations["ensure.opkit.dev/declared"]) == unsafe.StringData(b.Annotations["ensure.opkit.dev/declared"]) {
		t.Fatal("the test's objects already share the record: the test proves nothing")
	}
	for _, d := range []*appsv1.Deployment{a, b} {
		out, err := reconciler.CompactMetadata(d)
		if err != nil || out != any(d) {
			t.Fatalf("CompactMetadata = %v, %v; want the object itself", out, err)
		}
		if len(d.ManagedFields) != 0 {
			t.Fatalf("managedFields kept: %v", d.ManagedFields)
		}
		if d.Labels["app"] != d.Name || d.Labels["ensure.opkit.dev/manager"] != "webapp" || len(d.Labels) != 2 {
			t.Fatalf("labels changed: %v", d.Labels)
		}
	}
	ra, rb := a.Annotations["ensure.opkit.dev/declared"], b.Annotations["ensure.opkit.dev/declared"]
	if ra != rb || !strings.HasPrefix(ra, `{"f:spec"`) {
		t.Fatalf("annotation changed: %q, %q", ra, rb)
	}
	if unsafe.StringData(ra) != unsafe.StringData(rb) {
		t.Fatal("equal annotation values still have one copy per object")
	}
	if _, err := reconciler.CompactMetadata("not an object"); err != nil {
		t.Fatalf("a non-object: %v", err)
	}
}

// customResource has the status.conditions field of a typical custom
// resource; only its conditions matter to the test.
type customResource struct {
	metav1.ObjectMeta
	Status struct {
		Conditions []metav1.Condition
	}
}

func (c *customResource) DeepCopyObject() runtime.Object {
	out := *c
	out.Status.Conditions = slices.Clone(c.Status.Conditions)
	return &out
}
func (*customResource) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// TestCompactMetadataSharesOwnerAndConditionStrings: the children of one
// owner, decoded separately, carry its apiVersion, kind, name and uid in
// their ownerReferences, and objects of a kind carry the same condition
// strings; after the transform each such string has one copy, the
// ownerReferences' booleans point to shared values, and every field reads
// as before.
func TestCompactMetadataSharesOwnerAndConditionStrings(t *testing.T) {
	ref := func() metav1.OwnerReference {
		return metav1.OwnerReference{
			APIVersion: strings.Clone("example.opkit.dev/v1"), Kind: strings.Clone("WebApp"),
			Name: strings.Clone("app-1"), UID: types.UID(strings.Clone("0f6a3c1e-5b7d-4c2a-9e8f-1a2b3c4d5e6f")),
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false),
		}
	}
	depCond := func() appsv1.DeploymentCondition {
		return appsv1.DeploymentCondition{
			Type: appsv1.DeploymentConditionType(strings.Clone("Available")), Status: corev1.ConditionStatus(strings.Clone("True")),
			Reason: strings.Clone("MinimumReplicasAvailable"), Message: strings.Clone("Deployment has minimum availability."),
		}
	}
	cond := func() metav1.Condition {
		return metav1.Condition{
			Type: strings.Clone("Ready"), Status: metav1.ConditionStatus(strings.Clone("True")),
			Reason: strings.Clone("Available"), Message: strings.Clone("all children are ready"), ObservedGeneration: 3,
		}
	}
	newDep := func() *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "app-1", OwnerReferences: []metav1.OwnerReference{ref()}}}
		d.Status.Conditions = []appsv1.DeploymentCondition{depCond()}
		return d
	}
	newCR := func() *customResource {
		c := &customResource{ObjectMeta: metav1.ObjectMeta{Name: "app-1", OwnerReferences: []metav1.OwnerReference{ref()}}}
		c.Status.Conditions = []metav1.Condition{cond()}
		return c
	}
	d1, d2, c1, c2 := newDep(), newDep(), newCR(), newCR()
	r1, r2 := &d1.OwnerReferences[0], &c2.OwnerReferences[0]
	if unsafe.StringData(r1.Name) == unsafe.StringData(r2.Name) || r1.Controller == r2.Controller {
		t.Fatal("the test's objects already share memory: the test proves nothing")
	}
	for _, o := range []any{d1, d2, c1, c2} {
		if _, err := reconciler.CompactMetadata(o); err != nil {
			t.Fatal(err)
		}
	}
	if !equality.Semantic.DeepEqual(*r1, ref()) || !equality.Semantic.DeepEqual(*r2, ref()) {
		t.Fatalf("ownerReferences changed: %+v, %+v", *r1, *r2)
	}
	for _, p := range [][2]string{{r1.APIVersion, r2.APIVersion}, {r1.Kind, r2.Kind}, {r1.Name, r2.Name}, {string(r1.UID), string(r2.UID)}} {
		if unsafe.StringData(p[0]) != unsafe.StringData(p[1]) {
			t.Errorf("ownerReference string %q still has one copy per object", p[0])
		}
	}
	if r1.Controller != r2.Controller || r1.BlockOwnerDeletion != r2.BlockOwnerDeletion {
		t.Error("ownerReference booleans still have one allocation per object")
	}
	a, b := d1.Status.Conditions[0], d2.Status.Conditions[0]
	if a != depCond() || b != depCond() {
		t.Fatalf("Deployment conditions changed: %+v, %+v", a, b)
	}
	if unsafe.StringData(string(a.Type)) != unsafe.StringData(string(b.Type)) || unsafe.StringData(a.Reason) != unsafe.StringData(b.Reason) ||
		unsafe.StringData(a.Message) != unsafe.StringData(b.Message) || unsafe.StringData(string(a.Status)) != unsafe.StringData(string(b.Status)) {
		t.Error("Deployment condition strings still have one copy per object")
	}
	x, y := c1.Status.Conditions[0], c2.Status.Conditions[0]
	if !equality.Semantic.DeepEqual(x, cond()) || !equality.Semantic.DeepEqual(y, cond()) {
		t.Fatalf("conditions changed: %+v, %+v", x, y)
	}
	if unsafe.StringData(x.Type) != unsafe.StringData(y.Type) || unsafe.StringData(x.Reason) != unsafe.StringData(y.Reason) ||
		unsafe.StringData(x.Message) != unsafe.StringData(y.Message) || unsafe.StringData(string(x.Status)) != unsafe.StringData(string(y.Status)) {
		t.Error("status.conditions strings still have one copy per object")
	}
}

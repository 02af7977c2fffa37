package reconciler_test

import (
	"strings"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

package webhook_test

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/opkit/opkit/webhook"
	v1 "github.com/opkit/opkit/webhook/internal/gizmo/v1"
)

// FuzzAdmissionRequests feeds arbitrary bytes as the object (and old object)
// of admission requests to the defaulting and validating webhooks: whatever
// arrives, they answer — never panic, never an empty response — and a body
// that is not a Gizmo is denied, not admitted. Explore with
// `go test -fuzz FuzzAdmissionRequests ./webhook/`.
func FuzzAdmissionRequests(f *testing.F) {
	for _, seed := range []string{
		`{"apiVersion":"test.opkit.dev/v1","kind":"Gizmo","metadata":{"name":"a","namespace":"ns"},"spec":{"size":1,"source":{"git":"g"}}}`,
		`{"apiVersion":"test.opkit.dev/v1","kind":"Other"}`,
		`{"apiVersion":"v1","kind":"Gizmo","spec":"x"}`,
		`{"spec":{"size":"nine"}}`,
		`[]`, `null`, ``, `{`, `"x"`, `{"metadata":{"name":5}}`,
	} {
		f.Add([]byte(seed), []byte(seed), uint8(0))
	}
	mutating, err := webhook.NewDefaultingWebhook(scheme, &v1.Gizmo{}, gizmoDefaulter)
	if err != nil {
		f.Fatal(err)
	}
	validating, err := webhook.NewValidatingWebhook(scheme, &v1.Gizmo{}, gizmoValidator(nil))
	if err != nil {
		f.Fatal(err)
	}
	ops := []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect}
	f.Fuzz(func(t *testing.T, obj, old []byte, op uint8) {
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "u", Operation: ops[int(op)%len(ops)], Name: "a", Namespace: "ns",
			Kind:      metav1.GroupVersionKind{Group: "test.opkit.dev", Version: "v1", Kind: "Gizmo"},
			Resource:  metav1.GroupVersionResource{Group: "test.opkit.dev", Version: "v1", Resource: "gizmos"},
			Object:    runtime.RawExtension{Raw: obj},
			OldObject: runtime.RawExtension{Raw: old},
		}}
		for _, wh := range []*admission.Webhook{mutating, validating} {
			resp := wh.Handle(context.Background(), req)
			if resp.Result == nil && !resp.Allowed {
				t.Fatalf("denied without a reason for %q", obj)
			}
			if resp.Allowed && !decodesAsGizmo(obj) && req.Operation != admissionv1.Delete && req.Operation != admissionv1.Connect {
				t.Fatalf("admitted %s of a body that is not a Gizmo: %q", req.Operation, obj)
			}
		}
	})
}

// decodesAsGizmo reports whether raw is a JSON object that decodes into a
// Gizmo (with no kind, or Gizmo's).
func decodesAsGizmo(raw []byte) bool {
	g := &v1.Gizmo{}
	if err := admission.NewDecoder(scheme).DecodeRaw(runtime.RawExtension{Raw: raw}, g); err != nil {
		return false
	}
	return g.Kind == "" || g.Kind == "Gizmo"
}

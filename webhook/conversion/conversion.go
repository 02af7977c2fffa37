// Package conversion helps write lossless hub/spoke conversions for
// multi-version CRDs served through controller-runtime's conversion webhook
// (types implement sigs.k8s.io/controller-runtime/pkg/conversion.Hub and
// Convertible; builder.WebhookManagedBy(mgr, hub).Complete() serves "/convert").
//
// Guarantees:
//   - [Stash] stores the fields a spoke version cannot hold as JSON in ONE
//     annotation, [DataAnnotation], on the spoke; [Restore] reads them back
//     into the hub and removes the annotation from the object it read, so the
//     hub never carries it and hub→spoke→hub loses nothing.
//   - A zero value is never stashed (the annotation is removed instead), so
//     spoke→hub→spoke of an object that never had hub-only fields is exact.
//   - Nothing else in the object's metadata is touched.
//
// Usage, in the spoke's conversion methods (hub-only field: Spec.Tier):
//
//	func (s *Gizmo) ConvertTo(h conversion.Hub) error {
//		dst := h.(*v1.Gizmo)
//		s.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
//		... copy fields ...
//		var lost v1.GizmoSpecV1Only
//		if _, err := opconv.Restore(&dst.ObjectMeta, &lost); err != nil { return err }
//		dst.Spec.Tier = lost.Tier
//		return nil
//	}
//
//	func (s *Gizmo) ConvertFrom(h conversion.Hub) error {
//		src := h.(*v1.Gizmo)
//		src.ObjectMeta.DeepCopyInto(&s.ObjectMeta)
//		... copy fields ...
//		return opconv.Stash(&s.ObjectMeta, lostFields{Tier: src.Spec.Tier})
//	}
//
// Prove it with github.com/opkit/opkit/webhook/webhooktest.FuzzConversion.
//
// Caveat shared by every annotation-based scheme: a client that edits the spoke
// and drops annotations (e.g. kubectl replace with an old manifest) drops the
// stashed fields with them.
package conversion

import (
	"encoding/json"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationPrefix is the prefix of every annotation this package writes.
const AnnotationPrefix = "webhook.opkit.dev/"

// DataAnnotation holds, on a spoke version, the JSON of the hub fields that
// spoke cannot represent. It is written by [Stash] during hub→spoke conversion
// and removed by [Restore] during spoke→hub conversion; users should not edit it.
const DataAnnotation = AnnotationPrefix + "conversion-data"

// Stash records v as JSON in obj's [DataAnnotation]. When v is the zero value
// of its type (or nil) the annotation is removed instead, so objects without
// hub-only data carry no annotation. It fails only when v cannot be marshalled.
func Stash(obj metav1.Object, v any) error {
	if v == nil || reflect.ValueOf(v).IsZero() {
		removeAnnotation(obj)
		return nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("conversion: stash for %s: %w", ref(obj), err)
	}
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[DataAnnotation] = string(data)
	obj.SetAnnotations(ann)
	return nil
}

// Restore unmarshals obj's [DataAnnotation] into v (a pointer) and removes the
// annotation from obj. ok is false, and v untouched, when obj has no such
// annotation. Call it on the hub's copy of the metadata, never on the spoke
// being converted (conversion must not change its source). A malformed
// annotation is an error naming the object; the annotation is then kept.
func Restore(obj metav1.Object, v any) (ok bool, err error) {
	data, found := obj.GetAnnotations()[DataAnnotation]
	if !found {
		return false, nil
	}
	if err := json.Unmarshal([]byte(data), v); err != nil {
		return false, fmt.Errorf("conversion: restore for %s: annotation %s: %w", ref(obj), DataAnnotation, err)
	}
	removeAnnotation(obj)
	return true, nil
}

func removeAnnotation(obj metav1.Object) {
	ann := obj.GetAnnotations()
	if _, ok := ann[DataAnnotation]; !ok {
		return
	}
	delete(ann, DataAnnotation)
	if len(ann) == 0 {
		ann = nil
	}
	obj.SetAnnotations(ann)
}

func ref(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

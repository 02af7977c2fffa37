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

package webhook_test

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/opkit/opkit/webhook"
	v1 "github.com/opkit/opkit/webhook/internal/gizmo/v1"
)

// protectedAnnotation blocks deletion of a Gizmo in the test validator.
const protectedAnnotation = "test.opkit.dev/protected"

// gizmoDefaulter sets spec.size to 1 and spec.color to "blue" when unset.
var gizmoDefaulter = webhook.DefaultFunc[*v1.Gizmo](func(_ context.Context, g *v1.Gizmo) error {
	if g.Spec.Size == nil {
		one := int32(1)
		g.Spec.Size = &one
	}
	if g.Spec.Color == "" {
		g.Spec.Color = "blue"
	}
	return nil
})

func gizmoValidator(r client.Reader) webhook.Validator[*v1.Gizmo] {
	spec := func(ctx context.Context, g *v1.Gizmo) (admission.Warnings, field.ErrorList) {
		p := field.NewPath("spec")
		var errs field.ErrorList
		var warnings admission.Warnings
		if g.Spec.Size != nil {
			errs = append(errs, webhook.InRange(p.Child("size"), *g.Spec.Size, 1, 10)...)
		}
		errs = append(errs, webhook.ExactlyOneOf(p.Child("source"),
			webhook.Member("git", g.Spec.Source.Git != ""),
			webhook.Member("image", g.Spec.Source.Image != ""))...)
		if g.Spec.ConfigMapRef != "" {
			errs = append(errs, webhook.ReferenceExists(ctx, r, p.Child("configMapRef"),
				client.ObjectKey{Namespace: g.Namespace, Name: g.Spec.ConfigMapRef}, &corev1.ConfigMap{})...)
		}
		if g.Spec.Legacy != "" {
			warnings = append(warnings, "spec.legacy is deprecated; use spec.tier")
		}
		return warnings, errs
	}
	return webhook.Validator[*v1.Gizmo]{
		Create: spec,
		Update: func(ctx context.Context, oldG, newG *v1.Gizmo) (admission.Warnings, field.ErrorList) {
			w, errs := spec(ctx, newG)
			return w, append(errs, webhook.Immutable(field.NewPath("spec", "region"), oldG.Spec.Region, newG.Spec.Region)...)
		},
		Delete: func(_ context.Context, g *v1.Gizmo) (admission.Warnings, field.ErrorList) {
			if strings.EqualFold(g.Annotations[protectedAnnotation], "true") {
				return nil, field.ErrorList{field.Forbidden(field.NewPath("metadata", "annotations").Key(protectedAnnotation),
					"a protected Gizmo cannot be deleted; remove the annotation first")}
			}
			return nil, nil
		},
	}
}

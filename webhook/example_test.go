package webhook_test

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/opkit/opkit/webhook"
	v1 "github.com/opkit/opkit/webhook/internal/gizmo/v1"
)

func ExampleExactlyOneOf() {
	source := field.NewPath("spec", "source")
	fmt.Println(webhook.ExactlyOneOf(source, webhook.Member("git", true), webhook.Member("image", true)).ToAggregate())
	fmt.Println(webhook.ExactlyOneOf(source, webhook.Member("git", false), webhook.Member("image", false)).ToAggregate())
	// Output:
	// spec.source.image: Forbidden: may not be set together with spec.source.git: only one of spec.source.git, spec.source.image may be set
	// spec.source: Required value: exactly one of spec.source.git, spec.source.image must be set
}

func ExampleValidator() {
	v := webhook.Validator[*v1.Gizmo]{
		Update: func(_ context.Context, oldG, newG *v1.Gizmo) (admission.Warnings, field.ErrorList) {
			p := field.NewPath("spec")
			errs := webhook.Immutable(p.Child("region"), oldG.Spec.Region, newG.Spec.Region)
			if newG.Spec.Size != nil {
				errs = append(errs, webhook.InRange(p.Child("size"), *newG.Spec.Size, 1, 10)...)
			}
			return admission.Warnings{"spec.legacy is deprecated"}, errs
		},
	}
	oldG, newG := &v1.Gizmo{}, &v1.Gizmo{}
	oldG.Name, newG.Name = "g", "g"
	oldG.Spec.Region, newG.Spec.Region = "eu", "us"
	size := int32(42)
	newG.Spec.Size = &size
	// In a webhook the kind comes from the admission request in ctx.
	newG.Kind, newG.APIVersion = "Gizmo", "test.opkit.dev/v1"

	warnings, err := v.ValidateUpdate(context.Background(), oldG, newG)
	fmt.Println(warnings)
	fmt.Println(err)
	_, err = v.ValidateCreate(context.Background(), newG) // no Create func: allowed
	fmt.Println(err)
	// Output:
	// [spec.legacy is deprecated]
	// Gizmo.test.opkit.dev "g" is invalid: [spec.region: Forbidden: field is immutable, spec.size: Invalid value: 42: must be between 1 and 10, inclusive]
	// <nil>
}

package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/opkit/opkit/webhook"
	v1 "github.com/opkit/opkit/webhook/internal/gizmo/v1"
	"github.com/opkit/opkit/webhook/internal/gizmo/v1alpha1"
	"github.com/opkit/opkit/webhook/webhooktest"
)

func errStrings(errs field.ErrorList) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

func TestRules(t *testing.T) {
	p := field.NewPath("spec")
	cases := []struct {
		name string
		errs field.ErrorList
		want []string
	}{
		{"immutable equal", webhook.Immutable(p.Child("a"), "x", "x"), nil},
		{"immutable changed", webhook.Immutable(p.Child("a"), "x", "y"), []string{"spec.a: Forbidden: field is immutable"}},
		{"immutable nil vs empty", webhook.Immutable(p.Child("m"), map[string]string(nil), map[string]string{}), nil},
		{"immutable quantity by value", webhook.Immutable(p.Child("q"), resource.MustParse("1"), resource.MustParse("1000m")), nil},
		{"once-set from zero", webhook.ImmutableOnceSet(p.Child("id"), "", "abc"), nil},
		{"once-set changed", webhook.ImmutableOnceSet(p.Child("id"), "abc", "def"), []string{"spec.id: Forbidden: field is immutable once set"}},
		{"exactly one: one", webhook.ExactlyOneOf(p, webhook.Member("a", false), webhook.Member("b", true)), nil},
		{"exactly one: none", webhook.ExactlyOneOf(p, webhook.Member("a", false), webhook.Member("b", false)),
			[]string{"spec: Required value: exactly one of spec.a, spec.b must be set"}},
		{"exactly one: three", webhook.ExactlyOneOf(p, webhook.Member("a", true), webhook.Member("b", true), webhook.Member("c", true)), []string{
			"spec.b: Forbidden: may not be set together with spec.a: only one of spec.a, spec.b, spec.c may be set",
			"spec.c: Forbidden: may not be set together with spec.a: only one of spec.a, spec.b, spec.c may be set",
		}},
		{"at most one: none", webhook.AtMostOneOf(p, webhook.Member("a", false)), nil},
		{"range inside", webhook.InRange(p.Child("n"), 5, 1, 10), nil},
		{"range edges", append(webhook.InRange(p.Child("n"), 1, 1, 10), webhook.InRange(p.Child("n"), 10, 1, 10)...), nil},
		{"range below", webhook.InRange(p.Child("n"), 0, 1, 10), []string{"spec.n: Invalid value: 0: must be between 1 and 10, inclusive"}},
		{"range float above", webhook.InRange(p.Child("f"), 1.5, 0.0, 1.0), []string{"spec.f: Invalid value: 1.5: must be between 0 and 1, inclusive"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(tc.errs)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func requestContext(op admissionv1.Operation) context.Context {
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op, Name: "from-request", Namespace: "ns",
		Kind: metav1.GroupVersionKind{Group: "test.opkit.dev", Version: "v1", Kind: "Gizmo"},
	}})
}

func TestValidatorAggregatesFieldErrorsIntoOneInvalid(t *testing.T) {
	v := gizmoValidator(nil)
	g := newGizmo("ns", "")
	g.Spec.Size = ptrTo[int32](0)
	g.Spec.Source.Git = "g"
	g.Spec.Legacy = "x"
	warnings, err := v.ValidateCreate(requestContext(admissionv1.Create), g)
	var st *apierrors.StatusError
	if !errors.As(err, &st) || !apierrors.IsInvalid(err) {
		t.Fatalf("want one Invalid status error, got %T %v", err, err)
	}
	if d := st.ErrStatus.Details; d.Group != "test.opkit.dev" || d.Kind != "Gizmo" || d.Name != "from-request" || len(d.Causes) != 2 {
		t.Fatalf("details = %+v", d)
	}
	if len(warnings) != 1 {
		t.Fatalf("warnings = %q, want the deprecation warning even though denied", warnings)
	}
}

func TestUnsetValidationFuncsAllow(t *testing.T) {
	var v webhook.Validator[*v1.Gizmo]
	ctx := requestContext(admissionv1.Create)
	g := newGizmo("ns", "x")
	if _, err := v.ValidateCreate(ctx, g); err != nil {
		t.Fatal(err)
	}
	if _, err := v.ValidateUpdate(ctx, g, g); err != nil {
		t.Fatal(err)
	}
	if _, err := v.ValidateDelete(ctx, g); err != nil {
		t.Fatal(err)
	}
	var d webhook.DefaultFunc[*v1.Gizmo]
	if err := d.Default(ctx, g); err != nil {
		t.Fatal(err)
	}
}

func TestPanicsBecomeDenials(t *testing.T) {
	ctx := requestContext(admissionv1.Update)
	v := webhook.Validator[*v1.Gizmo]{
		Update: func(context.Context, *v1.Gizmo, *v1.Gizmo) (admission.Warnings, field.ErrorList) { panic("nil map") },
	}
	_, err := v.ValidateUpdate(ctx, newGizmo("ns", "x"), newGizmo("ns", "x"))
	if err == nil || !strings.Contains(err.Error(), "validating webhook for ns/x panicked") || !strings.Contains(err.Error(), "nil map") {
		t.Fatalf("got %v", err)
	}
	d := webhook.DefaultFunc[*v1.Gizmo](func(context.Context, *v1.Gizmo) error { panic(fmt.Errorf("oops")) })
	if err := d.Default(ctx, newGizmo("ns", "y")); err == nil || !strings.Contains(err.Error(), "defaulting webhook for ns/y panicked") {
		t.Fatalf("got %v", err)
	}
}

func TestGizmoDefaultingIsIdempotent(t *testing.T) {
	withValues := newGizmo("ns", "set")
	withValues.Spec.Size, withValues.Spec.Color = ptrTo[int32](3), "red"
	webhooktest.DefaultingIsIdempotent(t, gizmoDefaulter, newGizmo("ns", "empty"), withValues, &v1.Gizmo{})
}

// recorder captures what a helper reports instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestIdempotenceHelperCatchesBadDefaulters(t *testing.T) {
	appends := webhook.DefaultFunc[*v1.Gizmo](func(_ context.Context, g *v1.Gizmo) error {
		g.Spec.Color += "!"
		return nil
	})
	r := &recorder{TB: t}
	webhooktest.DefaultingIsIdempotent(r, appends, newGizmo("ns", "x"))
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "defaulting is not idempotent") || !strings.Contains(r.errs[0], `+ 	`) && !strings.Contains(r.errs[0], `"!!"`) {
		t.Fatalf("reports = %q", r.errs)
	}

	n := 0
	counter := webhook.DefaultFunc[*v1.Gizmo](func(_ context.Context, g *v1.Gizmo) error {
		n++
		if g.Spec.Region == "" {
			g.Spec.Region = fmt.Sprintf("r%d", n)
		}
		return nil
	})
	r = &recorder{TB: t}
	webhooktest.DefaultingIsIdempotent(r, counter, newGizmo("ns", "x"))
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "not deterministic") {
		t.Fatalf("reports = %q", r.errs)
	}

	failing := webhook.DefaultFunc[*v1.Gizmo](func(context.Context, *v1.Gizmo) error { return errors.New("no") })
	r = &recorder{TB: t}
	webhooktest.DefaultingIsIdempotent(r, failing, newGizmo("ns", "x"))
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "Default: no") {
		t.Fatalf("reports = %q", r.errs)
	}
}

// FuzzGizmoConversion runs its seeds with every `go test`; explore with
// `go test -fuzz FuzzGizmoConversion ./webhook/`.
func FuzzGizmoConversion(f *testing.F) {
	webhooktest.FuzzConversion(f, &v1.Gizmo{}, &v1alpha1.Gizmo{})
}

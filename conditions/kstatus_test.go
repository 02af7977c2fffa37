package conditions_test

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/outcome"
)

func kstatusOf(t *testing.T, obj client.Object) status.Status {
	t.Helper()
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		u = &unstructured.Unstructured{Object: content}
		u.SetGroupVersionKind(gizmoGV.WithKind("Gizmo"))
	}
	res, err := status.Compute(u)
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

// TestKstatus checks that what opkit writes means the same to kstatus
// (Flux, Argo CD, kubectl wait) as it does to opkit.
func TestKstatus(t *testing.T) {
	steps := func(fs ...func(client.Object) error) func(client.Object) error {
		return func(o client.Object) error {
			for _, f := range fs {
				if err := f(o); err != nil {
					return err
				}
			}
			return nil
		}
	}
	ready := func(o client.Object) error { return conditions.MarkReady(o, "Succeeded", "all good") }
	reconciling := func(o client.Object) error { return conditions.MarkReconciling(o, "Progressing", "rolling out") }
	stalled := func(o client.Object) error { return conditions.MarkStalled(o, "InvalidSpec", "bad size") }
	apply := func(err error) func(client.Object) error {
		return func(o client.Object) error { return conditions.ApplyOutcome(o, err) }
	}
	bumpGeneration := func(o client.Object) error { o.SetGeneration(o.GetGeneration() + 1); return nil }
	tests := []struct {
		name string
		do   func(client.Object) error
		want status.Status
	}{
		{"MarkReady", ready, status.CurrentStatus},
		{"MarkReconciling", reconciling, status.InProgressStatus},
		{"MarkReconciling after Ready", steps(ready, reconciling), status.InProgressStatus},
		{"MarkStalled", stalled, status.FailedStatus},
		{"MarkStalled after Reconciling", steps(reconciling, stalled), status.FailedStatus},
		{"MarkReady after Stalled", steps(stalled, ready), status.CurrentStatus},
		{"ApplyOutcome terminal", apply(outcome.Terminal("InvalidSpec", errors.New("x"))), status.FailedStatus},
		{"ApplyOutcome transient", apply(errors.New("x")), status.InProgressStatus},
		{"ApplyOutcome dependency", apply(outcome.DependencyNotReady("DB", "waiting", 0)), status.InProgressStatus},
		{"ApplyOutcome success then MarkReady after a transient error", steps(apply(errors.New("x")), apply(nil), ready), status.CurrentStatus},
		{"ApplyOutcome success keeps Ready", steps(ready, apply(nil)), status.CurrentStatus},
		{"spec changed after Ready: not Current until reconciled", steps(ready, bumpGeneration), status.InProgressStatus},
		{"SetSummary False + ApplyOutcome(nil)", steps(func(o client.Object) error {
			return conditions.Set(o, metav1.Condition{Type: "Available", Status: "False", Reason: "NoReplicas"})
		}, func(o client.Object) error {
			return conditions.SetSummary(o, conditions.Ready, conditions.WithPositive("Available"))
		}, apply(nil)), status.InProgressStatus},
		{"SetSummary True + ApplyOutcome(nil)", steps(func(o client.Object) error {
			return conditions.Set(o, metav1.Condition{Type: "Available", Status: "True", Reason: "Replicas"})
		}, func(o client.Object) error {
			return conditions.SetSummary(o, conditions.Ready, conditions.WithPositive("Available"))
		}, apply(nil)), status.CurrentStatus},
	}
	for _, tt := range tests {
		for _, obj := range []client.Object{gizmo(2), withObservedGeneration(uGizmo(2))} {
			t.Run(tt.name, func(t *testing.T) {
				if err := tt.do(obj); err != nil {
					t.Fatal(err)
				}
				if got := kstatusOf(t, obj); got != tt.want {
					cs, _ := conditions.List(obj)
					t.Fatalf("%T: kstatus %s, want %s (conditions %+v)", obj, got, tt.want, cs)
				}
			})
		}
	}
}

func withObservedGeneration(u *unstructured.Unstructured) *unstructured.Unstructured {
	_ = unstructured.SetNestedField(u.Object, int64(0), "status", "observedGeneration")
	return u
}

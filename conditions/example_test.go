package conditions_test

import (
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/outcome"
)

func printConditions(obj *unstructured.Unstructured) {
	cs, _ := conditions.List(obj)
	for _, c := range cs {
		fmt.Printf("%s=%s %s %q gen=%d at=%s\n", c.Type, c.Status, c.Reason, c.Message, c.ObservedGeneration, c.LastTransitionTime.UTC().Format(time.TimeOnly))
	}
}

func ExampleSet() {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "web", "generation": int64(1)}}}

	_ = conditions.Set(obj, metav1.Condition{Type: "Ready", Status: "False", Reason: "Starting", Message: "0 of 3"}, conditions.WithClock(clk))
	clk.Step(time.Minute) // same status: reason and message change, the timestamp does not
	_ = conditions.Set(obj, metav1.Condition{Type: "Ready", Status: "False", Reason: "Starting", Message: "2 of 3"}, conditions.WithClock(clk))
	printConditions(obj)
	clk.Step(time.Minute) // status changes: the timestamp moves
	_ = conditions.Set(obj, metav1.Condition{Type: "Ready", Status: "True", Reason: "Available", Message: "3 of 3"}, conditions.WithClock(clk))
	printConditions(obj)
	// Output:
	// Ready=False Starting "2 of 3" gen=1 at=10:00:00
	// Ready=True Available "3 of 3" gen=1 at=10:02:00
}

func ExampleApplyOutcome() {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "web", "generation": int64(2)}}}

	_ = conditions.ApplyOutcome(obj, outcome.Terminal("InvalidSpec", errors.New("spec.size must be <= 10")), conditions.WithClock(clk))
	printConditions(obj)
	// Output:
	// Ready=False InvalidSpec "spec.size must be <= 10" gen=2 at=10:00:00
	// Stalled=True InvalidSpec "spec.size must be <= 10" gen=2 at=10:00:00
}

func ExampleSummarize() {
	obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "web", "generation": int64(1)}}}
	_ = conditions.Set(obj, metav1.Condition{Type: "Available", Status: "True", Reason: "MinimumReplicasAvailable"})
	_ = conditions.Set(obj, metav1.Condition{Type: "Degraded", Status: "True", Reason: "ReplicasUnavailable", Message: "1 of 3 replicas unavailable"})

	c, _ := conditions.Summarize(obj, conditions.Ready,
		conditions.WithPositive("Available", "DatabaseReady"),
		conditions.WithNegative(conditions.Degraded))
	fmt.Println(c.Type, c.Status, c.Reason)
	fmt.Println(c.Message)
	// Output:
	// Ready False ReplicasUnavailable
	// Degraded: 1 of 3 replicas unavailable; DatabaseReady: Unknown (not yet reported)
}

func ExampleMirror() {
	parent := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "web", "generation": int64(3)}}}
	child := &appsv1.Deployment{}
	child.Namespace, child.Name = "prod", "web"
	child.Status.Conditions = []appsv1.DeploymentCondition{{
		Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse,
		Reason: "MinimumReplicasUnavailable", Message: "Deployment does not have minimum availability.",
	}}

	_ = conditions.Mirror(parent, child, "Available", "DeploymentAvailable")
	_ = conditions.Mirror(parent, child, "ReplicaFailure", "ReplicasHealthy")
	for _, c := range mustConditions(parent) {
		fmt.Printf("%s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	// Output:
	// DeploymentAvailable=False MinimumReplicasUnavailable: Deployment does not have minimum availability.
	// ReplicasHealthy=Unknown NotYetReported: Deployment prod/web has not reported ReplicaFailure
}

func mustConditions(obj *unstructured.Unstructured) []metav1.Condition {
	cs, err := conditions.List(obj)
	if err != nil {
		panic(err)
	}
	return cs
}

// An operator whose summary condition is its own ("Available") gets the
// taxonomy's conditions on that type, and after it recovers nothing the
// taxonomy wrote is left behind.
func ExampleWithSummaryType() {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "web", "generation": int64(3)}}}
	available := conditions.WithSummaryType("Available")

	_ = conditions.ApplyOutcome(obj, outcome.Terminal("QuotaExceeded", errors.New("project quota of 10 buckets reached")), available, conditions.WithClock(clk))
	printConditions(obj)
	fmt.Println("-- quota raised, next reconcile succeeds --")
	_ = conditions.ApplyOutcome(obj, nil, available, conditions.WithClock(clk))
	printConditions(obj)
	// Output:
	// Stalled=True QuotaExceeded "project quota of 10 buckets reached" gen=3 at=10:00:00
	// Available=False QuotaExceeded "project quota of 10 buckets reached" gen=3 at=10:00:00
	// -- quota raised, next reconcile succeeds --
}

// StatusOf resolves an object's status once; every read and write then works
// on that handle: conditions, observedGeneration and named status fields.
func ExampleStatusOf() {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "db", "generation": int64(4)},
		"status":   map[string]any{"observedGeneration": int64(3)},
	}}
	st, err := conditions.StatusOf(obj)
	if err != nil {
		panic(err)
	}
	fmt.Println("stale before:", st.IsStale())
	_ = st.SetString("phase", "Provisioning")
	_ = st.MarkReconciling("Provisioning", "1 of 3 replicas ready")
	phase, _, _ := st.String("phase")
	og, _ := st.ObservedGeneration()
	fmt.Println("phase:", phase, "observedGeneration:", og, "Reconciling:", st.IsTrue(conditions.Reconciling), "stale after:", st.IsStale())
	// Output:
	// stale before: true
	// phase: Provisioning observedGeneration: 4 Reconciling: true stale after: false
}

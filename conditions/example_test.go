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

package phase_test

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/phase"
)

// database is the machine of the package documentation, over unstructured
// objects so that the examples need no API types.
func database() *phase.Machine[*unstructured.Unstructured] {
	wait := func(context.Context, *unstructured.Unstructured) (phase.Outcome, error) { return phase.Wait(), nil }
	m, err := phase.New[*unstructured.Unstructured]("database").
		Initial(phase.Pending).
		On(phase.Pending, wait, phase.To(phase.Provisioning)).
		On(phase.Provisioning, wait, phase.To(phase.Ready), phase.Timeout(10*time.Minute, phase.Degraded)).
		On(phase.Ready, wait, phase.To(phase.Degraded, "Migrating")).
		On("Migrating", wait, phase.To(phase.Ready), phase.RequireApproval()).
		On(phase.Degraded, wait, phase.To(phase.Provisioning, "Failed")).
		On("Failed", nil, phase.As(phase.KindFailed)).
		OnDelete(phase.Deleting, wait).
		Build()
	if err != nil {
		panic(err)
	}
	return m
}

func ExampleMachine_Mermaid() {
	fmt.Print(database().Mermaid())
	// Output:
	// stateDiagram-v2
	//     [*] --> Pending
	//     Ready : ready
	//     Migrating : approval required
	//     Degraded : degraded
	//     Failed : failed
	//     Deleting : on deletion, from any phase
	//     Pending --> Provisioning
	//     Provisioning --> Ready
	//     Provisioning --> Degraded : timeout 10m0s
	//     Ready --> Degraded
	//     Ready --> Migrating
	//     Migrating --> Ready
	//     Degraded --> Provisioning
	//     Degraded --> Failed
	//     Deleting --> [*]
}

func ExampleMachine_DOT() {
	fmt.Print(database().DOT())
	// Output:
	// digraph "database" {
	//   rankdir=LR;
	//   node [shape=box, style=rounded];
	//   "__start" [shape=point, label=""];
	//   "Pending" [label="Pending"];
	//   "Provisioning" [label="Provisioning"];
	//   "Ready" [label="Ready\n(ready)"];
	//   "Migrating" [label="Migrating\n(approval required)", peripheries=2];
	//   "Degraded" [label="Degraded\n(degraded)"];
	//   "Failed" [label="Failed\n(failed)"];
	//   "Deleting" [label="Deleting\n(on deletion, from any phase)", style="rounded,filled", fillcolor=lightgrey];
	//   "__start" -> "Pending";
	//   "Pending" -> "Provisioning";
	//   "Provisioning" -> "Ready";
	//   "Provisioning" -> "Degraded" [label="timeout 10m0s", style=dashed];
	//   "Ready" -> "Degraded";
	//   "Ready" -> "Migrating";
	//   "Migrating" -> "Ready";
	//   "Degraded" -> "Provisioning";
	//   "Degraded" -> "Failed";
	//   "__deleted" [shape=point, label=""];
	//   "__deleted" -> "Deleting" [label="on deletion", style=dotted];
	// }
}

// One transition per Step: the object enters its initial phase, moves on,
// stays while the handler works (requeued as it asked), and times out.
func ExampleMachine_Step() {
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	m, err := phase.New[*unstructured.Unstructured]("demo", phase.WithClock(clk)).
		Initial(phase.Pending).
		On(phase.Pending, func(context.Context, *unstructured.Unstructured) (phase.Outcome, error) {
			return phase.Next(phase.Provisioning), nil
		}, phase.To(phase.Provisioning)).
		On(phase.Provisioning, func(context.Context, *unstructured.Unstructured) (phase.Outcome, error) {
			return phase.RequeueAfter(30 * time.Second).WithMessage("creating volume"), nil
		}, phase.To(phase.Ready), phase.Timeout(5*time.Minute, phase.Degraded)).
		On(phase.Ready, nil).
		On(phase.Degraded, nil).
		Build()
	if err != nil {
		panic(err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "db", "namespace": "prod"}}}
	for range 4 {
		res, err := m.Step(context.Background(), obj)
		if err != nil {
			panic(err)
		}
		r := conditions.Get(obj, conditions.Reconciling)
		fmt.Printf("%q -> %s transitioned=%v requeue=%v reconciling=%s/%s\n",
			res.From, res.Phase, res.Transitioned, res.RequeueAfter, r.Reason, r.Message)
		// The caller would persist the status here, then the requeue comes.
	}
	clk.Step(5 * time.Minute)
	res, _ := m.Step(context.Background(), obj)
	d := conditions.Get(obj, conditions.Degraded)
	fmt.Printf("%q -> %s: %s\n", res.From, res.Phase, d.Message)
	// Output:
	// "" -> Pending transitioned=true requeue=1ms reconciling=Pending/demo: entered the initial phase Pending
	// "Pending" -> Provisioning transitioned=true requeue=1ms reconciling=Provisioning/demo: moved from Pending to Provisioning
	// "Provisioning" -> Provisioning transitioned=false requeue=30s reconciling=Provisioning/creating volume
	// "Provisioning" -> Provisioning transitioned=false requeue=30s reconciling=Provisioning/creating volume
	// "Provisioning" -> Degraded: demo: phase Provisioning exceeded its timeout of 5m0s (entered at 2030-01-01T00:00:00Z); moved to Degraded
}

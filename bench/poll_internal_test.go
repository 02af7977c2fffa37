package bench

import (
	"strings"
	"testing"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestReconcilePollsRunNoRuntimeCollectors: the restart scenario's 10ms
// polls of the reconcile counter must not run the process collector (it
// reads /proc on every Gather, CPU taken from the contender being timed) or
// the Go runtime collector.
func TestReconcilePollsRunNoRuntimeCollectors(t *testing.T) {
	reconcileTotal("none")
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if n := mf.GetName(); strings.HasPrefix(n, "process_") || strings.HasPrefix(n, "go_") {
			t.Errorf("the registry reconcileTotal gathers still has %s", n)
		}
	}
}

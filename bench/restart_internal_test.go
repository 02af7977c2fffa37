package bench

import (
	"slices"
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

// TestMedianRun: the reported restart is the run with the median
// throughput (the lower middle of an even count), carrying every run's
// throughput in run order; a single run carries none.
func TestMedianRun(t *testing.T) {
	runs := func(tp ...float64) []*Result {
		var out []*Result
		for _, v := range tp {
			out = append(out, &Result{Throughput: v, SyncSeconds: v / 1000})
		}
		return out
	}
	for _, c := range []struct {
		tp   []float64
		want float64
	}{{[]float64{3000, 2000, 2500}, 2500}, {[]float64{2000, 3000}, 2000}, {[]float64{1500}, 1500}} {
		got := medianRun(runs(c.tp...))
		if got.Throughput != c.want || got.SyncSeconds != c.want/1000 {
			t.Errorf("medianRun(%v) = %+v, want the run of %v", c.tp, got, c.want)
		}
		if len(c.tp) > 1 && !slices.Equal(got.RunThroughputs, c.tp) || len(c.tp) == 1 && got.RunThroughputs != nil {
			t.Errorf("medianRun(%v): run throughputs %v", c.tp, got.RunThroughputs)
		}
	}
}

package finalizer_test

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opkit/opkit/finalizer"
)

func TestMetricsAreSharedPerRegistryAndStuckIsExact(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := finalizer.NewMetrics(reg, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := finalizer.NewMetrics(reg, "b")
	if err != nil {
		t.Fatalf("a second controller on the same registry: %v", err)
	}
	if _, err := finalizer.NewMetrics(reg, "a"); err != nil {
		t.Fatalf("the same controller twice (two managers in one process): %v", err)
	}
	obj := &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}}
	a.StuckDeletion(obj, "wait", time.Minute)
	a.StuckDeletion(obj, "wait", 2*time.Minute)
	b.StepFinished(obj, "wait", time.Second, false, errors.New("boom"))
	stuck := testutil.ToFloat64(prometheusGauge(t, reg, "opkit_finalizer_stuck_objects", "a"))
	if stuck != 1 {
		t.Fatalf("stuck objects = %v, want 1 (reported twice, counted once)", stuck)
	}
	a.Finalized(obj, 3*time.Minute)
	if got := testutil.ToFloat64(prometheusGauge(t, reg, "opkit_finalizer_stuck_objects", "a")); got != 0 {
		t.Fatalf("stuck objects after Finalized = %v", got)
	}
	if n, err := testutil.GatherAndCount(reg, "opkit_finalizer_cleanup_duration_seconds"); err != nil || n != 1 {
		t.Fatalf("cleanup histogram series = %d, %v", n, err)
	}
}

// prometheusGauge reads one series of a gauge vector by gathering reg.
func prometheusGauge(t *testing.T, reg *prometheus.Registry, name, controller string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
					g.Set(m.GetGauge().GetValue())
					return g
				}
			}
		}
	}
	t.Fatalf("no %s{controller=%q}", name, controller)
	return nil
}

package bench

import (
	"slices"
	"strings"
	"testing"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestReconcileTotalReadsTheCounter: the restart scenario's 10ms polls
// read controller-runtime's reconcile counter itself — the same sums a
// Gather of its registry gives — without gathering the registry (every
// histogram of every manager; CPU taken from the contender being timed).
func TestReconcileTotalReadsTheCounter(t *testing.T) {
	vec := reconcileCounter()
	if vec == nil {
		t.Fatal("controller-runtime's controller_runtime_reconcile_total is not on its registry")
	}
	vec.WithLabelValues("bench-test", "success").Add(2)
	vec.WithLabelValues("bench-test", "error").Inc()
	vec.WithLabelValues("bench-other", "success").Inc()
	if got, want := reconcileTotal("bench-test"), gatheredTotal(t, "bench-test"); got != 3 || want != 3 {
		t.Errorf("reconcileTotal = %v, a Gather gives %v, want 3", got, want)
	}
	// A poll allocates a handful of objects per series; a Gather of
	// controller-runtime's registry allocates thousands.
	polled := testing.AllocsPerRun(20, func() { reconcileTotal("bench-test") })
	gathered := testing.AllocsPerRun(20, func() { gatheredTotal(t, "bench-test") })
	t.Logf("allocs: poll %v, gather %v", polled, gathered)
	if polled > 100 || polled*10 > gathered {
		t.Errorf("a poll allocates %v objects, a Gather %v: the poll is not the counter's own read", polled, gathered)
	}
}

// gatheredTotal is the sum reconcileTotal gives, from a Gather.
func gatheredTotal(t *testing.T, controller string) float64 {
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
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

// TestMedianRounds: the rounds of one scenario, contender and size become
// their median round, at the place of the group's first result; other
// results keep their order and carry no rounds.
func TestMedianRounds(t *testing.T) {
	res := func(sc, who string, size int, tp float64) *Result {
		return &Result{Scenario: sc, Contender: who, Size: size, Throughput: tp}
	}
	in := []*Result{
		res(ScenarioConverge, Ceiling, 1000, 50), res(ScenarioConverge, Opkit, 1000, 40), res(ScenarioRestart, Opkit, 1000, 2500),
		res(ScenarioDelete, Opkit, 1000, 170),
		res(ScenarioConverge, Ceiling, 1000, 60), res(ScenarioConverge, Opkit, 1000, 55), res(ScenarioDelete, Opkit, 1000, 180),
		res(ScenarioConverge, Ceiling, 1000, 45), res(ScenarioConverge, Opkit, 1000, 58), res(ScenarioDelete, Opkit, 1000, 150),
		res(ScenarioConverge, Opkit, 5000, 80),
	}
	got := medianRounds(in)
	want := []struct {
		sc, who string
		size    int
		tp      float64
		rounds  []float64
	}{
		{ScenarioConverge, Ceiling, 1000, 50, []float64{50, 60, 45}},
		{ScenarioConverge, Opkit, 1000, 55, []float64{40, 55, 58}},
		{ScenarioRestart, Opkit, 1000, 2500, nil},
		{ScenarioDelete, Opkit, 1000, 170, []float64{170, 180, 150}},
		{ScenarioConverge, Opkit, 5000, 80, nil},
	}
	if len(got) != len(want) {
		t.Fatalf("medianRounds: %d results, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Scenario != w.sc || g.Contender != w.who || g.Size != w.size || g.Throughput != w.tp || !slices.Equal(g.RunThroughputs, w.rounds) {
			t.Errorf("result %d: %s/%s/%d %v rounds %v, want %s/%s/%d %v rounds %v", i, g.Scenario, g.Contender, g.Size, g.Throughput, g.RunThroughputs, w.sc, w.who, w.size, w.tp, w.rounds)
		}
	}
}

// TestGoalRowsShowTheDigitsThatMiss: a goal missed by less than the table's
// rounding (2.002 reconciles per CR against ≤ 2) shows the digits that miss
// it, not "2.00 | no"; a goal met keeps the rounded figure.
func TestGoalRowsShowTheDigitsThatMiss(t *testing.T) {
	rep := &Report{Settings: Settings{N: 1000}, Results: []*Result{
		{Scenario: ScenarioConverge, Contender: Opkit, Size: 1000, N: 1000, Reconciles: 2002},
		{Scenario: ScenarioRestart, Contender: Opkit, Size: 1000, N: 1000, Reconciles: 1000},
	}}
	var b strings.Builder
	goalRows(&b, rep, 1000)
	for _, want := range []string{"| converge: ≤ 2 reconciles per CR | 1,000 | 2.002 | no |", "| no-op resync: 0 writes per reconcile | 1,000 | 0 | yes |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("goal rows lack %q:\n%s", want, b.String())
		}
	}
}

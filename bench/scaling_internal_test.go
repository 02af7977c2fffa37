package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
)

// TestScalingDividesByTheCeilingAtTheSameSize: the scaling section divides
// a contender's CPU per converged CR by the ceiling's at the same size, so
// growth both share (the machine's) cancels and growth the contender adds
// does not; and Render rebuilds that section from an earlier run's
// report.json, which has no such figure of its own.
func TestScalingDividesByTheCeilingAtTheSameSize(t *testing.T) {
	conv := func(c string, n int, cpu float64) *Result {
		return &Result{Scenario: ScenarioConverge, Contender: c, Size: n, N: n, Reconciles: 2 * float64(n), CPUSeconds: ptr.To(cpu)}
	}
	ceil1k, ceil20k := conv(Ceiling, 1000, 1.0), conv(Ceiling, 20000, 26) // 1 ms, then 1.3 ms per CR
	ceil1k.Reconciles, ceil20k.Reconciles = math.NaN(), math.NaN()
	rep := &Report{Settings: Settings{N: 1000}, Sizes: []int{1000, 20000}, Results: []*Result{
		ceil1k, ceil20k,
		conv(Opkit, 1000, 2.5), conv(Opkit, 20000, 65), // 2.5 ms, then 3.25 ms: the ceiling's growth
		conv(Baseline, 1000, 3), conv(Baseline, 20000, 120), // 3 ms, then 6 ms: twice the ceiling's growth
	}}
	dir := t.TempDir()
	if err := write(rep, dir); err != nil {
		t.Fatal(err)
	}
	// An earlier run's report.md, before this figure existed.
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "scaling-cpu-relative.svg")); err != nil {
		t.Fatal(err)
	}
	got, err := Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r := got.FindAt(ScenarioConverge, Ceiling, 20000); r == nil || !math.IsNaN(r.Reconciles) {
		t.Errorf("the ceiling's reconciles after Render: %+v, want NaN (not counted)", r)
	}
	if r := got.FindAt(ScenarioConverge, Opkit, 20000); r == nil || r.Reconciles != 40000 {
		t.Errorf("opkit's reconciles after Render: %+v, want 40000", r)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		// Per size: 2.5 ms ÷ 1 ms, 3.25 ms ÷ 1.3 ms, 6 ms ÷ 1.3 ms.
		"| opkit | 1,000 | 0 | n/a | 0 | 2.50 | 2.50× |",
		"| opkit | 20,000 | 0 | n/a | 0 | 3.25 | 2.50× |",
		"| baseline | 20,000 | 0 | n/a | 0 | 6 | 4.62× |",
		"| ceiling | 20,000 | 0 | n/a | 0 | 1.30 | n/a |",
		// Largest over smallest: raw CPU, then relative to the ceiling.
		"| opkit | 1,000 → 20,000 | n/a | n/a | 1.30× | 1.00× |",
		"| baseline | 1,000 → 20,000 | n/a | n/a | 2.00× | 1.54× |",
		"| ceiling | 1,000 → 20,000 | n/a | n/a | 1.30× | n/a |",
		"scaling-cpu-relative.svg",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(string(md))
	}
	if data, err := os.ReadFile(filepath.Join(dir, "scaling-cpu-relative.svg")); err != nil || !strings.Contains(string(data), "opkit") || strings.Contains(string(data), ">ceiling<") {
		t.Errorf("scaling-cpu-relative.svg: %v; want opkit's line and no ceiling line (1 by definition):\n%s", err, data)
	}
}

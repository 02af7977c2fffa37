package bench

import (
	"math"
	"strings"
	"testing"
)

// TestPairedRoundsDivideRoundByRound: each round's ratio is opkit's
// throughput over the other's in the same round, the median is taken over
// those ratios (not the ratio of the two median rounds), and contenders with
// different round counts are not paired.
func TestPairedRoundsDivideRoundByRound(t *testing.T) {
	o := &Result{Scenario: ScenarioConverge, Contender: Opkit, Size: 1000, N: 1000, Throughput: 60, RunThroughputs: []float64{50, 60, 90}}
	c := &Result{Scenario: ScenarioConverge, Contender: Ceiling, Size: 1000, N: 1000, Throughput: 75, RunThroughputs: []float64{50, 75, 100}}
	ratios, med := pairedRounds(o, c)
	want := []float64{1, 0.8, 0.9}
	if len(ratios) != len(want) {
		t.Fatalf("ratios %v, want %v", ratios, want)
	}
	for i := range want {
		if math.Abs(ratios[i]-want[i]) > 1e-9 {
			t.Fatalf("ratios %v, want %v", ratios, want)
		}
	}
	if math.Abs(med-0.9) > 1e-9 {
		t.Errorf("median %v, want 0.9 (the headline's ratio is 60/75 = 0.8)", med)
	}
	if r, m := pairedRounds(o, &Result{RunThroughputs: []float64{1, 2}}); r != nil || !math.IsNaN(m) {
		t.Errorf("different round counts paired: %v %v", r, m)
	}
	if r, _ := pairedRounds(&Result{Throughput: 1}, &Result{Throughput: 1}); r != nil {
		t.Errorf("single runs paired: %v", r)
	}

	rep := &Report{Settings: Settings{N: 1000}, Results: []*Result{o, c}}
	var b strings.Builder
	pairedRoundsMarkdown(&b, rep)
	if want := "| 1,000 | converge | 1.00, 0.80, 0.90 | 0.90× | n/a | n/a | n/a | n/a |"; !strings.Contains(b.String(), want) {
		t.Errorf("section lacks %q:\n%s", want, b.String())
	}
	b.Reset()
	pairedRoundsMarkdown(&b, &Report{Settings: Settings{N: 1000}, Results: []*Result{{Scenario: ScenarioConverge, Contender: Opkit, Size: 1000, Throughput: 1}}})
	if b.Len() != 0 {
		t.Errorf("a report without rounds got the section:\n%s", b.String())
	}
}

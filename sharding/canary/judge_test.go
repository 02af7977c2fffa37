package canary

import (
	"maps"
	"strings"
	"testing"
	"time"
)

func TestDefaultJudge(t *testing.T) {
	j := DefaultJudge(0)
	healthy := Cohort{Version: "v1", Objects: 90, Ready: 90}
	cases := []struct {
		name    string
		canary  Cohort
		stable  Cohort
		elapsed time.Duration
		want    Verdict
	}{
		{"healthy inside the window waits", Cohort{Version: "v2", Objects: 10, Ready: 10}, healthy, time.Second, Wait},
		{"healthy after the window passes", Cohort{Version: "v2", Objects: 10, Ready: 10}, healthy, time.Minute, Pass},
		{"one stalled fails at once", Cohort{Version: "v2", Objects: 10, Ready: 9, Stalled: 1}, healthy, 0, Fail},
		{"degraded fails", Cohort{Version: "v2", Objects: 10, Degraded: 2}, healthy, 0, Fail},
		{"late fails", Cohort{Version: "v2", Objects: 10, Late: 1}, healthy, 0, Fail},
		{"no worse than a stable with the same rate passes", Cohort{Version: "v2", Objects: 10, Stalled: 1}, Cohort{Version: "v1", Objects: 90, Stalled: 9}, time.Minute, Pass},
		{"errors fail", Cohort{Version: "v2", Objects: 10, Ready: 10, Errors: 5}, healthy, 0, Fail},
		{"errors at the stable rate pass", Cohort{Version: "v2", Objects: 10, Ready: 10, Errors: 1}, Cohort{Version: "v1", Objects: 90, Errors: 9}, time.Minute, Pass},
		{"no objects at this step pass at the end", Cohort{Version: "v2"}, healthy, time.Minute, Pass},
	}
	for _, c := range cases {
		got, msg := j(Sample{Canary: c.canary, Stable: c.stable, Percent: 10, Elapsed: c.elapsed, Window: 30 * time.Second})
		if got != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got, msg, c.want)
		}
		if msg == "" || !strings.Contains(msg, "v2") {
			t.Errorf("%s: message %q does not name the canary", c.name, msg)
		}
	}
	// A tolerance admits a slightly worse canary.
	if got, _ := DefaultJudge(0.2)(Sample{Canary: Cohort{Version: "v2", Objects: 10, Stalled: 1}, Stable: healthy, Elapsed: time.Minute, Window: time.Second}); got != Pass {
		t.Errorf("10%% stalled within a 20%% tolerance: %s", got)
	}
}

func TestWeights(t *testing.T) {
	canary, stable := []string{"c"}, []string{"s0", "s1", "s2"}
	cases := map[int]map[string]int{
		0:   {"c": 0, "s0": 100, "s1": 100, "s2": 100},
		10:  {"c": 33, "s0": 100, "s1": 100, "s2": 100},
		25:  {"c": 100, "s0": 100, "s1": 100, "s2": 100},
		50:  {"c": 300, "s0": 100, "s1": 100, "s2": 100},
		100: {"c": 100, "s0": 0, "s1": 0, "s2": 0},
	}
	for p, want := range cases {
		if got := Weights(p, canary, stable); !maps.Equal(got, want) {
			t.Errorf("Weights(%d) = %v, want %v", p, got, want)
		}
	}
	if got := Weights(1, []string{"a", "b"}, []string{"s"}); got["a"] != 1 || got["b"] != 1 {
		t.Errorf("a tiny share rounds to at least 1: %v", got)
	}
}

func TestStateRoundTrip(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	s := State{Phase: PhaseProgressing, StableVersion: "v1", CanaryVersion: "v2", Step: 2, Percent: 50,
		Canary:  Cohort{Version: "v2", Members: []string{"c0", "c1"}, Objects: 12, Stalled: 3},
		Stable:  Cohort{Version: "v1", Members: []string{"s0"}, Objects: 30},
		Verdict: Wait, Message: "judging", Started: now, Since: now.Add(time.Second), WindowStart: now.Add(2 * time.Second), LastAction: "resume"}
	got := stateFrom(s.data())
	if !maps.Equal(got.data(), s.data()) || !got.Started.Equal(now) || got.Canary.Objects != 12 || got.Canary.Unhealthy() != 3 || len(got.Canary.Members) != 2 {
		t.Fatalf("round trip:\n got %v\nwant %v", got.data(), s.data())
	}
	if stateFrom(nil).Phase != PhaseIdle {
		t.Fatal("empty data is not Idle")
	}
}

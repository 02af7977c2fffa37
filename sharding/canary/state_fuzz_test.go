package canary

import (
	"maps"
	"math"
	"testing"
)

// FuzzStateFrom feeds stateFrom, which reads a rollout's State back from its
// ConfigMap (anyone who may edit ConfigMaps in the lease namespace can
// rewrite it; a rollout then continues from what it reads), arbitrary data.
// It must not panic; the State it reads must be one the rollout can act on
// — a step index, counts and error counts that are not negative, error
// counts that are finite (Step indexes the steps: a negative one would make
// Rollout.advance index out of range) — and one data() writes back as itself.
func FuzzStateFrom(f *testing.F) {
	ok := State{Phase: PhaseProgressing, StableVersion: "v1", CanaryVersion: "v2", Step: 1, Percent: 25,
		Canary: Cohort{Members: []string{"m-1"}, Objects: 3, Stalled: 1, Errors: 0.5},
		Stable: Cohort{Members: []string{"m-0", "m-2"}, Objects: 9}}.data()
	f.Add(ok["phase"], ok["step"], ok["percent"], ok["canaryObjects"], ok["canaryUnhealthy"], ok["canaryErrors"], ok["canaryMembers"], "2026-12-02T13:00:00.5Z")
	f.Add("", "", "", "", "", "", "", "")
	f.Add("Bogus", "x", "101", "1e3", "0x10", "Inf", ",,", "yesterday")
	f.Fuzz(func(t *testing.T, phase, step, percent, objects, unhealthy, errs, members, started string) {
		d := map[string]string{"phase": phase, "step": step, "percent": percent, "canaryObjects": objects,
			"canaryUnhealthy": unhealthy, "canaryErrors": errs, "canaryMembers": members, "started": started,
			"stableObjects": objects, "stableErrors": errs, "stableMembers": members}
		s := stateFrom(d)
		for name, n := range map[string]int{"step": s.Step, "percent": s.Percent, "canaryObjects": s.Canary.Objects,
			"canaryUnhealthy": s.Canary.Stalled, "stableObjects": s.Stable.Objects} {
			if n < 0 {
				t.Fatalf("stateFrom(%q): %s = %d", d, name, n)
			}
		}
		for _, e := range []float64{s.Canary.Errors, s.Stable.Errors} {
			if e < 0 || math.IsNaN(e) || math.IsInf(e, 0) {
				t.Fatalf("stateFrom(%q): errors %v", d, e)
			}
		}
		if w, again := s.data(), stateFrom(s.data()).data(); !maps.Equal(w, again) {
			t.Fatalf("stateFrom(%q) writes back as %q, which reads back as %q", d, w, again)
		}
	})
}

package phase_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/phase"
)

// FuzzPersistedPhase: status.phase and its entered-at time are read back from
// the object, which anyone with status rights can edit. Whatever they hold,
// Step does not panic, lands the object in a declared phase, and a second
// Step from there makes no further transition unless its handler asks (the
// fixture's handlers only wait): bad input is recovered from once, never
// looped on. Explore with `go test -fuzz FuzzPersistedPhase ./phase/`.
func FuzzPersistedPhase(f *testing.F) {
	for _, s := range []string{"", "Pending", "Ready", "Bogus", "Deleting", "ready", " Ready", "Failed", "Migrating", "\x00", "Degraded\n"} {
		f.Add(s, int64(-3600), true)
		f.Add(s, int64(1e12), false)
	}
	f.Fuzz(func(t *testing.T, persisted string, enteredOffset int64, withTime bool) {
		fx := newFixture(t)
		declared := fx.m.Phases()
		p := newPipeline()
		p.Status.Phase = PipelinePhase(persisted)
		if withTime {
			p.Status.PhaseTransitionTime = &metav1.Time{Time: t0.Add(time.Duration(enteredOffset) * time.Second)}
		}
		if _, err := fx.m.Step(context.Background(), p); err != nil {
			t.Fatalf("Step on persisted phase %q: %v", persisted, err)
		}
		landed := phase.Phase(p.Status.Phase)
		known := false
		for _, d := range declared {
			known = known || d == landed
		}
		if !known {
			t.Fatalf("persisted %q: landed in undeclared phase %q", persisted, landed)
		}
		if _, err := conditions.List(p); err != nil {
			t.Fatalf("conditions after Step: %v", err)
		}
		res, err := fx.m.Step(context.Background(), p)
		if err != nil {
			t.Fatalf("second Step from %q: %v", landed, err)
		}
		if res.Transitioned && res.From != phase.Provisioning {
			// Only a spent Provisioning budget (a persisted time far in the
			// past) may move again on its own.
			t.Fatalf("second Step moved %s → %s without a handler asking", res.From, res.Phase)
		}
	})
}

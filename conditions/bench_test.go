package conditions_test

import (
	"errors"
	"testing"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/outcome"
)

// BenchmarkApplyOutcome: one reconcile's status bookkeeping on a typed
// object: a transient error, then success, then a terminal error.
func BenchmarkApplyOutcome(b *testing.B) {
	g := gizmo(3)
	transient := errors.New("connection refused")
	terminal := outcome.Terminal("InvalidSpec", errors.New("spec.size must be at most 10"))
	b.ReportAllocs()
	for b.Loop() {
		_ = conditions.ApplyOutcome(g, transient)
		_ = conditions.ApplyOutcome(g, nil)
		_ = conditions.ApplyOutcome(g, terminal)
	}
}

// BenchmarkStatusPatcherUnchanged: a no-op reconcile's status check (the
// status is what was read), the cost every steady-state reconcile pays.
func BenchmarkStatusPatcherUnchanged(b *testing.B) {
	g := gizmo(3)
	g.Spec.Size = 3
	_ = conditions.ApplyOutcome(g, nil)
	p := conditions.NewStatusPatcher(g.DeepCopyObject().(*Gizmo))
	b.ReportAllocs()
	for b.Loop() {
		if changed, err := p.Changed(g); err != nil || changed {
			b.Fatal(changed, err)
		}
	}
}

// BenchmarkStatusPatcherChanged: the status check of a reconcile that
// changed the status (a transient error, then success): the merge patch is
// computed, the cost every status write adds before its request.
func BenchmarkStatusPatcherChanged(b *testing.B) {
	before := gizmo(3)
	_ = conditions.ApplyOutcome(before, errors.New("connection refused"))
	g := before.DeepCopyObject().(*Gizmo)
	_ = conditions.ApplyOutcome(g, nil)
	p := conditions.NewStatusPatcher(before)
	b.ReportAllocs()
	for b.Loop() {
		if changed, err := p.Changed(g); err != nil || !changed {
			b.Fatal(changed, err)
		}
	}
}

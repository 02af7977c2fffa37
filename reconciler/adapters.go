package reconciler

import (
	"context"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/phase"
)

// The pattern packages report through small interfaces of their own; these
// adapters connect them to observability, so that neither imports the other.

// eventAdapter gives the finalizer observability's deduplicating recorder.
type eventAdapter struct{ r *observability.Recorder }

func (a eventAdapter) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	if obj, ok := regarding.(client.Object); ok {
		a.r.Event(obj, eventtype, observability.Reason(reason), action, note, args...)
	}
}

type finalizerObserver struct {
	finalizer.NopObserver
	metrics    *observability.Metrics
	controller string
}

func (o finalizerObserver) StepFinished(_ client.Object, step string, took time.Duration, _ bool, err error) {
	o.metrics.CleanupFinished(o.controller, step, took, err)
}

func (o finalizerObserver) StuckDeletion(obj client.Object, _ string, _ time.Duration) {
	o.metrics.StuckDeletion(o.controller, client.ObjectKeyFromObject(obj), true)
}

func (o finalizerObserver) Finalized(obj client.Object, _ time.Duration) {
	o.metrics.StuckDeletion(o.controller, client.ObjectKeyFromObject(obj), false)
}

type ensureObserver struct {
	metrics    *observability.Metrics
	controller string
}

func (o ensureObserver) ObserveChange(_ context.Context, c ensure.Change) {
	o.metrics.EnsureResult(o.controller, strings.ToLower(string(c.Action)), 1)
}

// PhaseObserver reports a phase machine's transitions to metrics as
// opkit_phase_transitions_total and opkit_phase_duration_seconds.
func PhaseObserver(m *observability.Metrics, controller string) phase.Observer {
	return phaseObserver{metrics: m, controller: controller}
}

type phaseObserver struct {
	metrics    *observability.Metrics
	controller string
}

func (o phaseObserver) Transition(_ string, from, to phase.Phase, timeInFrom time.Duration) {
	o.metrics.PhaseTransition(o.controller, string(from), string(to), timeInFrom)
}

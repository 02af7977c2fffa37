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
	"github.com/opkit/opkit/sharding"
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

// ShardObserver reports a sharding ring's assigner and members to metrics
// (opkit_shard_objects, opkit_shard_events_total, opkit_shard_ring_*). Pass it
// to sharding.WithObserver and sharding.WithShardObserver.
func ShardObserver(m *observability.Metrics) sharding.Observer {
	return shardObserver{metrics: m}
}

type shardObserver struct{ metrics *observability.Metrics }

func (o shardObserver) ObjectAssigned(ring, member string) {
	o.metrics.ShardEvent(ring, member, "assigned")
}

func (o shardObserver) ObjectMoved(ring, from, to string, _ bool) {
	o.metrics.ShardEvent(ring, from, "moved_out")
	o.metrics.ShardEvent(ring, to, "moved_in")
}

func (o shardObserver) DrainRequested(ring, member string) {
	o.metrics.ShardEvent(ring, member, "drain_requested")
}

func (o shardObserver) DrainAcknowledged(ring, member string) {
	o.metrics.ShardEvent(ring, member, "drain_acknowledged")
}

func (o shardObserver) RingRecomputed(ring string, members []string) {
	o.metrics.ShardRing(ring, len(members))
}

func (o shardObserver) MemberObjects(ring string, counts map[string]int) {
	o.metrics.ShardObjects(ring, counts)
}

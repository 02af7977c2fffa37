package sharding

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opkit/opkit/internal/promreg"
)

// Metrics is an [Observer] that records a ring's Prometheus metrics. Pass it
// to [WithObserver] of the [Assigner] and of each member; the reconciler
// package does this for a member it is given. The series, on the registerer
// given to [NewMetrics]:
//
//	opkit_shard_objects{ring,member}                gauge: objects labelled for a member (member="" = unassigned), as last counted by the assigner
//	opkit_shard_events_total{ring,member,event}     counter: assigned, moved_in, moved_out, drain_requested, drain_acknowledged
//	opkit_shard_ring_recomputations_total{ring}     counter
//	opkit_shard_ring_members{ring}                  gauge: ready members in the ring
//
// Ring and member names are the program's, so the series are bounded.
type Metrics struct {
	objects        *prometheus.GaugeVec
	events         *prometheus.CounterVec
	recomputations *prometheus.CounterVec
	members        *prometheus.GaugeVec

	mu sync.Mutex
	// seen remembers every member MemberObjects reported per ring, so a
	// member that disappears from the counts is set to 0.
	seen map[string]map[string]struct{}
}

// NewMetrics registers the sharding metrics on reg — or reuses them when they
// are already registered there — and returns an Observer that records them.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("sharding: NewMetrics: nil Registerer")
	}
	m := &Metrics{seen: map[string]map[string]struct{}{}}
	var err error
	if m.objects, err = promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "opkit_shard_objects",
		Help: "Objects labelled for each member of a sharding ring (member=\"\" counts unassigned objects), as last counted by the ring's assigner.",
	}, []string{"ring", "member"})); err != nil {
		return nil, err
	}
	if m.events, err = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "opkit_shard_events_total",
		Help: "Sharding events by ring, member and event (assigned, moved_in, moved_out, drain_requested, drain_acknowledged).",
	}, []string{"ring", "member", "event"})); err != nil {
		return nil, err
	}
	if m.recomputations, err = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "opkit_shard_ring_recomputations_total",
		Help: "Times the ring was rebuilt because its set of ready members changed.",
	}, []string{"ring"})); err != nil {
		return nil, err
	}
	if m.members, err = promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "opkit_shard_ring_members",
		Help: "Ready members in the ring at its last recomputation.",
	}, []string{"ring"})); err != nil {
		return nil, err
	}
	return m, nil
}

// ObjectAssigned counts an assignment to member.
func (m *Metrics) ObjectAssigned(ring, member string) {
	m.events.WithLabelValues(ring, member, "assigned").Inc()
}

// ObjectMoved counts a move out of from and into to.
func (m *Metrics) ObjectMoved(ring, from, to string, _ bool) {
	m.events.WithLabelValues(ring, from, "moved_out").Inc()
	m.events.WithLabelValues(ring, to, "moved_in").Inc()
}

// DrainRequested counts a drain request to member.
func (m *Metrics) DrainRequested(ring, member string) {
	m.events.WithLabelValues(ring, member, "drain_requested").Inc()
}

// DrainAcknowledged counts a drain acknowledgement by member.
func (m *Metrics) DrainAcknowledged(ring, member string) {
	m.events.WithLabelValues(ring, member, "drain_acknowledged").Inc()
}

// RingRecomputed records a recomputation and the number of ready members.
func (m *Metrics) RingRecomputed(ring string, members []string) {
	m.recomputations.WithLabelValues(ring).Inc()
	m.members.WithLabelValues(ring).Set(float64(len(members)))
}

// MemberObjects sets opkit_shard_objects from counts (member "" counts
// unassigned objects). Members missing from counts are set to 0 rather than
// deleted, so a member that lost all its objects shows 0.
func (m *Metrics) MemberObjects(ring string, counts map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := m.seen[ring]
	if seen == nil {
		seen = map[string]struct{}{}
		m.seen[ring] = seen
	}
	for member := range seen {
		if _, ok := counts[member]; !ok {
			m.objects.WithLabelValues(ring, member).Set(0)
		}
	}
	for member, n := range counts {
		seen[member] = struct{}{}
		m.objects.WithLabelValues(ring, member).Set(float64(n))
	}
}

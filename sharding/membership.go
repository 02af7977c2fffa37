package sharding

import (
	"slices"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/clock"
)

// MemberState is what an observer concludes about a ring member from its Lease.
type MemberState int

const (
	// StateReady means the member's Lease changed (was renewed) within its lease
	// duration, by the observer's own clock. Only ready members are on the ring.
	StateReady MemberState = iota + 1
	// StateExpired means the Lease has not changed for longer than its duration but
	// not yet for duration+grace. The member is off the ring (it gets nothing
	// new) but still owns what it has: it may still be finishing reconciles, so
	// its objects move only through the drain handshake, or once it is dead.
	StateExpired
	// StateDead means the Lease was released (empty holderIdentity) or has not
	// changed for longer than duration+grace. A member stops starting
	// reconciles once its own last successful renewal is older than the lease
	// duration, so by then it has stopped; its objects move at once.
	StateDead
)

func (s MemberState) String() string {
	switch s {
	case StateReady:
		return "ready"
	case StateExpired:
		return "expired"
	case StateDead:
		return "dead"
	}
	return "unknown"
}

// DefaultLeaseDuration is the lease duration members announce unless
// configured otherwise, and the one observers assume for a Lease that has none.
const DefaultLeaseDuration = 15 * time.Second

// Membership derives member states from Leases. It never compares the
// timestamps written in a Lease with its own clock: a Lease counts as renewed
// when the observer sees its resourceVersion (or, without one, its renewTime
// or holder) change, and its age is measured from that moment on the
// observer's clock. Clock skew between replicas therefore cannot make a member
// look alive or dead; the price is that an observer that has just started
// (e.g. a newly elected assigner) waits a full duration+grace before it
// declares a silent member dead, and counts a member ready only once it has
// seen its Lease renewed (a Lease seen for the first time is expired until then).
//
// Methods are safe for concurrent use.
type Membership struct {
	clock clock.PassiveClock
	grace func(time.Duration) time.Duration

	mu      sync.Mutex
	members map[string]*observed
}

type observed struct {
	fingerprint string
	// spec is what the member itself writes when it renews (holder, times,
	// duration); announce is what others may write (weight, version). A new
	// resourceVersion that changed announce but not spec is someone steering
	// the ring, not a renewal: counting it as one would keep a dead member
	// alive as long as a controller keeps adjusting its weight.
	spec, announce string
	weight         int
	version        string
	holder         string
	duration       time.Duration
	seen           time.Time // observer clock, when fingerprint last changed
	// confirmed is false until the observer has seen the Lease change: a Lease
	// seen for the first time may be long dead (its renewTime is another
	// machine's clock and is never trusted), so it is not ready yet.
	confirmed bool
}

// MembershipOption configures [NewMembership]: [WithClock] and
// [WithDeadGrace].
type MembershipOption interface{ applyToMembership(*Membership) }

// NewMembership returns an empty Membership.
func NewMembership(opts ...MembershipOption) *Membership {
	m := &Membership{
		clock:   clock.RealClock{},
		grace:   func(d time.Duration) time.Duration { return d },
		members: map[string]*observed{},
	}
	for _, o := range opts {
		o.applyToMembership(m)
	}
	return m
}

// Observe records the current state of a member Lease; the member's name is
// its [MemberLabel]. It reports whether the member's state or weight
// changed. A change of the Lease that only rewrote [WeightAnnotation] or
// [VersionAnnotation] (and nothing the member writes when it renews) is not
// a renewal.
func (m *Membership) Observe(lease *coordinationv1.Lease) bool {
	name := lease.Labels[MemberLabel]
	if name == "" {
		return false
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	d := DefaultLeaseDuration
	if lease.Spec.LeaseDurationSeconds != nil && *lease.Spec.LeaseDurationSeconds > 0 {
		d = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	fp := lease.ResourceVersion
	if fp == "" {
		fp = holder
		if lease.Spec.RenewTime != nil {
			fp += "@" + lease.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
		}
	}
	spec := holder + "|" + strconv.Itoa(int(d/time.Second))
	if lease.Spec.RenewTime != nil {
		spec += "|" + lease.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
	}
	if lease.Spec.AcquireTime != nil {
		spec += "|" + lease.Spec.AcquireTime.UTC().Format(time.RFC3339Nano)
	}
	weight, version := LeaseWeight(lease), LeaseVersion(lease)
	announce := strconv.Itoa(weight) + "|" + version
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.members[name]
	if !ok {
		m.members[name] = &observed{fingerprint: fp, spec: spec, announce: announce, weight: weight, version: version,
			holder: holder, duration: d, seen: now}
		return true
	}
	before, beforeWeight := m.stateLocked(o, now), o.weight
	if o.fingerprint != fp {
		steered := o.announce != announce && o.spec == spec
		o.fingerprint, o.spec, o.announce, o.weight, o.version = fp, spec, announce, weight, version
		if !steered {
			o.holder, o.seen, o.confirmed = holder, now, true
		}
	}
	o.duration = d
	return m.stateLocked(o, now) != before || o.weight != beforeWeight
}

// Weight returns the weight a member's Lease announced when last observed
// ([LeaseWeight]), or 0 for a member without a Lease.
func (m *Membership) Weight(member string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.members[member]; ok {
		return o.weight
	}
	return 0
}

// Weights returns every known member's weight ([Membership.Weight]).
func (m *Membership) Weights() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.members))
	for name, o := range m.members {
		out[name] = o.weight
	}
	return out
}

// Version returns the version a member's Lease announced when last observed
// ([LeaseVersion]), or "".
func (m *Membership) Version(member string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.members[member]; ok {
		return o.version
	}
	return ""
}

// Forget drops a member whose Lease was deleted; it is dead from then on.
func (m *Membership) Forget(member string) {
	m.mu.Lock()
	delete(m.members, member)
	m.mu.Unlock()
}

func (m *Membership) stateLocked(o *observed, now time.Time) MemberState {
	if o.holder == "" {
		return StateDead
	}
	age := now.Sub(o.seen)
	switch {
	case age <= o.duration && o.confirmed:
		return StateReady
	case age <= o.duration:
		// Seen once, never seen renewing: off the ring but not dead, so a
		// newly started observer neither hands objects to a member that may be
		// long gone nor takes them from one that is alive.
		return StateExpired
	case age <= o.duration+m.grace(o.duration):
		return StateExpired
	}
	return StateDead
}

// State returns a member's state now. A member without a Lease is dead.
func (m *Membership) State(member string) MemberState {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.members[member]
	if !ok {
		return StateDead
	}
	return m.stateLocked(o, m.clock.Now())
}

// States returns every known member's state now.
func (m *Membership) States() map[string]MemberState {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]MemberState, len(m.members))
	for name, o := range m.members {
		out[name] = m.stateLocked(o, now)
	}
	return out
}

// Ready returns the ready members, sorted.
func (m *Membership) Ready() []string {
	var out []string
	for name, s := range m.States() {
		if s == StateReady {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// NextTransition returns how long until some member's state changes by the
// passage of time alone (ready→expired or expired→dead), or 0 when none will.
func (m *Membership) NextTransition() time.Duration {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var next time.Duration
	for _, o := range m.members {
		if o.holder == "" {
			continue
		}
		age := now.Sub(o.seen)
		var d time.Duration
		switch {
		case age <= o.duration:
			d = o.duration - age
		case age <= o.duration+m.grace(o.duration):
			d = o.duration + m.grace(o.duration) - age
		default:
			continue
		}
		d += time.Millisecond // land just past the boundary
		if next == 0 || d < next {
			next = d
		}
	}
	return next
}

package sharding

import (
	"time"

	"k8s.io/utils/clock"
)

// Options that mean the same thing to several constructors are values that
// implement each of their option interfaces, so one name serves every call
// it fits and no other:
//
//	option            NewShard/NewStaticShard/NewServerSideShard  NewAssigner  NewMembership  NewRing
//	WithClock                          ✓                               ✓             ✓
//	WithObserver                       ✓                               ✓
//	WithVirtualNodes                   ✓ (server-side ring)            ✓                          ✓
//	WithDeadGrace                                                      ✓             ✓

// ClockOption is the option [WithClock] returns.
type ClockOption struct{ c clock.WithTicker }

// WithClock sets the clock a member uses for lease renewals (the times it
// writes as its Lease's acquireTime and renewTime) and self-fencing, and the
// assigner and Membership use to judge Lease ages (a fake or skewed one in
// tests). A nil clock keeps the wall clock.
func WithClock(c clock.WithTicker) ClockOption { return ClockOption{c: c} }

func (o ClockOption) applyToShard(s *Shard) {
	if o.c != nil {
		s.clock = o.c
	}
}

func (o ClockOption) applyToAssigner(a *Assigner) {
	if o.c != nil {
		a.clock = o.c
	}
}

func (o ClockOption) applyToMembership(m *Membership) {
	if o.c != nil {
		m.clock = o.c
	}
}

// ObserverOption is the option [WithObserver] returns.
type ObserverOption struct{ o Observer }

// WithObserver sets the [Observer] of the assigner (assignments, moves,
// drains, ring changes, counts; default [NopObserver]) or adds one to a
// member (drain acknowledgements; see [Shard.AddObserver]). [Metrics] is one.
func WithObserver(o Observer) ObserverOption { return ObserverOption{o: o} }

func (o ObserverOption) applyToShard(s *Shard) { s.AddObserver(o.o) }

func (o ObserverOption) applyToAssigner(a *Assigner) {
	if o.o != nil {
		a.observer = o.o
	}
}

// VirtualNodesOption is the option [WithVirtualNodes] returns.
type VirtualNodesOption int

// WithVirtualNodes sets how many points each member gets on the ring
// (minimum 1; default [DefaultVirtualNodes]). For a server-side shard every
// point of another member splits a range, so the selector a member sends has
// about this many ranges; fewer points mean a shorter request URL and a less
// even spread.
func WithVirtualNodes(n int) VirtualNodesOption { return VirtualNodesOption(max(n, 1)) }

func (o VirtualNodesOption) applyToShard(s *Shard)       { s.vnodes = int(o) }
func (o VirtualNodesOption) applyToAssigner(a *Assigner) { a.vnodes = int(o) }
func (o VirtualNodesOption) applyToRing(r *ringOptions)  { r.vnodes = int(o) }

// DeadGraceOption is the option [WithDeadGrace] returns.
type DeadGraceOption func(leaseDuration time.Duration) time.Duration

// WithDeadGrace sets how long after expiry a member becomes dead, as a
// function of its lease duration. The default is the lease duration itself
// (dead after two durations without a renewal). The grace must exceed the
// longest Reconcile: a member that loses its lease stops starting
// reconciles, but one already running finishes.
func WithDeadGrace(f func(leaseDuration time.Duration) time.Duration) DeadGraceOption {
	return DeadGraceOption(f)
}

func (o DeadGraceOption) applyToAssigner(a *Assigner) {
	if o != nil {
		a.grace = o
	}
}

func (o DeadGraceOption) applyToMembership(m *Membership) {
	if o != nil {
		m.grace = o
	}
}

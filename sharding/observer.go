package sharding

// Observer receives sharding metrics. Implementations must be safe for
// concurrent use and must not block; opkit's observability package provides
// one backed by Prometheus. Every method gets the ring's name so one Observer
// can serve several rings.
type Observer interface {
	// ObjectAssigned: the assigner labelled a previously unassigned object for member.
	ObjectAssigned(ring, member string)
	// ObjectMoved: an object changed member. immediate is true when from was
	// dead and no drain was needed; false when it moved after a drain.
	ObjectMoved(ring, from, to string, immediate bool)
	// DrainRequested: the assigner asked member to give an object up.
	DrainRequested(ring, member string)
	// DrainAcknowledged: member (on this replica) gave an object up after a drain.
	DrainAcknowledged(ring, member string)
	// RingRecomputed: the assigner rebuilt the ring because the set of ready
	// members or their weights changed; members is the new ring's members
	// (the ready members of weight > 0).
	RingRecomputed(ring string, members []string)
	// MemberObjects reports, at most about once a second, how many objects
	// carry each member's shard label (the key "" counts unassigned objects).
	MemberObjects(ring string, counts map[string]int)
}

// NopObserver ignores everything; it is the default.
type NopObserver struct{}

// ObjectAssigned implements [Observer].
func (NopObserver) ObjectAssigned(string, string) {}

// ObjectMoved implements [Observer].
func (NopObserver) ObjectMoved(string, string, string, bool) {}

// DrainRequested implements [Observer].
func (NopObserver) DrainRequested(string, string) {}

// DrainAcknowledged implements [Observer].
func (NopObserver) DrainAcknowledged(string, string) {}

// RingRecomputed implements [Observer].
func (NopObserver) RingRecomputed(string, []string) {}

// MemberObjects implements [Observer].
func (NopObserver) MemberObjects(string, map[string]int) {}

// observers calls every observer in turn.
type observers []Observer

func (os observers) ObjectAssigned(ring, member string) {
	for _, o := range os {
		o.ObjectAssigned(ring, member)
	}
}

func (os observers) ObjectMoved(ring, from, to string, immediate bool) {
	for _, o := range os {
		o.ObjectMoved(ring, from, to, immediate)
	}
}

func (os observers) DrainRequested(ring, member string) {
	for _, o := range os {
		o.DrainRequested(ring, member)
	}
}

func (os observers) DrainAcknowledged(ring, member string) {
	for _, o := range os {
		o.DrainAcknowledged(ring, member)
	}
}

func (os observers) RingRecomputed(ring string, members []string) {
	for _, o := range os {
		o.RingRecomputed(ring, members)
	}
}

func (os observers) MemberObjects(ring string, counts map[string]int) {
	for _, o := range os {
		o.MemberObjects(ring, counts)
	}
}

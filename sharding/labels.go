package sharding

import (
	"errors"
	"fmt"
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// ShardLabelPrefix prefixes the label that assigns an object to a member of
	// a ring: "shard.opkit.dev/<ring>: <member>". Only the ring's [Assigner]
	// sets it (or removes it when it moves an object away from a dead member),
	// and only the member named in it removes it again, when it acknowledges a
	// drain. Static sharding expects users (or their tooling) to set it.
	ShardLabelPrefix = "shard.opkit.dev/"

	// DrainLabelPrefix prefixes the label "drain.shard.opkit.dev/<ring>: true"
	// that the [Assigner] sets on an object whose member must give it up. The
	// member stops starting reconciles of the object at once, waits until its
	// in-flight reconciles of the object have returned, and then removes this
	// label together with its shard label in one optimistic-locked patch.
	DrainLabelPrefix = "drain.shard.opkit.dev/"

	// RingLabel is set on every member Lease to the ring's name, so
	// `kubectl get leases -l ring.shard.opkit.dev/name=<ring>` lists a ring's
	// members.
	RingLabel = "ring.shard.opkit.dev/name"

	// MemberLabel is set on every member Lease to the member's name (the value
	// written into [ShardLabel] on the objects it owns).
	MemberLabel = "ring.shard.opkit.dev/member"

	// WeightAnnotation on a member Lease holds the member's weight on the
	// ring, a non-negative decimal integer (see [WithWeights]; absent or not
	// a number: [DefaultWeight]). The member writes it when its Lease has
	// none ([WithWeight]); afterwards whoever steers the ring (a canary
	// controller, a person with kubectl annotate) changes it, and the member
	// keeps the value across renewals and restarts. The [Assigner] places
	// objects on a ring of the ready members weighted by it; a ready member
	// of weight 0 gets nothing new and gives up what it has through the
	// drain hand-over.
	WeightAnnotation = "ring.shard.opkit.dev/weight"

	// VersionAnnotation on a member Lease names the version of the operator
	// the member runs, as given to [WithVersion]; the member rewrites it
	// whenever it acquires its Lease. Sharding itself ignores it; a canary
	// controller tells the stable members from the canary ones by it.
	VersionAnnotation = "ring.shard.opkit.dev/version"
)

// MaxWeight is the largest weight a member can have: [LeaseWeight] reads a
// larger announced weight as MaxWeight, [WithWeight] and [WithWeights] cap
// theirs at it. A member of weight MaxWeight has 10,000 times the points of
// one of [DefaultWeight] (2,560,000 with [DefaultVirtualNodes]), so no value
// anyone writes into [WeightAnnotation] makes every replica build a ring of
// billions of points.
const MaxWeight = 10_000 * DefaultWeight

// LeaseWeight returns the weight a member Lease announces in
// [WeightAnnotation]: [DefaultWeight] when the annotation is absent or not a
// decimal integer, 0 for a negative value, [MaxWeight] for a larger one
// (also one too large for an int).
func LeaseWeight(lease *coordinationv1.Lease) int {
	v, ok := lease.Annotations[WeightAnnotation]
	if !ok {
		return DefaultWeight
	}
	// Out of an int's range, Atoi returns the nearest int with ErrRange.
	w, err := strconv.Atoi(v)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return DefaultWeight
	}
	return min(max(w, 0), MaxWeight)
}

// LeaseVersion returns the version a member Lease announces in
// [VersionAnnotation], or "".
func LeaseVersion(lease *coordinationv1.Lease) string { return lease.Annotations[VersionAnnotation] }

// ShardLabel returns the label key "shard.opkit.dev/<ring>" whose value names
// the member that owns an object.
func ShardLabel(ring string) string { return ShardLabelPrefix + ring }

// DrainLabel returns the label key "drain.shard.opkit.dev/<ring>".
func DrainLabel(ring string) string { return DrainLabelPrefix + ring }

// LeaseName returns the name of the Lease a member of ring holds:
// "shard-<ring>-<member>". Lookups use [RingLabel] and [MemberLabel], never
// the name, so the name only has to be unique.
func LeaseName(ring, member string) string { return "shard-" + ring + "-" + member }

// validateName accepts ring and member names that are DNS-1123 labels: they
// appear in a label key, a label value and a Lease name.
func validateName(what, name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("sharding: invalid %s name %q: %v", what, name, errs)
	}
	// The Lease name "shard-<ring>-<member>" must stay a DNS subdomain.
	return nil
}

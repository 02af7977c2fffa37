package sharding

import (
	"fmt"

	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/cespare/xxhash/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apisharding "k8s.io/apimachinery/pkg/sharding"
)

// DefaultVirtualNodes is how many points each member gets on a [Ring]. With
// 100 points a member's share of the hash space deviates by roughly ±10 % from
// 1/n; 256 keeps it within a few percent for up to ten members while a ring of
// ten members is still only 2,560 sorted uint64s.
const DefaultVirtualNodes = 256

// Ring is an immutable consistent-hash ring: every member owns
// [DefaultVirtualNodes] (or WithVirtualNodes) points on the 64-bit circle, and
// a hash belongs to the member owning the first point strictly above it
// (wrapping around). Adding or removing one member of n therefore moves only
// about 1/n of all keys, and only to or from that member.
//
// The zero Ring and a ring without members assign nothing: Lookup returns "".
// A Ring is safe for concurrent use.
type Ring struct {
	members []string
	points  []point
}

type point struct {
	pos    uint64
	member string
}

// DefaultWeight is the weight of a member whose weight is not given: a
// member of weight w gets round(w/DefaultWeight × virtual nodes) points on a
// [Ring], so its share of the hash space is about w divided by the sum of
// all members' weights.
const DefaultWeight = 100

// RingOption configures [NewRing]: [WithVirtualNodes], [WithWeights].
type RingOption interface{ applyToRing(*ringOptions) }

type ringOptions struct {
	vnodes  int
	weights map[string]int
}

// WeightsOption is the option [WithWeights] returns.
type WeightsOption map[string]int

func (o WeightsOption) applyToRing(r *ringOptions) { r.weights = o }

// WithWeights gives members weights (members missing from w weigh
// [DefaultWeight]). A member of weight w > 0 gets max(1,
// round(min(w, [MaxWeight]) × virtual nodes / DefaultWeight)) points, so
// its expected share of the hash space is its points over all points; a member of weight 0 or less
// is left off the ring (it is not among [Ring.Members] and owns nothing).
// Points of a member are the same whatever its weight, only their number
// changes: raising one member's weight moves keys only to it, lowering it
// moves keys only away from it.
func WithWeights(w map[string]int) WeightsOption { return WeightsOption(w) }

// NewRing builds a ring of the given members. Duplicates and empty names are
// ignored; the order of members does not matter.
func NewRing(members []string, opts ...RingOption) *Ring {
	o := ringOptions{vnodes: DefaultVirtualNodes}
	for _, opt := range opts {
		opt.applyToRing(&o)
	}
	ms := make([]string, 0, len(members))
	for _, m := range members {
		if m == "" {
			continue
		}
		if w, ok := o.weights[m]; ok && w <= 0 {
			continue
		}
		ms = append(ms, m)
	}
	slices.Sort(ms)
	ms = slices.Compact(ms)
	r := &Ring{members: ms, points: make([]point, 0, len(ms)*o.vnodes)}
	buf := make([]byte, 0, 80)
	for _, m := range ms {
		n := o.vnodes
		if w, ok := o.weights[m]; ok && w != DefaultWeight {
			n = max(1, int(math.Round(float64(min(w, MaxWeight))*float64(o.vnodes)/DefaultWeight)))
		}
		for i := range n {
			buf = append(append(append(buf[:0], m...), '#'), strconv.Itoa(i)...)
			r.points = append(r.points, point{pos: xxhash.Sum64(buf), member: m})
		}
	}
	sort.Slice(r.points, func(i, j int) bool {
		if r.points[i].pos != r.points[j].pos {
			return r.points[i].pos < r.points[j].pos
		}
		return r.points[i].member < r.points[j].member
	})
	// Two members on the same point would make ownership ambiguous; the first
	// (by name) keeps it, deterministically on every replica.
	r.points = slices.CompactFunc(r.points, func(a, b point) bool { return a.pos == b.pos })
	return r
}

// Members returns the ring's members, sorted.
func (r *Ring) Members() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.members)
}

// Len returns the number of members.
func (r *Ring) Len() int {
	if r == nil {
		return 0
	}
	return len(r.members)
}

// Lookup returns the member that owns key, hashed with xxhash, or "" when the
// ring has no members.
func (r *Ring) Lookup(key string) string { return r.LookupHash(xxhash.Sum64String(key)) }

// LookupHash returns the member that owns the 64-bit hash h, or "".
func (r *Ring) LookupHash(h uint64) string {
	if r == nil || len(r.points) == 0 {
		return ""
	}
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i].pos > h })
	if i == len(r.points) {
		i = 0
	}
	return r.points[i].member
}

// HashRange is a contiguous part of the 64-bit hash space, from First to Last
// inclusive (so the whole space, which has 2^64 values, is {0, MaxUint64}).
type HashRange struct {
	First, Last uint64
}

// Contains reports whether h is in the range.
func (h HashRange) Contains(v uint64) bool { return v >= h.First && v <= h.Last }

// Ranges returns the parts of the hash space member owns, sorted and with
// adjacent parts merged; nil when member is not on the ring. The union over
// all members is exactly the whole space, and no two members' ranges overlap.
func (r *Ring) Ranges(member string) []HashRange {
	if r == nil || len(r.points) == 0 {
		return nil
	}
	var out []HashRange
	add := func(first, last uint64) {
		if n := len(out); n > 0 && out[n-1].Last != math.MaxUint64 && out[n-1].Last+1 == first {
			out[n-1].Last = last
			return
		}
		out = append(out, HashRange{First: first, Last: last})
	}
	// Point k owns [pos(k-1), pos(k)); point 0 also owns the wrap-around
	// [pos(last), MaxUint64].
	for k, p := range r.points {
		if p.member != member {
			continue
		}
		if k == 0 {
			if p.pos > 0 {
				add(0, p.pos-1)
			}
			continue
		}
		add(r.points[k-1].pos, p.pos-1)
	}
	if last := r.points[len(r.points)-1]; r.points[0].member == member {
		add(last.pos, math.MaxUint64)
	}
	return out
}

// ObjectKey is the string a [Ring] hashes for an object: "<Kind>[.<group>]/<namespace>/<name>".
// Children hash on their controller owner's key instead of their own, so an
// owner and everything it controls always land on the same member.
func ObjectKey(gk schema.GroupKind, namespace, name string) string {
	return gk.String() + "/" + namespace + "/" + name
}

// UIDHash is the hash of uid that kube-apiserver's shard selector
// (ShardedListAndWatch) compares against its ranges: apimachinery's
// sharding.HashField (FNV-1a 64) read back as a number.
func UIDHash(uid string) uint64 {
	v, _ := strconv.ParseUint(apisharding.HashField(uid), 16, 64)
	return v
}

// ShardSelector renders ranges as a kube-apiserver shard selector over
// object.metadata.uid with apimachinery's sharding.NewSelector, e.g.
// "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')".
// It returns "" for no ranges: callers must not send an empty selector (the
// server rejects it) and must treat "no ranges" as "watch nothing".
func ShardSelector(ranges []HashRange) string {
	if len(ranges) == 0 {
		return ""
	}
	reqs := make([]apisharding.ShardRangeRequirement, len(ranges))
	for i, rg := range ranges {
		end := fmt.Sprintf("0x%016x", rg.Last+1)
		if rg.Last == math.MaxUint64 {
			end = "0x10000000000000000"
		}
		reqs[i] = apisharding.ShardRangeRequirement{Key: "object.metadata.uid", Start: fmt.Sprintf("0x%016x", rg.First), End: end}
	}
	return apisharding.NewSelector(reqs...).String()
}

package sharding

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	apisharding "k8s.io/apimachinery/pkg/sharding"
)

func members(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("shard-%d", i)
	}
	return out
}

func keys(n int) []string {
	out := make([]string, n)
	gk := schema.GroupKind{Kind: "ConfigMap"}
	for i := range out {
		out[i] = ObjectKey(gk, fmt.Sprintf("ns-%d", i%7), fmt.Sprintf("obj-%05d", i))
	}
	return out
}

func TestRingDistribution(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("members=%d", n), func(t *testing.T) {
			r := NewRing(members(n))
			counts := map[string]int{}
			ks := keys(10000)
			for _, k := range ks {
				counts[r.Lookup(k)]++
			}
			even := float64(len(ks)) / float64(n)
			worst := 0.0
			for _, m := range members(n) {
				dev := (float64(counts[m]) - even) / even
				worst = max(worst, math.Abs(dev))
				if math.Abs(dev) > 0.15 {
					t.Errorf("member %s got %d keys, %.1f%% off even (%.0f)", m, counts[m], dev*100, even)
				}
			}
			t.Logf("10000 keys over %d members: %v, worst deviation %.1f%%", n, counts, worst*100)
		})
	}
}

func TestRingMinimalMovement(t *testing.T) {
	ks := keys(10000)
	before := NewRing(members(4))
	added := NewRing(members(5))
	removed := NewRing(members(3))
	movedAdd, movedRemove := 0, 0
	for _, k := range ks {
		b, a, r := before.Lookup(k), added.Lookup(k), removed.Lookup(k)
		if a != b {
			movedAdd++
			if a != "shard-4" {
				t.Fatalf("adding shard-4 moved %s from %s to %s", k, b, a)
			}
		}
		if r != b {
			movedRemove++
			if b != "shard-3" {
				t.Fatalf("removing shard-3 moved %s from %s to %s", k, b, r)
			}
		}
	}
	// Ideal: 1/5 of the keys move to the new member, 1/4 leave the removed one.
	if f := float64(movedAdd) / float64(len(ks)); f > 0.2*1.15 {
		t.Errorf("adding a 5th member moved %.1f%% of keys, want about 20%%", f*100)
	}
	if f := float64(movedRemove) / float64(len(ks)); f > 0.25*1.15 {
		t.Errorf("removing a 4th member moved %.1f%% of keys, want about 25%%", f*100)
	}
	t.Logf("add 4→5 moved %d/10000, remove 4→3 moved %d/10000", movedAdd, movedRemove)
}

func TestRingEmptyAndDeterministic(t *testing.T) {
	var nilRing *Ring
	if got := nilRing.Lookup("x"); got != "" {
		t.Fatalf("nil ring: %q", got)
	}
	if got := NewRing(nil).Lookup("x"); got != "" {
		t.Fatalf("empty ring: %q", got)
	}
	a := NewRing([]string{"b", "a", "c", "a", ""})
	b := NewRing([]string{"c", "b", "a"})
	if got := strings.Join(a.Members(), ","); got != "a,b,c" {
		t.Fatalf("members %s", got)
	}
	for _, k := range keys(1000) {
		if a.Lookup(k) != b.Lookup(k) {
			t.Fatalf("order of members changed the owner of %s", k)
		}
	}
}

// TestRingRangesPartitionHashSpace checks that the ranges of all members cover
// the 64-bit space exactly once and agree with LookupHash.
func TestRingRangesPartitionHashSpace(t *testing.T) {
	r := NewRing(members(3), WithVirtualNodes(50))
	type owned struct {
		HashRange
		m string
	}
	var all []owned
	for _, m := range r.Members() {
		for _, rg := range r.Ranges(m) {
			if rg.First > rg.Last {
				t.Fatalf("bad range %+v", rg)
			}
			all = append(all, owned{rg, m})
			for _, h := range []uint64{rg.First, rg.Last, rg.First/2 + rg.Last/2} {
				if got := r.LookupHash(h); got != m {
					t.Fatalf("hash %#x in %s's range %+v but LookupHash says %s", h, m, rg, got)
				}
			}
		}
	}
	// Sum of sizes must be 2^64: count in float with exactness check via sort.
	var total float64
	for _, o := range all {
		total += float64(o.Last-o.First) + 1
	}
	if math.Abs(total-math.Pow(2, 64)) > 1e6 {
		t.Fatalf("ranges cover %g values, want 2^64", total)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		h := rnd.Uint64()
		n := 0
		for _, o := range all {
			if o.Contains(h) {
				n++
				if o.m != r.LookupHash(h) {
					t.Fatalf("range owner %s != lookup %s", o.m, r.LookupHash(h))
				}
			}
		}
		if n != 1 {
			t.Fatalf("hash %#x in %d ranges", h, n)
		}
	}
}

// TestUIDHashMatchesAPIServer pins UIDHash and ShardSelector to the
// apimachinery implementation kube-apiserver evaluates.
func TestUIDHashMatchesAPIServer(t *testing.T) {
	for _, uid := range []string{"", "0b2e7a51-4f8e-4a0e-9d5c-8c3f3f1f2a10", "x"} {
		if got, want := fmt.Sprintf("%016x", UIDHash(uid)), apisharding.HashField(uid); got != want {
			t.Fatalf("UIDHash(%q) = %s, apimachinery %s", uid, got, want)
		}
	}
	got := ShardSelector([]HashRange{{0, 1<<63 - 1}, {1 << 63, math.MaxUint64}})
	want := "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
	if got != want {
		t.Fatalf("ShardSelector:\n got %s\nwant %s", got, want)
	}
}

// TestRingWeights: a member's share of keys follows its weight, weight 0 is
// off the ring, and changing one member's weight moves keys only to or from
// that member.
func TestRingWeights(t *testing.T) {
	ks := keys(20000)
	ms := []string{"stable-0", "stable-1", "stable-2", "canary"}
	share := func(r *Ring) map[string]float64 {
		out := map[string]float64{}
		for _, k := range ks {
			out[r.Lookup(k)] += 1 / float64(len(ks))
		}
		return out
	}
	// The canary at about 10 %: 3 × 100 stable, 33 canary.
	r10 := NewRing(ms, WithWeights(map[string]int{"canary": 33}))
	s := share(r10)
	if got := s["canary"]; got < 0.07 || got > 0.13 {
		t.Errorf("canary of weight 33 against 3×100 got %.1f%% of keys, want about 9.9%%", got*100)
	}
	t.Logf("weights 100/100/100/33: shares %v", s)
	for _, m := range ms[:3] {
		if s[m] < 0.25 || s[m] > 0.35 {
			t.Errorf("%s got %.1f%%, want about 30%%", m, s[m]*100)
		}
	}

	// Weight 0 is off the ring.
	r0 := NewRing(ms, WithWeights(map[string]int{"canary": 0}))
	if slices.Contains(r0.Members(), "canary") || share(r0)["canary"] != 0 {
		t.Errorf("a member of weight 0 is on the ring: %v", r0.Members())
	}
	// All but one at 0: that one owns everything.
	rAll := NewRing(ms, WithWeights(map[string]int{"stable-0": 0, "stable-1": 0, "stable-2": 0}))
	if got := share(rAll)["canary"]; got < 0.9999 {
		t.Errorf("the only member of weight > 0 owns %.2f%% of keys", got*100)
	}

	// Widening the canary (33 → 100) moves keys only from stable members to
	// it; no key changes hands between stable members.
	r25 := NewRing(ms, WithWeights(map[string]int{"canary": 100}))
	moved := 0
	for _, k := range ks {
		before, after := r10.Lookup(k), r25.Lookup(k)
		if before != after {
			moved++
			if after != "canary" {
				t.Fatalf("key %s moved %s → %s when only the canary's weight grew", k, before, after)
			}
		}
	}
	if moved == 0 {
		t.Fatal("widening moved nothing")
	}
	// Rolling back (canary weight 0) returns exactly the canary's keys, each
	// to the member that had it before the canary joined.
	base := NewRing(ms[:3])
	for _, k := range ks {
		if got, want := r0.Lookup(k), base.Lookup(k); got != want {
			t.Fatalf("key %s: ring with canary at weight 0 places it on %s, the ring without the canary on %s", k, got, want)
		}
	}
	// A weight equal to DefaultWeight is the unweighted ring.
	rd := NewRing(ms, WithWeights(map[string]int{"canary": DefaultWeight}))
	plain := NewRing(ms)
	for _, k := range ks[:1000] {
		if rd.Lookup(k) != plain.Lookup(k) {
			t.Fatalf("weight %d differs from no weight for %s", DefaultWeight, k)
		}
	}
}

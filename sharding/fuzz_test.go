package sharding_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/opkit/opkit/sharding"
)

// FuzzRingLookup: member names come from Lease labels and keys and UIDs from
// objects, all read back from the API. For any of them the ring does not
// panic, assigns every key to exactly one member that is on the ring, and the
// member's hash ranges (what a server-side shard selector watches) contain
// the UID's hash of exactly that member — so no object is watched by two
// members or by none. Explore with `go test -fuzz FuzzRingLookup ./sharding/`.
func FuzzRingLookup(f *testing.F) {
	f.Add("replica-0,replica-1,replica-2", "WebApp.apps.example.com/ns/a", "6b1f0d0e-1c1a-4f3e-9d52-0e8e1f3c2a10")
	f.Add("a", "", "")
	f.Add("x,x,y", "k", "\x00")
	f.Add(",,", "ns/name", "uid")
	f.Fuzz(func(t *testing.T, names, key, uid string) {
		var members []string
		for _, m := range strings.Split(names, ",") {
			if m != "" && !slices.Contains(members, m) {
				members = append(members, m)
			}
		}
		r := sharding.NewRing(members)
		got := r.Lookup(key)
		if len(members) == 0 {
			if got != "" {
				t.Fatalf("empty ring assigned %q to %q", key, got)
			}
			return
		}
		if !slices.Contains(members, got) {
			t.Fatalf("%q assigned to %q, not a member of %q", key, got, members)
		}
		if again := sharding.NewRing(members).Lookup(key); again != got {
			t.Fatalf("%q assigned to %q then %q by the same members", key, got, again)
		}
		h := sharding.UIDHash(uid)
		owners := 0
		for _, m := range members {
			if slices.ContainsFunc(r.Ranges(m), func(hr sharding.HashRange) bool { return hr.Contains(h) }) {
				owners++
				if m != r.LookupHash(h) {
					t.Fatalf("hash %x in %s's ranges but looked up to %s", h, m, r.LookupHash(h))
				}
			}
		}
		if owners != 1 {
			t.Fatalf("hash %x of uid %q is in the ranges of %d members", h, uid, owners)
		}
	})
}

// FuzzLeaseWeight: a member Lease's WeightAnnotation is written by whoever
// steers the ring (a canary controller, anyone with kubectl annotate) and
// read back by every replica, which builds its ring from it. Any value reads
// as a weight in [0, MaxWeight]; a decimal integer in that range reads as
// itself, a negative one as 0, a larger one as MaxWeight, anything else
// (and no annotation) as DefaultWeight; and the ring a member of that weight
// is on holds no more points than the weight gives it.
func FuzzLeaseWeight(f *testing.F) {
	for _, v := range []string{"100", "0", "1", "-5", "250", "1000000", "x", "", " 7", "+7", "0x10", "1e3", "99999999999999999999"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		lease := &coordinationv1.Lease{}
		lease.Annotations = map[string]string{sharding.WeightAnnotation: v}
		w := sharding.LeaseWeight(lease)
		if w < 0 || w > sharding.MaxWeight {
			t.Fatalf("LeaseWeight(%q) = %d, outside [0, %d]", v, w, sharding.MaxWeight)
		}
		want := sharding.DefaultWeight
		if n, err := strconv.Atoi(v); err == nil {
			want = min(max(n, 0), sharding.MaxWeight)
		} else if ne := (*strconv.NumError)(nil); errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			want = sharding.MaxWeight
			if strings.HasPrefix(v, "-") {
				want = 0
			}
		}
		if w != want {
			t.Fatalf("LeaseWeight(%q) = %d, want %d", v, w, want)
		}
		if w == 0 {
			return
		}
		const vnodes = 2
		r := sharding.NewRing([]string{"m", "other"}, sharding.WithVirtualNodes(vnodes), sharding.WithWeights(map[string]int{"m": w}))
		if points, most := len(r.Ranges("m")), max(1, (w*vnodes+sharding.DefaultWeight-1)/sharding.DefaultWeight)+1; points > most {
			t.Fatalf("weight %d: %d ranges on a ring of %d virtual nodes, at most %d expected", w, points, vnodes, most)
		}
	})
}

package sharding_test

import (
	"slices"
	"strings"
	"testing"

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

package sharding_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opkit/opkit/sharding"
)

// The ring places each object key on one member; adding a member moves only
// keys to the new member.
func ExampleRing() {
	gk := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	three := sharding.NewRing([]string{"shard-a", "shard-b", "shard-c"})
	four := sharding.NewRing([]string{"shard-a", "shard-b", "shard-c", "shard-d"})
	for _, name := range []string{"web", "api", "db", "cache", "queue"} {
		key := sharding.ObjectKey(gk, "prod", name)
		fmt.Printf("%s: %s -> %s\n", key, three.Lookup(key), four.Lookup(key))
	}
	// Output:
	// Deployment.apps/prod/web: shard-b -> shard-d
	// Deployment.apps/prod/api: shard-c -> shard-d
	// Deployment.apps/prod/db: shard-b -> shard-b
	// Deployment.apps/prod/cache: shard-c -> shard-c
	// Deployment.apps/prod/queue: shard-b -> shard-b
}

// Children hash on their controller owner, so they land with it.
func ExampleObjectKey() {
	owner := sharding.ObjectKey(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "prod", "web")
	fmt.Println(owner)
	// Output: Deployment.apps/prod/web
}

// Server-side shard selectors are the ring's ranges of the FNV-1a hash space.
func ExampleShardSelector() {
	halves := []sharding.HashRange{{First: 0, Last: 1<<63 - 1}}
	fmt.Println(sharding.ShardSelector(halves))
	fmt.Printf("%016x\n", sharding.UIDHash("0b2e7a51-4f8e-4a0e-9d5c-8c3f3f1f2a10"))
	// Output:
	// shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')
	// c85f2d1d618d75e6
}

func ExampleShardLabel() {
	fmt.Println(sharding.ShardLabel("web"), sharding.DrainLabel("web"))
	// Output: shard.opkit.dev/web drain.shard.opkit.dev/web
}

// A ring whose "canary" member weighs a third of each of the others gets
// about a tenth of the keys; at weight 0 it is off the ring and every key is
// where the ring without it puts it.
func ExampleWithWeights() {
	members := []string{"stable-0", "stable-1", "stable-2", "canary"}
	count := func(r *sharding.Ring) int {
		n := 0
		for i := range 10000 {
			if r.Lookup(fmt.Sprintf("ConfigMap/demo/obj-%05d", i)) == "canary" {
				n++
			}
		}
		return n
	}
	fmt.Println("weight 33:", count(sharding.NewRing(members, sharding.WithWeights(map[string]int{"canary": 33}))), "of 10000 keys")
	zero := sharding.NewRing(members, sharding.WithWeights(map[string]int{"canary": 0}))
	fmt.Println("weight 0:", count(zero), "keys, ring", zero.Members())
	// Output:
	// weight 33: 908 of 10000 keys
	// weight 0: 0 keys, ring [stable-0 stable-1 stable-2]
}

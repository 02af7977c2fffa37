package canary_test

import (
	"fmt"
	"time"

	"github.com/opkit/opkit/sharding"
	"github.com/opkit/opkit/sharding/canary"
)

// The weights the rollout writes on three stable members and one canary at
// each default step, and the share of keys the weighted ring gives the
// canary.
func ExampleWeights() {
	stable, can := []string{"stable-0", "stable-1", "stable-2"}, []string{"canary-0"}
	for _, p := range canary.DefaultSteps {
		w := canary.Weights(p, can, stable)
		ring := sharding.NewRing(append(stable, can...), sharding.WithWeights(w))
		n := 0
		for i := range 10000 {
			if ring.Lookup(fmt.Sprintf("WebApp.apps.example.com/demo/app-%05d", i)) == "canary-0" {
				n++
			}
		}
		fmt.Printf("%3d%%: canary weight %3d, stable weight %3d, canary owns ~%d%% of keys\n", p, w["canary-0"], w["stable-0"], (n+50)/100)
	}
	// Output:
	//  10%: canary weight  33, stable weight 100, canary owns ~11% of keys
	//  25%: canary weight 100, stable weight 100, canary owns ~23% of keys
	//  50%: canary weight 300, stable weight 100, canary owns ~47% of keys
	// 100%: canary weight 100, stable weight   0, canary owns ~100% of keys
}

// DefaultJudge fails a canary that stalls objects the stable version does
// not, at once, and passes one that holds its share for the whole window.
func ExampleDefaultJudge() {
	judge := canary.DefaultJudge(0)
	stable := canary.Cohort{Version: "v1", Objects: 90, Ready: 90}
	v, msg := judge(canary.Sample{Percent: 10, Elapsed: 5 * time.Second, Window: time.Minute, Stable: stable,
		Canary: canary.Cohort{Version: "v2", Objects: 10, Ready: 7, Stalled: 3}})
	fmt.Println(v, "-", msg)
	v, msg = judge(canary.Sample{Percent: 10, Elapsed: time.Minute, Window: time.Minute, Stable: stable,
		Canary: canary.Cohort{Version: "v2", Objects: 10, Ready: 10}})
	fmt.Println(v, "-", msg)
	// Output:
	// Fail - canary v2: 3 of 10 objects unhealthy (3 Stalled, 0 Degraded, 0 not Ready in time); stable v1: 0 of 90
	// Pass - canary v2 held 10% (10 objects) for 1m0s: 0 unhealthy, 0 errors; stable v1: 0 unhealthy of 90
}

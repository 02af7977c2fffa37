package sharding_test

import (
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/sharding"
)

// TestWeightedMember: a member that joins with weight 0 gets nothing; raising
// the weight on its Lease moves objects to it through the drain hand-over,
// lowering it to 0 moves every one of them back, each to the member the
// ring without it places it on. The member keeps the weight written on its
// Lease across renewals, and no object is reconciled by two members at once.
func TestWeightedMember(t *testing.T) {
	n := objectCount(t) / 2
	ns := fixedNamespace(t, "sharding-weights-"+strconv.Itoa(n))
	c := newCluster(t, "weights", ns)
	c.start("a")
	c.start("b")
	c.start("canary", sharding.WithWeight(0), sharding.WithVersion("v2"))
	c.createConfigMaps(n)

	stable := sharding.NewRing([]string{"a", "b"})
	eventually(t, 2*time.Minute, "assignment to the members of weight > 0", func() (bool, string) { return c.settledOn(stable) })
	ctx := testCtx(t, 3*time.Minute)
	leaseKey := types.NamespacedName{Namespace: ns, Name: sharding.LeaseName("weights", "canary")}
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(ctx, leaseKey, lease); err != nil {
		t.Fatal(err)
	}
	if w, v := sharding.LeaseWeight(lease), sharding.LeaseVersion(lease); w != 0 || v != "v2" {
		t.Fatalf("canary Lease announces weight %d version %q, want 0 and v2", w, v)
	}
	if got := c.spread()["canary"]; got != 0 {
		t.Fatalf("a member of weight 0 was given %d objects", got)
	}

	setWeight := func(w int) {
		t.Helper()
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, leaseKey, l); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(l.DeepCopy())
		l.Annotations[sharding.WeightAnnotation] = strconv.Itoa(w)
		if err := env.Client.Patch(ctx, l, patch); err != nil {
			t.Fatal(err)
		}
	}

	// About a third of the objects: weight 100 among two members of 100.
	drains := c.obs.drainAcked.Load()
	setWeight(100)
	widened := sharding.NewRing([]string{"a", "b", "canary"}, sharding.WithWeights(map[string]int{"canary": 100}))
	d := eventually(t, 2*time.Minute, "objects drained to the canary", func() (bool, string) { return c.settledOn(widened) })
	onCanary := c.ownedBy("canary")
	t.Logf("weight 0 → 100: %d of %d objects moved to the canary through %d drains in %s",
		len(onCanary), n, c.obs.drainAcked.Load()-drains, d.Round(time.Millisecond))
	if len(onCanary) == 0 || c.obs.drainAcked.Load() == drains {
		t.Fatalf("raising the weight moved %d objects with %d drains", len(onCanary), c.obs.drainAcked.Load()-drains)
	}

	// Renewals keep the weight someone else wrote, and the member stays live.
	renewed := &coordinationv1.Lease{}
	eventually(t, 30*time.Second, "a renewal after the weight change", func() (bool, string) {
		if err := env.Client.Get(ctx, leaseKey, renewed); err != nil {
			return false, err.Error()
		}
		return renewed.Spec.RenewTime.After(lease.Spec.RenewTime.Add(c.lease)), "not renewed yet"
	})
	if w := sharding.LeaseWeight(renewed); w != 100 {
		t.Fatalf("after renewals the canary Lease announces weight %d, want the 100 written to it", w)
	}

	// Roll back: weight 0 returns every object to where it was before.
	drains = c.obs.drainAcked.Load()
	setWeight(0)
	d = eventually(t, 2*time.Minute, "objects drained back", func() (bool, string) { return c.settledOn(stable) })
	t.Logf("weight 100 → 0: %d objects back on a and b through %d drains in %s",
		len(onCanary), c.obs.drainAcked.Load()-drains, d.Round(time.Millisecond))
	if got := c.ownedBy("canary"); len(got) != 0 {
		t.Fatalf("canary still owns %v", got)
	}
	if got := c.obs.drainAcked.Load() - drains; got < int64(len(onCanary)) {
		t.Errorf("%d objects left the canary with only %d drain acknowledgements", len(onCanary), got)
	}
	c.checkChildrenLabelledFirst(onCanary)
	if max, key := c.overlap.Max(); max != 1 {
		t.Errorf("object %s was reconciled by %d members at once", key, max)
	}
}

package sharding_test

import (
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/sharding"
)

// objectCount is 200 in the default run and OPKIT_SHARDING_OBJECTS (e.g. 1000)
// in the long run.
func objectCount(t testing.TB) int {
	if s := os.Getenv("OPKIT_SHARDING_OBJECTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("OPKIT_SHARDING_OBJECTS: %v", err)
		}
		return n
	}
	return 200
}

// TestDynamicShardingLifecycle runs three replicas, each with its own manager
// and cache and the ring's assigner elected among them, and walks a ring
// through its life: initial spread, graceful removal, a join (drain
// handshake), and a crash (lease left to expire). Throughout, no object is
// reconciled by two members at once.
func TestDynamicShardingLifecycle(t *testing.T) {
	n := objectCount(t)
	ns := fixedNamespace(t, "sharding-lifecycle-"+strconv.Itoa(n))
	c := newCluster(t, "lifecycle", ns)
	a := c.start("a")
	b := c.start("b", sharding.WithReleaseOnStop(false)) // b will "crash"
	cr := c.start("c")
	_ = a

	c.createConfigMaps(n)
	d := eventually(t, 2*time.Minute, "initial assignment", func() (bool, string) { return c.settled([]string{"a", "b", "c"}) })
	t.Logf("%d objects assigned and reconciled by their members in %s", n, d.Round(time.Millisecond))

	spread := c.spread()
	even := float64(n) / 3
	for _, m := range []string{"a", "b", "c"} {
		dev := (float64(spread[m]) - even) / even
		t.Logf("member %s: %d objects (%+.1f%% of even)", m, spread[m], dev*100)
		if math.Abs(dev) > 0.15 {
			t.Errorf("member %s has %d objects, more than 15%% off even (%.1f)", m, spread[m], even)
		}
	}

	out, err := env.Kubectl(testCtx(t, 30*time.Second), "get", "leases", "-n", ns, "-l", sharding.RingLabel+"=lifecycle",
		"-o", "custom-columns=MEMBER:.metadata.labels.ring\\.shard\\.opkit\\.dev/member,HOLDER:.spec.holderIdentity", "--no-headers")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"a", "b", "c"} {
		if !strings.Contains(out, m+" ") {
			t.Errorf("kubectl get leases does not list member %s:\n%s", m, out)
		}
	}

	// Graceful removal: c stops, releases its lease, its objects move at once.
	ofC := c.ownedBy("c")
	start := time.Now()
	cr.stop(t)
	eventually(t, 2*time.Minute, "graceful removal of c", func() (bool, string) { return c.settled([]string{"a", "b"}) })
	t.Logf("graceful removal: %d objects of c moved and reconciled in %s", spread["c"], time.Since(start).Round(time.Millisecond))
	c.checkChildrenLabelledFirst(ofC)

	// Join: c comes back as a new process; a and b drain what now belongs to c.
	drainsBefore := c.obs.drainAcked.Load()
	start = time.Now()
	c.start("c")
	eventually(t, 2*time.Minute, "c joins", func() (bool, string) { return c.settled([]string{"a", "b", "c"}) })
	t.Logf("join: objects drained to c and reconciled in %s (%d drains acknowledged)",
		time.Since(start).Round(time.Millisecond), c.obs.drainAcked.Load()-drainsBefore)
	if c.obs.drainAcked.Load() == drainsBefore {
		t.Errorf("c joined but no drain was acknowledged")
	}

	// Crash: b stops without releasing its lease; its objects move only once
	// the lease is dead (two lease durations without renewal).
	ofB := c.spread()["b"]
	namesOfB := c.ownedBy("b")
	immediateBefore := c.obs.movedImmediate.Load()
	start = time.Now()
	b.stop(t)
	eventually(t, 2*time.Minute, "crash of b", func() (bool, string) { return c.settled([]string{"a", "c"}) })
	c.checkChildrenLabelledFirst(namesOfB)
	took := time.Since(start)
	t.Logf("crash: %d objects of b moved and reconciled %s after it stopped (lease duration %s)",
		ofB, took.Round(time.Millisecond), c.lease)
	if c.obs.movedImmediate.Load() == immediateBefore {
		t.Errorf("no object moved off the dead member")
	}

	if max, key := c.overlap.Max(); max != 1 {
		t.Errorf("object %s was reconciled by %d replicas at once", key, max)
	}
	t.Logf("reconciles: %d, max concurrent reconciles of one object: 1; observer: %s", c.total.Load(), &c.obs)
}

// TestNoMembersThenGenerateName creates objects (with generateName) while the
// ring has no member: the assigner sees them and leaves them alone; once a
// member appears they are all assigned to it.
func TestNoMembersThenGenerateName(t *testing.T) {
	ns := env.Namespace(t)
	c := newCluster(t, "empty", ns)
	ctx := testCtx(t, 2*time.Minute)
	for range 20 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "gen-"}}
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	// An assigner-only replica: no member of its own.
	c.startAssignerOnly()
	eventually(t, time.Minute, "assigner saw 20 unassigned objects", func() (bool, string) {
		counts := c.obs.Counts()
		return counts[""] == 20, "counts: " + strings.Join(sortedKeys(counts), ",")
	})
	list := &corev1.ConfigMapList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		if v, ok := cm.Labels[sharding.ShardLabel("empty")]; ok {
			t.Fatalf("%s labelled %q with no member alive", cm.Name, v)
		}
	}
	c.start("m")
	eventually(t, time.Minute, "objects assigned to the first member", func() (bool, string) { return c.settled([]string{"m"}) })
}

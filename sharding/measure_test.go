package sharding_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/opkit/opkit/sharding"
)

// TestMeasureSharding is the measurement mode (OPKIT_SHARDING_MEASURE=1 for
// 1,000 objects, or OPKIT_SHARDING_OBJECTS; 100 objects otherwise): hand-over times for
// graceful and ungraceful removal, and heap held by each member's cache
// against one unsharded cache. It reports numbers and asserts only
// correctness (every object settled on its member, no overlap).
func TestMeasureSharding(t *testing.T) {
	// CI runs a bounded pass (100 objects) so the measurement cannot rot; the
	// figures come from OPKIT_SHARDING_MEASURE=1 (1,000 objects).
	n := 100
	if os.Getenv("OPKIT_SHARDING_MEASURE") == "1" {
		n = 1000
	}
	if os.Getenv("OPKIT_SHARDING_OBJECTS") != "" {
		n = objectCount(t)
	}
	ns := fixedNamespace(t, fmt.Sprintf("sharding-measure-%d", n))
	c := newCluster(t, "measure", ns)
	c.requeue = time.Minute // keep steady-state load low; hand-over still reconciles every moved object
	payload := strings.Repeat("x", 4096)
	ctx := testCtx(t, 10*time.Minute)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("obj-%04d", i)},
				Data: map[string]string{"payload": payload}}
			if err := env.Client.Create(ctx, cm); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()

	start := time.Now()
	c.start("a")
	b := c.start("b", sharding.WithReleaseOnStop(false))
	cr := c.start("c")
	eventually(t, 5*time.Minute, "initial assignment", func() (bool, string) { return c.settled([]string{"a", "b", "c"}) })
	t.Logf("MEASURE initial: %d objects assigned and reconciled in %s", n, time.Since(start).Round(time.Millisecond))
	spread := c.spread()
	t.Logf("MEASURE spread: a=%d b=%d c=%d (even %.1f)", spread["a"], spread["b"], spread["c"], float64(n)/3)
	// Memory with three members, measured with fresh caches while the
	// replicas idle (requeue is a minute): the delta is what each cache adds.
	measureMemory(t, ns, []string{"a", "b", "c"}, spread)

	start = time.Now()
	cr.stop(t)
	eventually(t, 5*time.Minute, "graceful", func() (bool, string) { return c.settled([]string{"a", "b"}) })
	t.Logf("MEASURE graceful hand-over: %d objects of c moved and reconciled in %s", spread["c"], time.Since(start).Round(time.Millisecond))

	start = time.Now()
	c.start("c")
	eventually(t, 5*time.Minute, "join", func() (bool, string) { return c.settled([]string{"a", "b", "c"}) })
	t.Logf("MEASURE join with drain handshake: %d objects moved to c and reconciled in %s", spread["c"], time.Since(start).Round(time.Millisecond))

	ofB := c.spread()["b"]
	start = time.Now()
	b.stop(t)
	eventually(t, 5*time.Minute, "ungraceful", func() (bool, string) { return c.settled([]string{"a", "c"}) })
	t.Logf("MEASURE ungraceful hand-over: %d objects of b moved and reconciled in %s (lease duration %s)", ofB, time.Since(start).Round(time.Millisecond), c.lease)
	if max, key := c.overlap.Max(); max != 1 {
		t.Errorf("%s reconciled by %d replicas at once", key, max)
	}
	t.Logf("MEASURE observer: %s", &c.obs)

	// Memory: re-label for three members is not needed: measure the caches a
	// replica of each member of the final ring {a, c} and of the original
	// ring {a, b, c} would hold, with fresh caches in a quiet process.
	c.stopAll()
	measureMemory(t, ns, []string{"a", "c"}, c.spread())
}

func measureMemory(t *testing.T, ns string, members []string, spread map[string]int) {
	empty, _ := cacheHeap(t, ns, labels.SelectorFromSet(labels.Set{"no-such-label": "x"}))
	single, objs := cacheHeap(t, ns, nil)
	t.Logf("MEASURE %d members: singleton cache: %d objects, %.2f MiB heap (an empty cache costs %.2f MiB)", len(members), objs, mib(single), mib(empty))
	var sum int64
	for _, m := range members {
		h, o := cacheHeap(t, ns, labels.SelectorFromSet(labels.Set{sharding.ShardLabel("measure"): m}))
		sum += h
		t.Logf("MEASURE shard %s cache: %d objects (labels say %d), %.2f MiB heap", m, o, spread[m], mib(h))
	}
	k := int64(len(members))
	t.Logf("MEASURE %d members: sum of shard caches / singleton = %.3f (minus the empty-cache cost each: %.3f)",
		len(members), float64(sum)/float64(single), float64(sum-k*empty)/float64(single-empty))
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func (c *cluster) stopAll() {
	for _, r := range c.replicas {
		r.stop(c.t)
	}
}

// cacheHeap starts a cache of the namespace's ConfigMaps (with sel, if any),
// waits until it has synced, and returns the live heap it added after GC.
func cacheHeap(t *testing.T, ns string, sel labels.Selector) (int64, int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	before := heap()
	opts := cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}, DefaultLabelSelector: sel}
	c, err := cache.New(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	list := &corev1.ConfigMapList{}
	if err := c.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	count := len(list.Items)
	list = nil
	after := heap()
	runtime.KeepAlive(c)
	return after - before, count
}

package reconciler_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	clientfeatures "k8s.io/client-go/features"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/opkit/opkit/reconciler"
	"github.com/opkit/opkit/testenv"
)

// With CacheListWatch, an informer fills its cache with a LIST (then
// watches); without it, client-go's watch-list stream fills it (a watch, no
// LIST) whenever the WatchListClient feature is on, as it is by default.
func TestCacheListWatchFillsByList(t *testing.T) {
	ns := env.Namespace(t)
	ctx := t.Context()
	for i := range 3 {
		cm := &corev1.ConfigMap{}
		cm.Namespace, cm.Name = ns, "cm-"+string(rune('a'+i))
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	lists := func(t *testing.T, opts cache.Options) int {
		t.Helper()
		cfg, requests := testenv.CountRequests(env.Config)
		opts.Scheme = env.Scheme
		opts.DefaultNamespaces = map[string]cache.Config{ns: {}}
		c, err := cache.New(cfg, opts)
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { _ = c.Start(cctx) }()
		if _, err := c.GetInformer(cctx, &corev1.ConfigMap{}); err != nil {
			t.Fatal(err)
		}
		if !c.WaitForCacheSync(cctx) {
			t.Fatal("cache did not sync")
		}
		var got corev1.ConfigMapList
		if err := c.List(cctx, &got); err != nil || len(got.Items) != 3 {
			t.Fatalf("cached %d ConfigMaps (%v), want 3", len(got.Items), err)
		}
		return requests.Count("list", "configmaps")
	}
	if n := lists(t, reconciler.CacheListWatch(reconciler.CacheOptions())); n != 1 {
		t.Fatalf("with CacheListWatch: %d LIST requests, want 1", n)
	}
	if clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
		if n := lists(t, reconciler.CacheOptions()); n != 0 {
			t.Fatalf("without CacheListWatch: %d LIST requests, want 0 (watch-list)", n)
		}
	}
}

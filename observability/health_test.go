package observability_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/opkit/opkit/observability"
)

func TestReadinessFailsUntilTheCacheHasSynced(t *testing.T) {
	ns := env.Namespace(t)
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	// Registers a ConfigMap informer; it cannot sync before the cache starts.
	if _, err := c.GetInformer(testCtx(t), &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	check := observability.CacheSyncCheck(c)
	probe := func() error { return check(httptest.NewRequest(http.MethodGet, "/readyz", nil)) }
	if err := probe(); err == nil {
		t.Fatal("readiness passed before the cache was started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("cache: %v", err)
		}
	})
	eventually(t, 30*time.Second, "readiness passes after sync", func() (bool, error) {
		err := probe()
		return err == nil, err
	})
}

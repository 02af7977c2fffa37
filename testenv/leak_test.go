package testenv

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// The leak check RunMain runs after a package's tests finds a goroutine left
// running, and not one that ended or one exempted by WithIgnoredGoroutines.
func TestLeakCheckFindsAGoroutineLeftRunning(t *testing.T) {
	before := goleak.IgnoreCurrent()
	stop := make(chan struct{})
	go leakyWorker(stop)
	if checkLeaks(before, nil) {
		t.Fatal("a goroutine left running was not reported")
	}
	if !checkLeaks(before, []string{"github.com/opkit/opkit/testenv.leakyWorker"}) {
		t.Fatal("an exempted goroutine was reported")
	}
	close(stop)
	if !checkLeaks(before, nil) {
		t.Fatal("a goroutine that ended was reported")
	}
}

func leakyWorker(stop <-chan struct{}) { <-stop }

// A multi-namespace cache stopped before its informers synced leaves
// controller-runtime's sync waiters blocked for good (they take no stop):
// the plain options find them, the leak check RunMain runs does not count
// them. The cache's server does not answer, so nothing ever syncs.
func TestLeakCheckIgnoresMultiNamespaceSyncWaiters(t *testing.T) {
	before := goleak.IgnoreCurrent()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	c, err := cache.New(&rest.Config{Host: "https://127.0.0.1:1"}, cache.Options{
		Mapper: mapper, DefaultNamespaces: map[string]cache.Config{"a": {}, "b": {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	inf, err := c.GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{}); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	opts := append(LeakOptions(), before)
	if err := goleak.Find(opts...); err == nil || !strings.Contains(err.Error(), "newMultiNamespaceInformer") {
		t.Fatalf("the stopped cache's sync waiters were not found by the plain options: %v", err)
	}
	if !checkLeaks(before, nil) {
		t.Fatal("the leak check counted the multi-namespace sync waiters")
	}
}

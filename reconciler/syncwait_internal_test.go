package reconciler

import (
	"context"
	"testing"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

type fakeDone struct{ ch chan struct{} }

func (f fakeDone) Name() string          { return "fake" }
func (f fakeDone) Done() <-chan struct{} { return f.ch }

type fakeRegistration struct{ done chan struct{} }

func (r fakeRegistration) HasSynced() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}
func (r fakeRegistration) HasSyncedChecker() toolscache.DoneChecker { return fakeDone{r.done} }

// The wrapped registration's HasSynced answers when the registration syncs
// (client-go's WaitForCacheSync, which polls every 100ms, then returns at
// its first look), and false once the source's context is done first.
func TestSyncWaitRegistration(t *testing.T) {
	done := make(chan struct{})
	reg := syncWaitRegistration{ResourceEventHandlerRegistration: fakeRegistration{done}, ctx: context.Background()}
	go func() { time.Sleep(20 * time.Millisecond); close(done) }()
	stop := make(chan struct{})
	if !toolscache.WaitForCacheSync(stop, reg.HasSynced) {
		t.Fatal("WaitForCacheSync: false, want true once the registration synced")
	}
	if !reg.HasSynced() {
		t.Fatal("HasSynced after sync: false")
	}

	ctx, cancel := context.WithCancel(context.Background())
	never := syncWaitRegistration{ResourceEventHandlerRegistration: fakeRegistration{make(chan struct{})}, ctx: ctx}
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if never.HasSynced() {
		t.Fatal("HasSynced of a registration that never synced, context done: true")
	}

	c := syncWaitCache{}
	if !c.WaitForCacheSync(context.Background()) {
		t.Fatal("WaitForCacheSync with a live context: false")
	}
	if c.WaitForCacheSync(ctx) {
		t.Fatal("WaitForCacheSync with a done context: true")
	}
}

// The manager the builder hands controller-runtime's builder serves its
// cache as a syncWaitCache, so Watches and References sources wait like
// For and Owns.
func TestSyncWaitManagerCache(t *testing.T) {
	inner := &signalCache{}
	m := syncWaitManager{Manager: cacheOnlyManager{c: inner}}
	swc, ok := m.GetCache().(syncWaitCache)
	if !ok || swc.Cache != inner {
		t.Fatalf("GetCache() = %#v, want a syncWaitCache over the manager's cache", m.GetCache())
	}
}

type cacheOnlyManager struct {
	manager.Manager
	c cache.Cache
}

func (m cacheOnlyManager) GetCache() cache.Cache { return m.c }

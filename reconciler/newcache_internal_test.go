package reconciler

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type signalInformer struct {
	cache.Informer
	done chan struct{}
}

func (i *signalInformer) HasSyncedChecker() toolscache.DoneChecker { return fakeDone{i.done} }

// signalCache is the cache NewCache wraps: one informer, and a
// WaitForCacheSync that counts its calls.
type signalCache struct {
	cache.Cache
	inf   *signalInformer
	waits atomic.Int32
}

func (c *signalCache) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return c.inf, nil
}

func (c *signalCache) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}

func (c *signalCache) WaitForCacheSync(context.Context) bool {
	c.waits.Add(1)
	return true
}

// NewCache's WaitForCacheSync returns when the informers asked for through
// it signal their sync — not before (it has not asked the wrapped cache
// yet), and with no time passing after (in a synctest bubble, the wrapped
// cache's 100ms poll would show as time) — then asks the wrapped cache once;
// false, without asking, when the context ends first. An informer asked for
// several times is waited for once.
func TestNewCacheWaitsForSyncSignals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := &signalCache{inf: &signalInformer{done: make(chan struct{})}}
		c := &syncSignalCache{Cache: inner, seen: map[any]bool{}}
		ctx := context.Background()
		for range 2 {
			if _, err := c.GetInformer(ctx, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.IndexField(ctx, nil, "f", nil); err != nil {
			t.Fatal(err)
		}
		if len(c.checkers) != 1 {
			t.Fatalf("%d sync signals tracked for one informer, want 1", len(c.checkers))
		}
		got := make(chan bool, 1)
		go func() { got <- c.WaitForCacheSync(ctx) }()
		synctest.Wait()
		select {
		case v := <-got:
			t.Fatalf("WaitForCacheSync returned %v before the informer synced", v)
		default:
		}
		if n := inner.waits.Load(); n != 0 {
			t.Fatalf("wrapped cache asked %d times before the sync signal", n)
		}
		close(inner.inf.done)
		synctest.Wait()
		select {
		case v := <-got:
			if !v {
				t.Fatal("WaitForCacheSync: false after the sync")
			}
		default:
			t.Fatal("WaitForCacheSync still waiting after the sync signal")
		}
		if n := inner.waits.Load(); n != 1 {
			t.Fatalf("wrapped cache asked %d times, want 1", n)
		}

		never := &signalCache{inf: &signalInformer{done: make(chan struct{})}}
		c = &syncSignalCache{Cache: never, seen: map[any]bool{}}
		if _, err := c.GetInformer(ctx, nil); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if c.WaitForCacheSync(cctx) {
			t.Fatal("WaitForCacheSync with a done context: true")
		}
		if n := never.waits.Load(); n != 0 {
			t.Fatalf("wrapped cache asked %d times after the context ended, want 0", n)
		}
	})
}

package reconciler

import (
	"context"
	"reflect"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewCache is a cache.NewCacheFunc (manager.Options.NewCache): the cache
// cache.New builds, except that its WaitForCacheSync returns as soon as its
// informers have synced rather than at client-go's next look.
//
// A manager starts its controllers only once its cache's WaitForCacheSync
// has returned, and controller-runtime's looks every 100ms
// (client-go's WaitForCacheSync): on every start, restart and leader
// hand-over, an operator's workers started up to 100ms after its informers
// had synced, idle meanwhile. This cache's WaitForCacheSync first waits on
// the sync signal (client-go's DoneChecker) of every informer that was asked
// for through it (GetInformer, GetInformerForKind, IndexField — what a
// manager's controllers and indexes do before it starts), then asks the
// wrapped cache's own WaitForCacheSync, whose first look answers at once when
// every informer has synced: an informer made another way (a Get or List that
// started one) is still waited for, at the old pace. What a read returns, how
// the informers list and watch, and when they count as synced are
// controller-runtime's own; only the wait differs. The reconciler's builder
// already waits this way for each watch's handler; this is the manager's
// wait before it.
func NewCache(config *rest.Config, opts cache.Options) (cache.Cache, error) {
	c, err := cache.New(config, opts)
	if err != nil {
		return nil, err
	}
	return &syncSignalCache{Cache: c, seen: map[any]bool{}}, nil
}

// syncSignalCache is [NewCache]'s cache.
type syncSignalCache struct {
	cache.Cache
	mu       sync.Mutex
	seen     map[any]bool
	checkers []toolscache.DoneChecker
}

// track keeps inf's sync signal, once per informer.
func (c *syncSignalCache) track(inf cache.Informer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if reflect.TypeOf(inf).Comparable() {
		if c.seen[inf] {
			return
		}
		c.seen[inf] = true
	}
	c.checkers = append(c.checkers, inf.HasSyncedChecker())
}

// GetInformer is the wrapped cache's, and tracks the informer.
func (c *syncSignalCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	inf, err := c.Cache.GetInformer(ctx, obj, opts...)
	if err == nil {
		c.track(inf)
	}
	return inf, err
}

// GetInformerForKind is the wrapped cache's, and tracks the informer.
func (c *syncSignalCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	inf, err := c.Cache.GetInformerForKind(ctx, gvk, opts...)
	if err == nil {
		c.track(inf)
	}
	return inf, err
}

// IndexField is the wrapped cache's (which makes obj's informer), and tracks
// that informer.
func (c *syncSignalCache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	if err := c.Cache.IndexField(ctx, obj, field, extract); err != nil {
		return err
	}
	if inf, err := c.Cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err == nil {
		c.track(inf)
	}
	return nil
}

// WaitForCacheSync waits for the tracked informers' sync signals, then for
// the wrapped cache's WaitForCacheSync; false when ctx is done first or the
// wrapped cache reports a failure.
func (c *syncSignalCache) WaitForCacheSync(ctx context.Context) bool {
	c.mu.Lock()
	checkers := slices.Clone(c.checkers)
	c.mu.Unlock()
	if !toolscache.WaitFor(ctx, "", checkers...) {
		return false
	}
	return c.Cache.WaitForCacheSync(ctx)
}

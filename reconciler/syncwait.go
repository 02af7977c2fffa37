package reconciler

import (
	"context"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// syncWaitManager is the manager handed to controller-runtime's builder:
// the builder's Watches sources read its GetCache, a [syncWaitCache]; all
// else (Add, the scheme, the controller options) is the manager's.
type syncWaitManager struct{ manager.Manager }

// GetCache returns the manager's cache as a [syncWaitCache].
func (m syncWaitManager) GetCache() cache.Cache { return syncWaitCache{m.Manager.GetCache()} }

// syncWaitCache is the cache every watch of a builder's controller (For,
// Owns, Watches, References) reads through: the manager's cache, except that a watch's wait for its
// informer to sync is woken by the sync itself rather than polled.
//
// controller-runtime's Kind source waits for the whole cache to sync, then
// for its handler to have received the initial list, each with client-go's
// WaitForCacheSync, which looks every 100ms: a controller's workers start
// up to 200ms after its informers synced, on every start and restart of
// every operator. Here the first wait returns at once (the second covers it:
// a handler registration has synced only once its informer has), and the
// second is answered by the registration's HasSyncedChecker, whose channel
// closes when the last initial event has been handed to the handler. The
// events, their order, the predicates and the handler are controller-
// runtime's own; only the wait differs.
type syncWaitCache struct{ cache.Cache }

// WaitForCacheSync returns true unless ctx is done: the registration's wait
// that follows it in a Kind source covers the informer's sync.
func (c syncWaitCache) WaitForCacheSync(ctx context.Context) bool { return ctx.Err() == nil }

// GetInformer returns the manager cache's informer for obj, wrapped so that
// the registrations it returns can be waited for without polling until ctx
// (the Kind source's start context) is done.
func (c syncWaitCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	inf, err := c.Cache.GetInformer(ctx, obj, opts...)
	if err != nil {
		return nil, err
	}
	return syncWaitInformer{Informer: inf, ctx: ctx}, nil
}

type syncWaitInformer struct {
	cache.Informer
	ctx context.Context
}

func (i syncWaitInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	reg, err := i.Informer.AddEventHandlerWithOptions(h, o)
	if err != nil {
		return nil, err
	}
	return syncWaitRegistration{ResourceEventHandlerRegistration: reg, ctx: i.ctx}, nil
}

// syncWaitRegistration's HasSynced blocks until the registration has synced
// (true) or the source's context is done (false). It is handed only to the
// Kind source, whose single caller is client-go's WaitForCacheSync: its
// first look then returns exactly when the sync happens. The Kind source
// never removes its handler, so the wrapper is never handed back to the
// informer's RemoveEventHandler.
type syncWaitRegistration struct {
	toolscache.ResourceEventHandlerRegistration
	ctx context.Context
}

func (r syncWaitRegistration) HasSynced() bool {
	select {
	case <-r.ResourceEventHandlerRegistration.HasSyncedChecker().Done():
		return true
	case <-r.ctx.Done():
		return r.ResourceEventHandlerRegistration.HasSynced()
	}
}

package nscache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// fanout is the informer of one namespaced kind across the served
// namespaces. It records what callers add (event handlers, indexers) so that
// a namespace joining later gets the same. Its fields are guarded by c.mu.
type fanout struct {
	c   *Cache
	key informerKey
	get func(context.Context, cache.Cache) (cache.Informer, error)

	perNS       map[string]cache.Informer
	handlers    []*registration
	indexers    []toolscache.Indexers
	indexNames  sets.Set[string]
	removed     bool
	syncChecker *syncChecker
}

var _ cache.Informer = (*fanout)(nil)

func newFanout(c *Cache, key informerKey, get func(context.Context, cache.Cache) (cache.Informer, error)) *fanout {
	f := &fanout{c: c, key: key, get: get, perNS: map[string]cache.Informer{}, indexNames: sets.New[string]()}
	f.syncChecker = newSyncChecker("nscache informer for "+key.gvk.String(), f.HasSynced, c.stopped)
	return f
}

// AddEventHandler adds handler to the informer of every served namespace and
// of every namespace that joins later.
func (f *fanout) AddEventHandler(handler toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return f.AddEventHandlerWithOptions(handler, toolscache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod is AddEventHandler with a resync period.
func (f *fanout) AddEventHandlerWithResyncPeriod(handler toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return f.AddEventHandlerWithOptions(handler, toolscache.HandlerOptions{ResyncPeriod: &resync})
}

// AddEventHandlerWithOptions is AddEventHandler with options.
func (f *fanout) AddEventHandlerWithOptions(handler toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if f.removed {
		return nil, fmt.Errorf("nscache: add a %s event handler: the informer was removed", f.key.gvk.Kind)
	}
	r := &registration{f: f, handler: handler, opts: opts, perNS: map[string]toolscache.ResourceEventHandlerRegistration{}}
	r.syncChecker = newSyncChecker("nscache handler for "+f.key.gvk.String(), r.HasSynced, f.c.stopped)
	for ns, inf := range f.perNS {
		h, err := inf.AddEventHandlerWithOptions(handler, opts)
		if err != nil {
			for ns, h := range r.perNS {
				_ = f.perNS[ns].RemoveEventHandler(h)
			}
			return nil, fmt.Errorf("nscache: add a %s event handler in namespace %s: %w", f.key.gvk.Kind, ns, err)
		}
		r.perNS[ns] = h
	}
	f.handlers = append(f.handlers, r)
	return r, nil
}

// RemoveEventHandler removes a handler this informer returned, from every
// namespace; namespaces joining later do not get it. It is idempotent.
func (f *fanout) RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error {
	r, ok := handle.(*registration)
	if !ok || r.f != f {
		return fmt.Errorf("nscache: remove a %s event handler: %T was not returned by this informer", f.key.gvk.Kind, handle)
	}
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if r.removed {
		return nil
	}
	var errs []error
	for ns, h := range r.perNS {
		if inf, ok := f.perNS[ns]; ok {
			if err := inf.RemoveEventHandler(h); err != nil {
				errs = append(errs, fmt.Errorf("namespace %s: %w", ns, err))
			}
		}
	}
	r.removed = true
	r.perNS = map[string]toolscache.ResourceEventHandlerRegistration{}
	for i, other := range f.handlers {
		if other == r {
			f.handlers = append(f.handlers[:i], f.handlers[i+1:]...)
			break
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("nscache: remove a %s event handler: %w", f.key.gvk.Kind, errors.Join(errs...))
	}
	return nil
}

// AddIndexers adds indexers to every served namespace's informer and to
// every later one. An indexer name already added is an error.
func (f *fanout) AddIndexers(indexers toolscache.Indexers) error {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	for name := range indexers {
		if f.indexNames.Has(name) {
			return fmt.Errorf("nscache: add %s indexers: indexer %q already exists", f.key.gvk.Kind, name)
		}
	}
	for ns, inf := range f.perNS {
		if err := inf.AddIndexers(indexers); err != nil {
			return fmt.Errorf("nscache: add %s indexers in namespace %s: %w", f.key.gvk.Kind, ns, err)
		}
	}
	for name := range indexers {
		f.indexNames.Insert(name)
	}
	f.indexers = append(f.indexers, indexers)
	return nil
}

// HasSynced reports whether the initial namespaces are known and the
// informer of every namespace served now has synced. It can turn false again
// while a newly joined namespace syncs.
func (f *fanout) HasSynced() bool {
	if !f.c.isSynced() {
		return false
	}
	f.c.mu.RLock()
	defer f.c.mu.RUnlock()
	for _, inf := range f.perNS {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// HasSyncedChecker's Done channel closes the first time HasSynced is true.
func (f *fanout) HasSyncedChecker() toolscache.DoneChecker { return f.syncChecker }

// IsStopped reports whether the informer was removed (RemoveInformer) or
// the cache has stopped.
func (f *fanout) IsStopped() bool {
	select {
	case <-f.c.stopped:
		return true
	default:
	}
	f.c.mu.RLock()
	defer f.c.mu.RUnlock()
	return f.removed
}

// registration is one handler added to a fanout, with its registration in
// each served namespace's informer. Its fields are guarded by f.c.mu.
type registration struct {
	f           *fanout
	handler     toolscache.ResourceEventHandler
	opts        toolscache.HandlerOptions
	perNS       map[string]toolscache.ResourceEventHandlerRegistration
	removed     bool
	syncChecker *syncChecker
}

// HasSynced reports whether the initial namespaces are known and the handler
// has received the initial objects of every namespace served now.
func (r *registration) HasSynced() bool {
	if !r.f.c.isSynced() {
		return false
	}
	r.f.c.mu.RLock()
	defer r.f.c.mu.RUnlock()
	for _, h := range r.perNS {
		if !h.HasSynced() {
			return false
		}
	}
	return true
}

// HasSyncedChecker's Done channel closes the first time HasSynced is true.
func (r *registration) HasSyncedChecker() toolscache.DoneChecker { return r.syncChecker }

// syncChecker turns a HasSynced function into a toolscache.DoneChecker. The
// set of namespaces changes, so there is no fixed set of channels to wait on:
// the first call to Done starts one goroutine that polls synced until it is
// true or the cache stops.
type syncChecker struct {
	name   string
	synced func() bool
	stop   <-chan struct{}
	once   sync.Once
	done   chan struct{}
}

func newSyncChecker(name string, synced func() bool, stop <-chan struct{}) *syncChecker {
	return &syncChecker{name: name, synced: synced, stop: stop, done: make(chan struct{})}
}

// Name names what is waited for.
func (s *syncChecker) Name() string { return s.name }

// Done is closed once synced has returned true.
func (s *syncChecker) Done() <-chan struct{} {
	s.once.Do(func() { go s.wait() })
	return s.done
}

func (s *syncChecker) wait() {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if s.synced() {
			close(s.done)
			return
		}
		select {
		case <-t.C:
		case <-s.stop:
			return
		}
	}
}

package nscache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Option configures [New].
type Option func(*options)

type options struct {
	log      logr.Logger
	nsConfig cache.Config
	retry    time.Duration
}

// WithLogger sets the logger for namespaces joining and leaving and for
// errors that have no caller to return to (a namespace whose cache cannot be
// created). The default is controller-runtime's logger named "nscache".
func WithLogger(l logr.Logger) Option { return func(o *options) { o.log = l } }

// WithNamespaceConfig sets the cache.Config every per-namespace cache gets
// for its namespace (the value of its DefaultNamespaces entry): label and
// field selectors, transform, deep-copy and sync settings for objects in
// served namespaces. Unset fields are defaulted from cache.Options as usual.
func WithNamespaceConfig(cfg cache.Config) Option { return func(o *options) { o.nsConfig = cfg } }

// New returns a constructor for manager.Options.NewCache: the cache it makes
// serves namespaced objects only in the namespaces whose labels match
// selector, following the set as it changes (see the package documentation).
// Use labels.Everything() to serve every namespace.
//
// The cache.Options the manager passes are kept for every inner cache, except
// that DefaultNamespaces must be empty (the selector chooses the namespaces)
// and ByObject entries must not set Namespaces; the constructor fails
// otherwise, and when selector is nil.
func New(selector labels.Selector, opts ...Option) cache.NewCacheFunc {
	o := options{log: logf.Log.WithName("nscache"), retry: time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	return func(cfg *rest.Config, copts cache.Options) (cache.Cache, error) {
		return newCache(cfg, copts, selector, o)
	}
}

// Cache is the cache [New] makes. It implements cache.Cache; the manager
// returns it from GetCache, so an operator can reach [Cache.Namespaces] with
// mgr.GetCache().(*nscache.Cache). It is safe for concurrent use.
type Cache struct {
	selector labels.Selector
	scheme   *runtime.Scheme
	mapper   meta.RESTMapper
	log      logr.Logger
	retry    time.Duration

	// newNamespaceCache makes the cache for one served namespace.
	newNamespaceCache func(namespace string) (cache.Cache, error)
	// namespaces holds the Namespace objects the selector selects: the
	// cluster-wide list/watch of namespaces, filtered by the API server.
	namespaces cache.Cache
	// cluster holds every other cluster-scoped kind, on demand.
	cluster cache.Cache

	started chan struct{} // closed when Start begins
	synced  chan struct{} // closed once the first set of namespaces is served
	stopped chan struct{} // closed when Start returns
	poke    chan struct{} // a Namespace event arrived

	mu        sync.RWMutex
	running   bool
	served    map[string]*served
	informers map[informerKey]*fanout
	indexes   []fieldIndex
}

// served is one namespace's running cache.
type served struct {
	cache  cache.Cache
	ctx    context.Context // cancelled when the namespace leaves or the cache stops
	cancel context.CancelFunc
	done   chan struct{} // closed when the inner cache's Start returned
}

// bound returns ctx, also cancelled when s stops, so a read never waits on a
// stopped cache's informer.
func (s *served) bound(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// fieldIndex is an IndexField call, replayed on every namespace that joins.
type fieldIndex struct {
	key     informerKey
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// informerKey is how controller-runtime tells informers apart: the kind and
// whether objects are typed, unstructured or metadata-only.
type informerKey struct {
	gvk  schema.GroupVersionKind
	repr string
}

func keyFor(gvk schema.GroupVersionKind, obj runtime.Object) informerKey {
	switch obj.(type) {
	case runtime.Unstructured:
		return informerKey{gvk, "unstructured"}
	case *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		return informerKey{gvk, "metadata"}
	default:
		return informerKey{gvk, "typed"}
	}
}

var namespaceGK = schema.GroupKind{Group: corev1.GroupName, Kind: "Namespace"}

func newCache(cfg *rest.Config, opts cache.Options, selector labels.Selector, o options) (*Cache, error) {
	if selector == nil {
		return nil, errors.New("nscache: the namespace selector is nil (labels.Everything() serves every namespace)")
	}
	if len(opts.DefaultNamespaces) > 0 {
		return nil, errors.New("nscache: cache.Options.DefaultNamespaces must be empty: the namespace selector chooses the namespaces")
	}
	for obj, by := range opts.ByObject {
		if by.Namespaces != nil {
			return nil, fmt.Errorf("nscache: cache.Options.ByObject[%T].Namespaces must be nil: the namespace selector chooses the namespaces", obj)
		}
	}
	// Every inner cache shares one HTTP client, scheme and REST mapper, so
	// discovery and connections are not repeated per namespace.
	var err error
	if opts.HTTPClient == nil {
		if opts.HTTPClient, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, fmt.Errorf("nscache: HTTP client for the rest config: %w", err)
		}
	}
	if opts.Scheme == nil {
		opts.Scheme = scheme.Scheme
	}
	if opts.Mapper == nil {
		if opts.Mapper, err = apiutil.NewDynamicRESTMapper(cfg, opts.HTTPClient); err != nil {
			return nil, fmt.Errorf("nscache: REST mapper: %w", err)
		}
	}

	nsOpts := opts
	nsOpts.ByObject = nil
	nsOpts.DefaultLabelSelector = selector
	nsOpts.DefaultFieldSelector = nil
	nsOpts.ReaderFailOnMissingInformer = false
	namespaces, err := cache.New(cfg, nsOpts)
	if err != nil {
		return nil, fmt.Errorf("nscache: the Namespace cache: %w", err)
	}
	cluster, err := cache.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("nscache: the cluster-scoped cache: %w", err)
	}
	c := &Cache{
		selector:   selector,
		scheme:     opts.Scheme,
		mapper:     opts.Mapper,
		log:        o.log,
		retry:      o.retry,
		namespaces: namespaces,
		cluster:    cluster,
		started:    make(chan struct{}),
		synced:     make(chan struct{}),
		stopped:    make(chan struct{}),
		poke:       make(chan struct{}, 1),
		served:     map[string]*served{},
		informers:  map[informerKey]*fanout{},
	}
	c.newNamespaceCache = func(ns string) (cache.Cache, error) {
		per := opts
		per.ByObject = maps.Clone(opts.ByObject)
		per.DefaultNamespaces = map[string]cache.Config{ns: o.nsConfig}
		return cache.New(cfg, per)
	}
	return c, nil
}

var _ cache.Cache = (*Cache)(nil)

// Namespaces returns the namespaces served right now, sorted: each has a
// running cache. A namespace leaves this list before its cache is stopped,
// and joins it once its cache has been created and started.
func (c *Cache) Namespaces() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Sorted(maps.Keys(c.served))
}

// Start runs the Namespace watch, the cluster-scoped cache and one cache per
// served namespace until ctx is done, then stops them all and returns once
// every goroutine it started has ended. It blocks. A second call fails.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("nscache: Start called twice")
	}
	c.running = true
	c.mu.Unlock()
	defer close(c.stopped)

	nsInformer, err := c.namespaces.GetInformer(ctx, &corev1.Namespace{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("nscache: the Namespace informer: %w", err)
	}
	poke := func() {
		select {
		case c.poke <- struct{}{}:
		default:
		}
	}
	reg, err := nsInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	})
	if err != nil {
		return fmt.Errorf("nscache: watch Namespaces: %w", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	close(c.started)
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.namespaces.Start(ctx); err != nil {
			errs <- fmt.Errorf("nscache: the Namespace cache: %w", err)
		}
	})
	wg.Go(func() {
		if err := c.cluster.Start(ctx); err != nil {
			errs <- fmt.Errorf("nscache: the cluster-scoped cache: %w", err)
		}
	})
	wg.Go(func() { c.run(ctx, reg) })

	var result error
	select {
	case <-ctx.Done():
	case result = <-errs:
		cancel()
	}
	wg.Wait()
	// Every served cache runs under ctx, so they are all stopping now.
	c.mu.Lock()
	all := slices.Collect(maps.Values(c.served))
	c.served = map[string]*served{}
	c.mu.Unlock()
	for _, s := range all {
		<-s.done
	}
	return result
}

// run serves the selected namespaces: after the Namespace informer has
// synced, and again after every Namespace event, it compares the namespaces
// the informer holds with those served, starts the missing and stops the
// extra. Comparing levels instead of following single events means a burst
// of label flips ends in the right set, however it is interleaved.
func (c *Cache) run(ctx context.Context, reg toolscache.ResourceEventHandlerRegistration) {
	if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return reg.HasSynced(), nil
	}); err != nil {
		return
	}
	first := true
	for {
		failed := c.sync(ctx)
		if first {
			close(c.synced)
			first = false
		}
		var retry <-chan time.Time
		if failed {
			retry = time.After(c.retry)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.poke:
		case <-retry:
		}
	}
}

// sync makes the served set equal to the selected set. It reports whether a
// namespace could not be joined (to be retried).
func (c *Cache) sync(ctx context.Context) (failed bool) {
	var list corev1.NamespaceList
	if err := c.namespaces.List(ctx, &list); err != nil {
		if ctx.Err() == nil {
			c.log.Error(err, "nscache: list the selected Namespaces")
		}
		return true
	}
	want := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		// The API server filters the watch; matching again here costs
		// nothing and keeps a namespace out if a label changed in between.
		if c.selector.Matches(labels.Set(list.Items[i].Labels)) {
			want[list.Items[i].Name] = true
		}
	}
	var leaving []string
	var stopping []*served
	c.mu.Lock()
	for name, s := range c.served {
		if !want[name] {
			c.detachLocked(name)
			delete(c.served, name)
			s.cancel()
			leaving = append(leaving, name)
			stopping = append(stopping, s)
		}
	}
	var joined []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if _, ok := c.served[name]; ok {
			continue
		}
		if err := c.joinLocked(ctx, name); err != nil {
			c.log.Error(err, "nscache: cannot serve namespace; retrying", "namespace", name)
			failed = true
			continue
		}
		joined = append(joined, name)
	}
	c.mu.Unlock()
	for _, s := range stopping {
		<-s.done
	}
	for _, name := range leaving {
		c.log.Info("namespace left: its cache is stopped", "namespace", name)
	}
	for _, name := range joined {
		c.log.Info("namespace joined: its cache is started", "namespace", name)
	}
	return failed
}

// joinLocked creates the cache for namespace ns, replays every recorded
// index, informer, indexer and event handler on it, and starts it under ctx.
// On error nothing of ns is left behind. c.mu is held.
func (c *Cache) joinLocked(ctx context.Context, ns string) error {
	nc, err := c.newNamespaceCache(ns)
	if err != nil {
		return fmt.Errorf("nscache: create the cache of namespace %s: %w", ns, err)
	}
	if err := c.wireLocked(ctx, ns, nc); err != nil {
		c.detachLocked(ns)
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &served{cache: nc, ctx: sctx, cancel: cancel, done: make(chan struct{})}
	c.served[ns] = s
	go func() {
		defer close(s.done)
		if err := nc.Start(sctx); err != nil {
			c.log.Error(err, "nscache: the cache of a namespace stopped", "namespace", ns)
		}
	}()
	return nil
}

func (c *Cache) wireLocked(ctx context.Context, ns string, nc cache.Cache) error {
	for _, ix := range c.indexes {
		if err := nc.IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			return fmt.Errorf("nscache: namespace %s: index %s by %q: %w", ns, ix.key.gvk.Kind, ix.field, err)
		}
	}
	for _, f := range c.informers {
		inf, err := f.get(ctx, nc)
		if err != nil {
			return fmt.Errorf("nscache: namespace %s: informer for %s: %w", ns, f.key.gvk.Kind, err)
		}
		f.perNS[ns] = inf
		for _, ix := range f.indexers {
			if err := inf.AddIndexers(ix); err != nil {
				return fmt.Errorf("nscache: namespace %s: indexers for %s: %w", ns, f.key.gvk.Kind, err)
			}
		}
		for _, r := range f.handlers {
			h, err := inf.AddEventHandlerWithOptions(r.handler, r.opts)
			if err != nil {
				return fmt.Errorf("nscache: namespace %s: event handler for %s: %w", ns, f.key.gvk.Kind, err)
			}
			r.perNS[ns] = h
		}
	}
	return nil
}

// detachLocked removes every event handler from namespace ns's informers,
// so no further event of ns reaches them, and forgets those informers.
// c.mu is held.
func (c *Cache) detachLocked(ns string) {
	for _, f := range c.informers {
		inf, ok := f.perNS[ns]
		if !ok {
			continue
		}
		for _, r := range f.handlers {
			if h, ok := r.perNS[ns]; ok {
				_ = inf.RemoveEventHandler(h) // idempotent; its informer is about to stop anyway
				delete(r.perNS, ns)
			}
		}
		delete(f.perNS, ns)
	}
}

// route tells where objects of gvk live: the Namespace cache, the
// cluster-scoped cache, or (namespaced == true) the per-namespace caches.
func (c *Cache) route(gvk schema.GroupVersionKind) (target cache.Cache, namespaced bool, err error) {
	if gvk.GroupKind() == namespaceGK {
		return c.namespaces, false, nil
	}
	namespaced, err = apiutil.IsGVKNamespaced(gvk, c.mapper)
	if err != nil {
		return nil, false, fmt.Errorf("nscache: scope of %s: %w", gvk, err)
	}
	if !namespaced {
		return c.cluster, false, nil
	}
	return nil, true, nil
}

// waitSynced waits until the first set of namespaces is served.
func (c *Cache) waitSynced(ctx context.Context) error {
	select {
	case <-c.started:
	default:
		return &cache.ErrCacheNotStarted{}
	}
	select {
	case <-c.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("nscache: waiting for the selected namespaces: %w", ctx.Err())
	}
}

func (c *Cache) isSynced() bool {
	select {
	case <-c.synced:
		return true
	default:
		return false
	}
}

// servedFor returns the cache of namespace ns, or a NotSelectedError.
func (c *Cache) servedFor(ctx context.Context, ns string, gk schema.GroupKind, name string) (*served, error) {
	if err := c.waitSynced(ctx); err != nil {
		return nil, err
	}
	c.mu.RLock()
	s := c.served[ns]
	c.mu.RUnlock()
	if s == nil {
		return nil, &NotSelectedError{Namespace: ns, Kind: gk, Name: name}
	}
	return s, nil
}

// Get reads one object. Cluster-scoped objects come from the cluster-scoped
// cache (Namespaces: only the selected ones, others are NotFound); namespaced
// ones from their namespace's cache, or a [NotSelectedError] when that
// namespace is not served, including when it leaves during the read. Before
// Start it returns cache.ErrCacheNotStarted; after Start it first waits
// (bounded by ctx) until the initial set of namespaces is known.
func (c *Cache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return fmt.Errorf("nscache: get %s: %w", key, err)
	}
	target, namespaced, err := c.route(gvk)
	if err != nil {
		return err
	}
	if !namespaced {
		return target.Get(ctx, key, obj, opts...)
	}
	s, err := c.servedFor(ctx, key.Namespace, gvk.GroupKind(), key.Name)
	if err != nil {
		return err
	}
	rctx, done := s.bound(ctx)
	defer done()
	if err := s.cache.Get(rctx, key, obj, opts...); err != nil {
		if s.ctx.Err() != nil && ctx.Err() == nil {
			return &NotSelectedError{Namespace: key.Namespace, Kind: gvk.GroupKind(), Name: key.Name}
		}
		return err
	}
	return nil
}

// List reads objects. With a namespace (client.InNamespace) it reads that
// namespace's cache, or returns a [NotSelectedError] when it is not served;
// without one it returns the union over every served namespace, in namespace
// order (a namespace leaving during the call is skipped). Limit caps the
// total; Continue is not supported, as in every controller-runtime cache.
// Cluster-scoped kinds come from the cluster-scoped cache.
func (c *Cache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	gvk, err := apiutil.GVKForObject(list, c.scheme)
	if err != nil {
		return fmt.Errorf("nscache: list: %w", err)
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	target, namespaced, err := c.route(gvk)
	if err != nil {
		return err
	}
	if !namespaced {
		return target.List(ctx, list, opts...)
	}
	lo := client.ListOptions{}
	lo.ApplyOptions(opts)
	if lo.Continue != "" {
		return fmt.Errorf("nscache: list %s: the continue option is not supported by the cache", gvk.Kind)
	}
	if lo.Namespace != "" {
		s, err := c.servedFor(ctx, lo.Namespace, gvk.GroupKind(), "")
		if err != nil {
			return err
		}
		rctx, done := s.bound(ctx)
		defer done()
		if err := s.cache.List(rctx, list, opts...); err != nil {
			if s.ctx.Err() != nil && ctx.Err() == nil {
				return &NotSelectedError{Namespace: lo.Namespace, Kind: gvk.GroupKind()}
			}
			return err
		}
		return nil
	}

	if err := c.waitSynced(ctx); err != nil {
		return err
	}
	c.mu.RLock()
	names := slices.Sorted(maps.Keys(c.served))
	all := make([]*served, len(names))
	for i, n := range names {
		all[i] = c.served[n]
	}
	c.mu.RUnlock()
	var items []runtime.Object
	for i, s := range all {
		if lo.Limit > 0 && int64(len(items)) >= lo.Limit {
			break
		}
		part, ok := list.DeepCopyObject().(client.ObjectList)
		if !ok {
			return fmt.Errorf("nscache: list %s: %T does not copy to a list", gvk.Kind, list)
		}
		po := lo
		if lo.Limit > 0 {
			po.Limit = lo.Limit - int64(len(items))
		}
		rctx, done := s.bound(ctx)
		err := s.cache.List(rctx, part, &po)
		done()
		if err != nil {
			if s.ctx.Err() != nil && ctx.Err() == nil {
				continue // left while we read
			}
			return fmt.Errorf("nscache: list %s in namespace %s: %w", gvk.Kind, names[i], err)
		}
		got, err := meta.ExtractList(part)
		if err != nil {
			return fmt.Errorf("nscache: list %s in namespace %s: %w", gvk.Kind, names[i], err)
		}
		items = append(items, got...)
	}
	if err := meta.SetList(list, items); err != nil {
		return fmt.Errorf("nscache: list %s: %w", gvk.Kind, err)
	}
	list.SetResourceVersion("")
	list.SetContinue("continue-not-supported")
	return nil
}

// GetInformer returns an informer for obj's kind. For a namespaced kind it
// is one informer over every served namespace, now and later: a handler
// added to it is added to the informer of each namespace that joins, and
// receives that namespace's objects as adds. Unless
// cache.BlockUntilSynced(false) is given, once Start has been called it
// waits (bounded by ctx) until the initial namespaces are known and every
// served namespace's informer has synced. Cluster-scoped kinds get the
// cluster-scoped cache's informer (Namespace: the selected Namespaces).
func (c *Cache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return nil, fmt.Errorf("nscache: informer for %T: %w", obj, err)
	}
	target, namespaced, err := c.route(gvk)
	if err != nil {
		return nil, err
	}
	if !namespaced {
		return target.GetInformer(ctx, obj, opts...)
	}
	tmpl, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return nil, fmt.Errorf("nscache: informer for %s: %T does not copy to an object", gvk, obj)
	}
	get := func(ctx context.Context, nc cache.Cache) (cache.Informer, error) {
		o, _ := tmpl.DeepCopyObject().(client.Object)
		return nc.GetInformer(ctx, o, cache.BlockUntilSynced(false))
	}
	return c.fanoutFor(ctx, keyFor(gvk, obj), get, opts)
}

// GetInformerForKind is GetInformer for a typed object of kind gvk.
func (c *Cache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	target, namespaced, err := c.route(gvk)
	if err != nil {
		return nil, err
	}
	if !namespaced {
		return target.GetInformerForKind(ctx, gvk, opts...)
	}
	get := func(ctx context.Context, nc cache.Cache) (cache.Informer, error) {
		return nc.GetInformerForKind(ctx, gvk, cache.BlockUntilSynced(false))
	}
	return c.fanoutFor(ctx, informerKey{gvk, "typed"}, get, opts)
}

func (c *Cache) fanoutFor(ctx context.Context, key informerKey, get func(context.Context, cache.Cache) (cache.Informer, error), opts []cache.InformerGetOption) (*fanout, error) {
	c.mu.Lock()
	f, ok := c.informers[key]
	if !ok {
		f = newFanout(c, key, get)
		for ns, s := range c.served {
			inf, err := get(ctx, s.cache)
			if err != nil {
				c.mu.Unlock()
				return nil, fmt.Errorf("nscache: informer for %s in namespace %s: %w", key.gvk, ns, err)
			}
			f.perNS[ns] = inf
		}
		c.informers[key] = f
	}
	c.mu.Unlock()

	var o cache.InformerGetOptions
	for _, opt := range opts {
		opt(&o)
	}
	select {
	case <-c.started:
	default:
		return f, nil // as controller-runtime's caches: nothing to wait for before Start
	}
	if o.BlockUntilSynced != nil && !*o.BlockUntilSynced {
		return f, nil
	}
	if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return f.HasSynced(), nil
	}); err != nil {
		return nil, apierrors.NewTimeoutError(fmt.Sprintf("nscache: waiting for the %s informers of the selected namespaces to sync", key.gvk.Kind), 0)
	}
	return f, nil
}

// RemoveInformer removes the informer of obj's kind from every served
// namespace and stops them; namespaces that join later do not get one. The
// informer GetInformer returned reports IsStopped and accepts no handlers.
func (c *Cache) RemoveInformer(ctx context.Context, obj client.Object) error {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return fmt.Errorf("nscache: remove informer for %T: %w", obj, err)
	}
	target, namespaced, err := c.route(gvk)
	if err != nil {
		return err
	}
	if !namespaced {
		return target.RemoveInformer(ctx, obj)
	}
	key := keyFor(gvk, obj)
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.informers[key]; ok {
		f.removed = true
		delete(c.informers, key)
	}
	for ns, s := range c.served {
		if err := s.cache.RemoveInformer(ctx, obj); err != nil {
			return fmt.Errorf("nscache: remove the %s informer of namespace %s: %w", gvk.Kind, ns, err)
		}
	}
	return nil
}

// IndexField adds a field index on obj's kind. For a namespaced kind it is
// added to every served namespace's cache and recorded, so every namespace
// that joins later gets it before its informers start. Adding the same field
// twice for a kind is an error.
func (c *Cache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return fmt.Errorf("nscache: index %T by %q: %w", obj, field, err)
	}
	target, namespaced, err := c.route(gvk)
	if err != nil {
		return err
	}
	if !namespaced {
		return target.IndexField(ctx, obj, field, extract)
	}
	key := keyFor(gvk, obj)
	tmpl, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("nscache: index %s by %q: %T does not copy to an object", gvk.Kind, field, obj)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ix := range c.indexes {
		if ix.key == key && ix.field == field {
			return fmt.Errorf("nscache: index %s by %q: already indexed", gvk.Kind, field)
		}
	}
	for ns, s := range c.served {
		if err := s.cache.IndexField(ctx, obj, field, extract); err != nil {
			return fmt.Errorf("nscache: index %s by %q in namespace %s: %w", gvk.Kind, field, ns, err)
		}
	}
	c.indexes = append(c.indexes, fieldIndex{key: key, obj: tmpl, field: field, extract: extract})
	return nil
}

// WaitForCacheSync waits until Start has been called, the Namespace watch and
// the cluster-scoped cache have synced, and every namespace served at that
// point has synced (a namespace that leaves meanwhile is not waited for). It
// returns false when ctx ends first or a cache cannot sync.
func (c *Cache) WaitForCacheSync(ctx context.Context) bool {
	select {
	case <-c.started:
	case <-ctx.Done():
		return false
	}
	if !c.namespaces.WaitForCacheSync(ctx) || !c.cluster.WaitForCacheSync(ctx) {
		return false
	}
	select {
	case <-c.synced:
	case <-ctx.Done():
		return false
	}
	c.mu.RLock()
	all := slices.Collect(maps.Values(c.served))
	c.mu.RUnlock()
	for _, s := range all {
		sctx, done := s.bound(ctx)
		ok := s.cache.WaitForCacheSync(sctx)
		done()
		if !ok && (ctx.Err() != nil || s.ctx.Err() == nil) {
			return false
		}
	}
	return true
}

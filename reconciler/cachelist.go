package reconciler

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// CacheListWatch returns opts with informers that fill their cache with one
// LIST and then WATCH from the list's resourceVersion, instead of client-go's
// watch-list stream (the WatchListClient feature, on by default in the
// client-go opkit builds with). It chains opts.NewInformer, if set.
//
// What it changes, measured (docs/benchmarks): a manager restarting over
// 1,000 WebApps and their 3,000 children had its caches synced in 0.21 s
// instead of 0.41–0.61 s. A watch-list is a watch whose initial events
// (one per object, each encoded and decoded on its own) end with a bookmark
// the API server sends only once its watch cache has caught up with etcd; a
// LIST is answered from the watch cache in one response. The price: a LIST
// is held whole in the operator's memory while it is decoded (a watch-list
// streams it), and it may be served from a watch cache slightly behind etcd
// (the WATCH that follows delivers what changed since — the informer
// behaviour client-go had before watch-lists). Leave it out for caches of
// hundreds of thousands of objects, where the transient peak matters more
// than restart time.
func CacheListWatch(opts cache.Options) cache.Options {
	next := opts.NewInformer
	if next == nil {
		next = toolscache.NewSharedIndexInformer
	}
	opts.NewInformer = func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		return next(listThenWatch{toolscache.ToListerWatcherWithContext(lw)}, obj, resync, indexers)
	}
	return opts
}

// listThenWatch tells client-go's reflector that its ListerWatcher does not
// support watch-list semantics, so the reflector lists and then watches.
type listThenWatch struct {
	lw toolscache.ListerWatcherWithContext
}

var (
	_ toolscache.ListerWatcher            = listThenWatch{}
	_ toolscache.ListerWatcherWithContext = listThenWatch{}
)

// IsWatchListSemanticsUnSupported is the method client-go's reflector looks
// for (k8s.io/client-go/util/watchlist).
func (l listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (l listThenWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.lw.ListWithContext(context.Background(), opts)
}

func (l listThenWatch) Watch(opts metav1.ListOptions) (apiwatch.Interface, error) {
	return l.lw.WatchWithContext(context.Background(), opts)
}

func (l listThenWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return l.lw.ListWithContext(ctx, opts)
}

func (l listThenWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (apiwatch.Interface, error) {
	return l.lw.WatchWithContext(ctx, opts)
}

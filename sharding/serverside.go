package sharding

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServerSideFeatureGate is the kube-apiserver feature gate (alpha since
// Kubernetes 1.36, off by default) that makes list and watch requests honour
// ListOptions.ShardSelector. Without it the server silently ignores the
// selector and returns everything, which is why [ServerSideSupported] probes
// for the echoed ListMeta.ShardInfo instead of trusting a successful list.
const ServerSideFeatureGate = "ShardedListAndWatch"

// fullRange selects every object; the server echoes it in ShardInfo when it
// evaluated it.
var fullRange = ShardSelector([]HashRange{{First: 0, Last: math.MaxUint64}})

// ServerSideSupported reports whether the API server filters list (and
// watch) requests of list's type by shard selector: it lists at most one item
// with a selector covering the whole hash space and checks that the response
// carries ListMeta.ShardInfo. list is e.g. &corev1.ConfigMapList{} or a
// metav1.PartialObjectMetadataList with its GVK set. An error means the probe
// itself failed (it does not mean "unsupported").
func ServerSideSupported(ctx context.Context, c client.Reader, list client.ObjectList) (bool, error) {
	// kube-apiserver v1.37 drops ShardInfo when it converts a list to
	// PartialObjectMetadataList (k8s.io/apiserver pkg/endpoints/handlers/
	// response.go copies only resourceVersion, continue and
	// remainingItemCount), so a metadata-only probe would always say "no":
	// probe with the full objects instead.
	if pm, ok := list.(*metav1.PartialObjectMetadataList); ok {
		u := &unstructured.UnstructuredList{}
		u.SetGroupVersionKind(pm.GroupVersionKind())
		list = u
	}
	opts := &client.ListOptions{Limit: 1, Raw: &metav1.ListOptions{ShardSelector: fullRange}}
	if err := c.List(ctx, list, opts); err != nil {
		return false, fmt.Errorf("sharding: probe shard selector support: %w", err)
	}
	switch l := list.(type) {
	case *unstructured.UnstructuredList:
		sel, _, _ := unstructured.NestedString(l.Object, "metadata", "shardInfo", "selector")
		return sel != "", nil
	case metav1.ShardedListInterface:
		info := l.GetShardInfo()
		return info != nil && info.Selector != "", nil
	}
	return false, fmt.Errorf("sharding: %T does not expose ListMeta.ShardInfo", list)
}

// NewServerSideShard returns a member of a ring with a fixed member list that
// uses kube-apiserver's shard selector instead of labels: it owns the objects
// whose FNV-1a 64 hash of metadata.uid falls into Ring.Ranges(member) of
// NewRing(members) (with DefaultVirtualNodes unless WithVirtualNodes).
// Nothing is written to objects and no Lease is held; every replica must be
// started with the same members. Use [Shard.NewInformer] as
// cache.Options.NewInformer so the cache lists and watches only those ranges.
//
// Children are not co-located: the server hashes each object's own UID.
func NewServerSideShard(ring, member string, members []string, opts ...ShardOption) (*Shard, error) {
	s, err := newShard(ring, member, opts)
	if err != nil {
		return nil, err
	}
	s.static = true
	s.ranges = NewRing(members, WithVirtualNodes(s.vnodes)).Ranges(member)
	s.serverSide = true
	return s, nil
}

// ShardSelector returns the selector a server-side shard sends ("" for other
// shards, and for a member with no range).
func (s *Shard) ShardSelector() string {
	if !s.serverSide {
		return ""
	}
	return ShardSelector(s.ranges)
}

func (s *Shard) ownsUID(uid string) bool {
	h := UIDHash(uid)
	for _, r := range s.ranges {
		if r.Contains(h) {
			return true
		}
	}
	return false
}

// NewInformer returns a cache.Options.NewInformer function that adds this
// shard's selector to every list and watch of the given object types
// (prototypes, matched by Go type; none: all types). Other types are listed
// and watched in full. For a shard that is not server-side it returns the
// plain client-go constructor.
func (s *Shard) NewInformer(objs ...client.Object) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	types := map[reflect.Type]bool{}
	for _, o := range objs {
		types[reflect.TypeOf(o)] = true
	}
	sel := s.ShardSelector()
	if sel == "" && s.serverSide {
		// No ranges: select a single hash value, the narrowest valid
		// selector; Begin refuses whatever might match it.
		sel = ShardSelector([]HashRange{{First: 0, Last: 0}})
	}
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
		if s.serverSide && (len(types) == 0 || types[reflect.TypeOf(obj)]) {
			lw = &selectingListWatch{inner: toolscache.ToListerWatcherWithContext(lw), selector: sel}
		}
		return toolscache.NewSharedIndexInformer(lw, obj, resync, idx)
	}
}

type selectingListWatch struct {
	inner    toolscache.ListerWatcherWithContext
	selector string
}

func (l *selectingListWatch) List(o metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), o)
}

func (l *selectingListWatch) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), o)
}

func (l *selectingListWatch) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	o.ShardSelector = l.selector
	return l.inner.ListWithContext(ctx, o)
}

func (l *selectingListWatch) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	o.ShardSelector = l.selector
	return l.inner.WatchWithContext(ctx, o)
}

package ensure

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OwnerIndex is the name of the cache index [IndexOwner] registers: each
// object of an indexed kind that carries [LabelOwnerUID] is indexed under
// [OwnerBucket] of that label's value; an object without the label but with a
// controller ownerReference is indexed under the bucket of that owner's UID
// (so children another tool made are found too); other objects are not
// indexed. A bucket holds the children of about 1/256 of the owners; prune
// checks each candidate's labels in full.
//
// A bucket grows with the kind's cached objects (about 78 at 20,000), and
// prune reads one per pruned kind on every Ensure. So, on the store path
// below, the first read of a bucket holding more than 64 objects (a kind
// with about 16,000 indexed objects or more, spread evenly) adds
// [OwnerFineIndex] to the same store, and from then on prune and
// [OwnerBucketObjects] read that one. A smaller cache never pays for it.
//
// Where the index lives depends on the cache [IndexOwner] is given. On a
// cache whose informers expose their client-go store (cache.New over every
// namespace: no DefaultNamespaces, no per-kind Namespaces), it is an index of
// that store (toolscache.Indexer) under this name, one bucket per object, and
// prune reads it there (with [WithInformers] on the same cache). Otherwise (a
// cache restricted to namespaces, a fake client's builder) it is a field index
// (client.FieldIndexer.IndexField) under this name, which a List with
// client.MatchingFields{OwnerIndex: bucket} reads.
const OwnerIndex = "ensure.opkit.dev/owner-uid-bucket"

// ownerBucketLen is how many leading characters of an owner UID name its
// bucket: 256 buckets of hexadecimal UIDs. An index entry per owner would
// cost a set per owner and namespace (about 0.5 KiB per child object, 2 MiB
// per 1,000 three-child owners); buckets cost a slot per child in one of at
// most 256 sets, and a lookup returns about 1/256 of the kind's children.
const ownerBucketLen = 2

// OwnerBucket is the [OwnerIndex] value of children of the owner with uid.
func OwnerBucket(uid string) string { return prefix(uid, ownerBucketLen) }

// OwnerFineIndex is the name of the second owner index, with 4,096 buckets
// (the first three characters of the owner UID, [OwnerFineBucket]), that
// prune adds to an informer's store holding [OwnerIndex] when it reads a
// bucket of more than 64 objects: the same objects, each under its owner's
// fine bucket, so a read returns about a sixteenth as many other owners'
// children to check. client-go's AddIndexers indexes what the store holds
// then, under the store's lock, and the store keeps it current from then on
// as it does OwnerIndex. It costs a slot per object in one of at most 4,096
// sets per kind (about 0.8 MiB per kind at most), which is why it is not
// there from the start: for a cache of 1,000 owners it would be about as
// many sets as owners.
const OwnerFineIndex = "ensure.opkit.dev/owner-uid-fine-bucket"

// ownerFineBucketLen is how many leading characters of an owner UID name
// its [OwnerFineIndex] bucket: 4,096 buckets of hexadecimal UIDs.
const ownerFineBucketLen = 3

// refineAfter is the size of an [OwnerIndex] bucket past which a read adds
// [OwnerFineIndex] to the store.
const refineAfter = 64

// OwnerFineBucket is the [OwnerFineIndex] value of children of the owner
// with uid.
func OwnerFineBucket(uid string) string { return prefix(uid, ownerFineBucketLen) }

func prefix(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// IndexOwner registers [OwnerIndex] for each kind on indexer — the cache the
// Ensurer's client reads, e.g. the manager's cache (manager.GetCache(), which
// is also its GetFieldIndexer()) — and must run before that cache starts.
// With [WithOwnerIndex], prune then looks an owner's children up in the index
// (its bucket) instead of matching a label selector against every cached
// object of the kind, which costs time in proportion to all objects of the
// kind on every Ensure: with thousands of owners that scan dominated
// reconcile CPU.
//
// When indexer is also a cache.Informers and the kind's informer exposes its
// client-go store (GetIndexer, as client-go's shared informers do), the index
// is added to that store (AddIndexers) under [OwnerIndex] with one value per
// object, and prune, given the same cache by [WithInformers], reads the
// bucket from the store: no List, no selector, no copy into a list. A
// controller-runtime field index would hold each object twice (under its
// namespace and under all namespaces) and be read through a List. Otherwise
// the index is a field index (IndexField). Registering a kind twice on the
// same cache (two controllers pruning the same kind) is not an error: the
// index is the same.
func IndexOwner(ctx context.Context, indexer client.FieldIndexer, kinds ...client.Object) error {
	for _, kind := range kinds {
		var err error
		if store, ok, serr := storeOf(ctx, indexer, kind); serr != nil {
			err = serr
		} else if ok {
			err = store.AddIndexers(toolscache.Indexers{OwnerIndex: ownerBucketOf})
		} else {
			err = indexer.IndexField(ctx, kind, OwnerIndex, ownerUIDOf)
		}
		// client-go reports a second registration of one index name as an
		// "indexer conflict"; the extractor is the same, so it is harmless.
		if err != nil && !strings.Contains(err.Error(), "indexer conflict") {
			return fmt.Errorf("ensure: index %T by %s: %w", kind, OwnerIndex, err)
		}
	}
	return nil
}

// storeOf returns the client-go store of kind's informer in c, when c is a
// cache.Informers whose informer for kind exposes it; ok is false otherwise
// (an error only when c is a cache.Informers that failed to give the
// informer).
func storeOf(ctx context.Context, c any, kind client.Object) (_ toolscache.Indexer, ok bool, _ error) {
	infs, ok := c.(cache.Informers)
	if !ok {
		return nil, false, nil
	}
	inf, err := infs.GetInformer(ctx, kind, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, false, err
	}
	s, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return nil, false, nil
	}
	return s.GetIndexer(), true, nil
}

// ownerBucketOf is the store index function of [OwnerIndex]: the bucket is
// a prefix of the label's (or the ownerReference's) UID string, sharing its
// bytes, so indexing allocates only the one-element slice.
func ownerBucketOf(obj any) ([]string, error) { return ownerPrefixOf(obj, ownerBucketLen), nil }

// ownerFineBucketOf is the store index function of [OwnerFineIndex], as
// ownerBucketOf is of [OwnerIndex].
func ownerFineBucketOf(obj any) ([]string, error) { return ownerPrefixOf(obj, ownerFineBucketLen), nil }

func ownerPrefixOf(obj any, n int) []string {
	if o, ok := obj.(client.Object); ok {
		return ownerUIDPrefix(o, n)
	}
	return nil
}

// OwnerBucketObjects returns the objects in owner's bucket of [OwnerIndex]
// (of [OwnerFineIndex] when the store has it; a read of a bucket of more than
// 64 objects adds it, as prune's does) read from the store of kind's
// informer in c, when [IndexOwner] put the index there; ok is false, with no
// error, when it did not (a field index: List with
// client.MatchingFields{OwnerIndex: OwnerBucket(owner)} instead). The
// objects are the cache's own, not copies: read them, and copy what you keep
// or change. Other owners' children that share the bucket are among them:
// check each one's [LabelOwnerUID] or controller ownerReference.
func OwnerBucketObjects(ctx context.Context, c cache.Informers, kind client.Object, owner types.UID) (objs []client.Object, ok bool, err error) {
	store, err := indexedStoreOf(ctx, c, kind)
	if err != nil || store == nil {
		return nil, false, err
	}
	objs, err = store.bucketObjects(owner)
	return objs, err == nil, err
}

// ownerStore is an informer's client-go store holding [OwnerIndex]; fine
// records that it holds [OwnerFineIndex] too.
type ownerStore struct {
	toolscache.Indexer
	fine atomic.Bool
}

// indexedStoreOf returns the client-go store of kind's informer in c when
// it holds [OwnerIndex] (see storeOf), else nil.
func indexedStoreOf(ctx context.Context, c cache.Informers, kind client.Object) (*ownerStore, error) {
	store, ok, err := storeOf(ctx, c, kind)
	if err != nil || !ok {
		return nil, err
	}
	indexers := store.GetIndexers()
	if indexers[OwnerIndex] == nil {
		return nil, nil
	}
	s := &ownerStore{Indexer: store}
	s.fine.Store(indexers[OwnerFineIndex] != nil)
	return s, nil
}

// bucket returns the objects in owner's bucket: of [OwnerFineIndex] once the
// store holds it, else of [OwnerIndex], adding [OwnerFineIndex] when that
// bucket holds more than refineAfter objects.
func (s *ownerStore) bucket(owner types.UID) ([]any, error) {
	if s.fine.Load() {
		return s.ByIndex(OwnerFineIndex, OwnerFineBucket(string(owner)))
	}
	objs, err := s.ByIndex(OwnerIndex, OwnerBucket(string(owner)))
	if err == nil && len(objs) > refineAfter {
		// Another Ensurer on the same store may have added it first:
		// client-go then reports an "indexer conflict", and it is there.
		if aerr := s.AddIndexers(toolscache.Indexers{OwnerFineIndex: ownerFineBucketOf}); aerr == nil || s.GetIndexers()[OwnerFineIndex] != nil {
			s.fine.Store(true)
		}
	}
	return objs, err
}

// bucketObjects returns the objects in owner's bucket (see bucket).
func (s *ownerStore) bucketObjects(owner types.UID) ([]client.Object, error) {
	objs, err := s.bucket(owner)
	if err != nil {
		return nil, err
	}
	items := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		if co, ok := o.(client.Object); ok {
			items = append(items, co)
		}
	}
	return items, nil
}

// ownerStore returns the client-go store holding [OwnerIndex] for the prune
// kind gvk (its prototype proto), or nil when prune must List instead: no
// [WithInformers], an informer without an exposed store, or a store
// [IndexOwner] did not index. The answer is kept per kind.
func (e *Ensurer) ownerStore(ctx context.Context, gvk schema.GroupVersionKind, proto client.Object) (*ownerStore, error) {
	if v, ok := e.ownerStores.Load(gvk); ok {
		s, _ := v.(*ownerStore)
		return s, nil
	}
	if e.informers == nil {
		e.ownerStores.Store(gvk, nil)
		return nil, nil
	}
	s, err := indexedStoreOf(ctx, e.informers, proto)
	if err != nil {
		return nil, err
	}
	e.ownerStores.Store(gvk, s)
	return s, nil
}

func ownerUIDOf(obj client.Object) []string { return ownerUIDPrefix(obj, ownerBucketLen) }

// ownerUIDPrefix is the first n characters of the UID of obj's owner: its
// [LabelOwnerUID], else its controller ownerReference's; nil for neither.
func ownerUIDPrefix(obj client.Object, n int) []string {
	if uid := obj.GetLabels()[LabelOwnerUID]; uid != "" {
		return []string{prefix(uid, n)}
	}
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return []string{prefix(string(ref.UID), n)}
	}
	return nil
}

// WithOwnerIndex makes prune ([WithPrune]) find an owner's children of the
// given kinds through [OwnerIndex] instead of a label selector; with no
// kinds, of every pruned kind. Each such kind must be indexed with
// [IndexOwner] on the cache the Ensurer's client reads, and when IndexOwner
// put the index in the informers' stores (see [OwnerIndex]) the Ensurer must
// have that cache through [WithInformers]; otherwise every Ensure that prunes
// the kind fails with the cache's "index does not exist" error.
// Kinds not named keep the label selector, which an uncached client (a
// direct API client) can serve. The reconciler package's builder registers
// the index and sets this option for the kinds it Owns with an index.
func WithOwnerIndex(kinds ...client.Object) Option {
	return func(e *Ensurer) {
		e.ownerIndex = true
		e.indexProtos = append(e.indexProtos, kinds...)
	}
}

package ensure_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/opkit/opkit/ensure"
)

// listCounting is a client that counts the items each List returned.
type listCounting struct {
	client.Client
	mu    sync.Mutex
	items []int
}

func (c *listCounting) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items = append(c.items, meta.LenList(list))
	return nil
}

// createBucketDecoys creates n ConfigMaps in ns labelled, as this Ensurer
// labels its children, for other owners whose UIDs fall into the bucket of
// owner's.
func createBucketDecoys(ctx context.Context, t *testing.T, ns string, owner types.UID, n int) []client.Object {
	t.Helper()
	return createDecoys(ctx, t, ns, ensure.OwnerBucket(string(owner)), "decoy", n)
}

// createDecoys creates n ConfigMaps in ns named name-0 on, labelled, as
// this Ensurer labels its children, for other owners whose UIDs start with
// uidPrefix.
func createDecoys(ctx context.Context, t *testing.T, ns, uidPrefix, name string, n int) []client.Object {
	t.Helper()
	decoys := make([]client.Object, 0, n)
	for i := range n {
		d := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", name, i), Labels: map[string]string{
			ensure.LabelOwnerUID: uidPrefix + fmt.Sprintf("-%s-%d", name, i),
			ensure.LabelManager:  "webapp-operator",
		}}}
		if err := env.Client.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		decoys = append(decoys, d)
	}
	return decoys
}

// An indexed prune (WithOwnerIndex) reads the owner's own children from
// the cache, not every child of the owner's index bucket: with 30 other
// owners' ConfigMaps in the bucket, the cache hands prune one item. (It
// handed prune all 31, each copied into the list, which made a restart's
// no-op reconciles cost time in proportion to all children of the kind.)
func TestIndexedPruneListsOnlyTheOwnersChildren(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	kinds := []client.Object{&corev1.ConfigMap{}}
	h := newIndexedHarness(t, kinds, ns)
	owner := newOwner(t, ns, "app")
	decoys := createBucketDecoys(ctx, t, ns, owner.UID, 30)
	counting := &listCounting{Client: h.client}
	e, err := ensure.New(counting, "webapp-operator", ensure.WithAPIReader(h.direct), ensure.WithPrune(kinds...), ensure.WithOwnerIndex())
	if err != nil {
		t.Fatal(err)
	}
	_, _, cm := children("nginx:1.27")
	if _, err := e.Ensure(ctx, owner, cm); err != nil {
		t.Fatal(err)
	}
	h.waitCached(t, append(decoys, inNS(ns, cm)...)...)
	counting.items = nil
	cs, err := e.Ensure(ctx, owner, cm)
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, ensure.Unchanged)
	if len(counting.items) != 1 || counting.items[0] != 1 {
		t.Fatalf("prune's List calls returned %v items, want one call returning the owner's one ConfigMap", counting.items)
	}
	for _, d := range decoys {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), &corev1.ConfigMap{}); err != nil {
			t.Fatalf("decoy %s: %v", d.GetName(), err)
		}
	}
}

// listCalls is a client that counts its List calls.
type listCalls struct {
	client.Client
	calls atomic.Int32
}

func (c *listCalls) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.calls.Add(1)
	return c.Client.List(ctx, list, opts...)
}

// On a cache of all namespaces, IndexOwner puts OwnerIndex in the informer's
// own store (one bucket per object, no field index beside it) and prune,
// given the cache by WithInformers, reads the owner's bucket there: no List
// call at all, the dropped child deleted, the other owners of the bucket
// untouched. Without WithInformers, the same Ensurer's prune fails and says
// what is missing.
func TestStoreIndexedPruneReadsTheInformersStore(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	kinds := []client.Object{&corev1.ConfigMap{}}
	h := newIndexedHarness(t, kinds) // every namespace: client-go's informers
	inf, err := h.cache.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	indexers := inf.(interface{ GetIndexer() toolscache.Indexer }).GetIndexer().GetIndexers()
	if indexers[ensure.OwnerIndex] == nil || len(indexers) != 2 {
		names := make([]string, 0, len(indexers))
		for name := range indexers {
			names = append(names, name)
		}
		t.Fatalf("the ConfigMap informer's store has indexes %v, want the namespace index and %s only", names, ensure.OwnerIndex)
	}
	owner := newOwner(t, ns, "app")
	decoys := createBucketDecoys(ctx, t, ns, owner.UID, 30)
	e, counting := storeIndexedEnsurer(t, h, kinds)
	_, svc, cm := children("nginx:1.27")
	extra := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "extra"}, Data: map[string]string{"k": "v"}}
	if _, err := e.Ensure(ctx, owner, cm, extra, svc); err != nil {
		t.Fatal(err)
	}
	h.waitCached(t, append(decoys, inNS(ns, cm, extra)...)...)
	cs, err := e.Ensure(ctx, owner, cm, svc) // extra is no longer declared
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, ensure.Unchanged, ensure.Unchanged, ensure.Deleted)
	if cs[2].Name != "extra" {
		t.Fatalf("pruned %v, want ConfigMap extra", cs[2])
	}
	if n := counting.calls.Load(); n != 0 {
		t.Fatalf("prune made %d List calls, want none (the store's index is read directly)", n)
	}
	for _, d := range decoys {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), &corev1.ConfigMap{}); err != nil {
			t.Fatalf("decoy %s: %v", d.GetName(), err)
		}
	}
	noInformers, err := ensure.New(h.client, "webapp-operator", ensure.WithAPIReader(h.direct), ensure.WithPrune(kinds...), ensure.WithOwnerIndex())
	if err != nil {
		t.Fatal(err)
	}
	_, err = noInformers.Ensure(ctx, owner, cm, svc)
	if err == nil || !strings.Contains(err.Error(), "WithInformers") {
		t.Fatalf("prune of a kind indexed in the store without WithInformers: got %v, want an error naming WithInformers", err)
	}
}

// storeIndexedEnsurer is an Ensurer pruning kinds through the owner index
// in h's informers' stores, on a client that counts List calls.
func storeIndexedEnsurer(t *testing.T, h *harness, kinds []client.Object) (*ensure.Ensurer, *listCalls) {
	t.Helper()
	counting := &listCalls{Client: h.client}
	e, err := ensure.New(counting, "webapp-operator", ensure.WithAPIReader(h.direct), ensure.WithPrune(kinds...),
		ensure.WithOwnerIndex(), ensure.WithInformers(h.cache))
	if err != nil {
		t.Fatal(err)
	}
	return e, counting
}

// Past a bucket of 64 objects, the store path adds OwnerFineIndex to the
// informer's store and reads it from then on: an owner's fine bucket holds
// the other owners whose UIDs share three leading characters, not two, and
// prune through it still deletes what the owner dropped and nothing of
// theirs.
func TestStoreOwnerIndexRefinesPastABucketOf64(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	kinds := []client.Object{&corev1.ConfigMap{}}
	h := newIndexedHarness(t, kinds)
	inf, err := h.cache.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	store := inf.(interface{ GetIndexer() toolscache.Indexer }).GetIndexer()
	owner := newOwner(t, ns, "app")
	uid := string(owner.UID)
	fineMates := createDecoys(ctx, t, ns, ensure.OwnerFineBucket(uid), "fine", 40)
	coarseMates := createDecoys(ctx, t, ns, ensure.OwnerBucket(uid), "coarse", 40) // "-" is no hex digit: another fine bucket
	e, counting := storeIndexedEnsurer(t, h, kinds)
	_, _, cm := children("nginx:1.27")
	prune := func(drop string) {
		t.Helper()
		extra := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: drop}, Data: map[string]string{"k": "v"}}
		if _, err := e.Ensure(ctx, owner, cm, extra); err != nil {
			t.Fatal(err)
		}
		h.waitCached(t, append(append(slices.Clone(fineMates), coarseMates...), inNS(ns, cm, extra)...)...)
		cs, err := e.Ensure(ctx, owner, cm) // extra is no longer declared
		if err != nil {
			t.Fatal(err)
		}
		wantActions(t, cs, ensure.Unchanged, ensure.Deleted)
		if cs[1].Name != drop {
			t.Fatalf("pruned %v, want ConfigMap %s", cs[1], drop)
		}
		for _, d := range append(slices.Clone(fineMates), coarseMates...) {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), &corev1.ConfigMap{}); err != nil {
				t.Fatalf("decoy %s: %v", d.GetName(), err)
			}
		}
		eventually(t, 30*time.Second, "the cache lost "+drop, func() (bool, error) {
			err := h.cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: drop}, &corev1.ConfigMap{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	}
	// The first Ensure's prune read the owner's bucket of 81 and more
	// (the other namespaces' tests may add to it): OwnerFineIndex is added.
	prune("extra")
	if store.GetIndexers()[ensure.OwnerFineIndex] == nil {
		t.Fatalf("after a prune read a bucket of more than 64 objects, the store has no %s", ensure.OwnerFineIndex)
	}
	objs, ok, err := ensure.OwnerBucketObjects(ctx, h.cache, &corev1.ConfigMap{}, owner.UID)
	if err != nil || !ok {
		t.Fatalf("OwnerBucketObjects: ok %v, %v", ok, err)
	}
	got := map[string]bool{}
	for _, o := range objs {
		if o.GetNamespace() == ns {
			got[o.GetName()] = true
		}
	}
	for _, d := range fineMates {
		if !got[d.GetName()] {
			t.Errorf("the fine bucket lacks %s, whose owner UID shares three characters", d.GetName())
		}
	}
	for _, d := range coarseMates {
		if got[d.GetName()] {
			t.Errorf("the fine bucket holds %s, whose owner UID shares only two characters", d.GetName())
		}
	}
	if !got[cm.Name] || len(got) != len(fineMates)+1 {
		t.Errorf("the fine bucket holds %d objects of the namespace, want the %d fine mates and %s", len(got), len(fineMates), cm.Name)
	}
	// The next prune reads the fine bucket.
	prune("extra-2")
	if n := counting.calls.Load(); n != 0 {
		t.Fatalf("prune made %d List calls, want none (the store's indexes are read directly)", n)
	}
}

// scopeCounting is a client that counts IsObjectNamespaced calls.
type scopeCounting struct {
	client.Client
	calls atomic.Int32
}

func (c *scopeCounting) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	c.calls.Add(1)
	return c.Client.IsObjectNamespaced(obj)
}

// An Ensurer asks the REST mapper for a kind's scope once, not once per
// child and Ensure: the mapper's lookup was about a tenth of a no-op
// Ensure's CPU.
func TestKindScopeAskedOncePerKind(t *testing.T) {
	ctx := testCtx(t)
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app", UID: "u-1"}}
	c := &scopeCounting{Client: fake.NewClientBuilder().WithScheme(env.Scheme).WithRESTMapper(env.Client.RESTMapper()).WithObjects(owner).Build()}
	e, err := ensure.New(c, "webapp-operator")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		dep, svc, cm := children("nginx:1.27")
		if _, err := e.Ensure(ctx, owner, dep, svc, cm); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.calls.Load(); got != 3 {
		t.Fatalf("IsObjectNamespaced called %d times for 3 kinds over 3 Ensures, want 3", got)
	}
}

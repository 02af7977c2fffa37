package ensure_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
	decoys := make([]client.Object, 0, n)
	for i := range n {
		d := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("decoy-%d", i), Labels: map[string]string{
			ensure.LabelOwnerUID: ensure.OwnerBucket(string(owner)) + fmt.Sprintf("-decoy-%d", i),
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
	counting := &listCalls{Client: h.client}
	e, err := ensure.New(counting, "webapp-operator", ensure.WithAPIReader(h.direct), ensure.WithPrune(kinds...),
		ensure.WithOwnerIndex(), ensure.WithInformers(h.cache))
	if err != nil {
		t.Fatal(err)
	}
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

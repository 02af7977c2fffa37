package reconciler_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/reconciler"
	"github.com/opkit/opkit/testenv"
)

// A reconcile that reads T from a cache that has not seen this reconciler's
// last status write must still leave the status it computed on the server.
// Here the reader serves T as it was before that write (the stalest a lagging
// informer can be): the status went A → B, the stale copy shows A, and the
// reconcile decides A again. A merge patch computed from the stale copy
// leaves phase out (A → A), so before the fix nothing was sent and the server
// kept B: `phase on the server = "B", want "A"`.
func TestStatusWriteFromAStaleReadLosesNothing(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	cfg, requests := testenv.CountRequests(env.Config)
	real, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		stale *Gadget
		want  string
	)
	c := interceptor.NewClient(real, interceptor.Funcs{Get: serveStale(&mu, &stale)})
	r, err := reconciler.ForClient(c, "gadget-stale", newGadget).
		Status(func(ctx context.Context, g *Gadget, o reconciler.Observed) error {
			mu.Lock()
			g.Status.Phase = want
			mu.Unlock()
			return markReady(ctx, g, o)
		}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	g := createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stale"}, Spec: GadgetSpec{Value: "one"}})
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(g)}
	reconcileWith := func(phase string) {
		t.Helper()
		mu.Lock()
		want = phase
		mu.Unlock()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	serverPhase := func() string {
		t.Helper()
		live := &Gadget{}
		if err := env.Client.Get(ctx, req.NamespacedName, live); err != nil {
			t.Fatal(err)
		}
		return live.Status.Phase
	}

	reconcileWith("A")
	before := &Gadget{}
	if err := env.Client.Get(ctx, req.NamespacedName, before); err != nil || before.Status.Phase != "A" {
		t.Fatalf("first write: phase %q, %v", before.Status.Phase, err)
	}
	reconcileWith("B")
	if p := serverPhase(); p != "B" {
		t.Fatalf("second write: phase %q, want B", p)
	}

	// The cache lags: it still shows the object as it was with phase A.
	mu.Lock()
	stale = before
	mu.Unlock()
	requests.Reset()
	reconcileWith("A")
	if p := serverPhase(); p != "A" {
		t.Fatalf("phase on the server = %q, want %q (the status write from a stale read lost it; requests:\n%s)", p, "A", requests)
	}
	if n := requests.Writes(); n != 1 {
		t.Fatalf("the reconcile from a stale read wrote %d times, want 1:\n%s", n, requests)
	}

	// Still stale, nothing new: a no-op, no request.
	requests.Reset()
	reconcileWith("A")
	if n := requests.Total(); n != 0 {
		t.Fatalf("a no-op reconcile from the same stale read made %d requests:\n%s", n, requests)
	}
	if p := serverPhase(); p != "A" {
		t.Fatalf("phase on the server = %q after a no-op, want A", p)
	}

	// The cache catches up: still a no-op.
	mu.Lock()
	stale = nil
	mu.Unlock()
	requests.Reset()
	reconcileWith("A")
	if n := requests.Writes(); n != 0 {
		t.Fatalf("a no-op reconcile from a fresh read wrote %d times:\n%s", n, requests)
	}
}

// A reconcile that reads T from a cache that has not seen the finalizer this
// reconciler added (nor the status write after it) must not add the
// finalizer again. The overlay of the last status write made the stale copy
// claim that write's resourceVersion while keeping its old finalizer list,
// so the finalizer's JSON patch tested `/metadata/finalizers` null against a
// server that held it: a 422, a re-read, and a wasted round trip for every
// stale read (one such 422 showed in the 20,000-object benchmark). Before
// the fix: `the reconcile from a stale read made 5 requests, want 0` (the
// failed patch, sent again after each re-read, which this reader serves
// stale too, until the finalizer's attempts ran out).
func TestFinalizerFromAStaleReadIsNotAddedAgain(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	cfg, requests := testenv.CountRequests(env.Config)
	real, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	const fin = "test.opkit.dev/stale-add"
	var (
		mu    sync.Mutex
		stale *Gadget
	)
	c := interceptor.NewClient(real, interceptor.Funcs{Get: serveStale(&mu, &stale)})
	r, err := reconciler.ForClient(c, "gadget-stale-finalizer", newGadget).
		Finalizer(fin, finalizer.WithStep("noop", func(context.Context, *Gadget) (finalizer.StepResult, error) {
			return finalizer.Done(), nil
		})).
		Status(markReady).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	req, created, live := finalizedOnce(t, r, ns, "stale-finalizer", fin)

	// The cache lags: it still shows the object as created, without the
	// finalizer and without a status.
	mu.Lock()
	stale = created
	mu.Unlock()
	requests.Reset()
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := requests.Total(); n != 0 {
		t.Fatalf("the reconcile from a stale read made %d requests, want 0:\n%s", n, requests)
	}
	after := &Gadget{}
	if err := env.Client.Get(ctx, req.NamespacedName, after); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range after.Finalizers {
		if f == fin {
			n++
		}
	}
	if n != 1 || after.ResourceVersion != live.ResourceVersion {
		t.Fatalf("after the stale reconcile: finalizers %v (rv %s, was %s)", after.Finalizers, after.ResourceVersion, live.ResourceVersion)
	}
}

// serveStale answers every Get of a Gadget with a copy of *stale while it is
// set (read under mu), and passes the Get on otherwise.
func serveStale(mu *sync.Mutex, stale **Gadget) func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
	return func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		g, ok := obj.(*Gadget)
		mu.Lock()
		defer mu.Unlock()
		if !ok || *stale == nil {
			return c.Get(ctx, key, obj, opts...)
		}
		*g = *(*stale).DeepCopyObject().(*Gadget)
		return nil
	}
}

// finalizedOnce creates the Gadget ns/name and reconciles it once with r
// through a live read; it returns the request, the Gadget as created and as
// that reconcile left it (with the finalizer fin and a status).
func finalizedOnce(t *testing.T, r *reconciler.Reconciler[*Gadget], ns, name, fin string) (reconcile.Request, *Gadget, *Gadget) {
	t.Helper()
	ctx := context.Background()
	g := createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: GadgetSpec{Value: "one"}})
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(g)}
	created := &Gadget{}
	if err := env.Client.Get(ctx, req.NamespacedName, created); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	after := &Gadget{}
	if err := env.Client.Get(ctx, req.NamespacedName, after); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(after.Finalizers, fin) || after.Status.ObservedGeneration == 0 {
		t.Fatalf("first reconcile: finalizers %v, observedGeneration %d", after.Finalizers, after.Status.ObservedGeneration)
	}
	return req, created, after
}

// A child ensure created, deleted by someone soon after, is created again by
// the next reconcile, not served from ensure's record of its create until
// that record expires. The informer cache here has seen both the create and
// the delete before the second reconcile; before the fix the reconcile
// reported the child unchanged and it stayed missing:
// `child not created again: configmaps "gone-data" not found`.
func TestChildDeletedSoonAfterCreateIsCreatedAgain(t *testing.T) {
	ns := env.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	informers, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: env.Scheme, Cache: &client.CacheOptions{Reader: informers}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := reconciler.ForClient(c, "gadget-gone", newGadget).
		WithCache(informers).
		Owns(&corev1.ConfigMap{}).
		Children(func(_ context.Context, g *Gadget) ([]client.Object, error) {
			return []client.Object{&corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.Name + "-data"},
				Data:       map[string]string{"value": g.Spec.Value},
			}}, nil
		}).
		Status(markReady).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = informers.Start(ctx) }()
	defer func() { cancel(); <-done }()
	if !informers.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	g := createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}, Spec: GadgetSpec{Value: "one"}})
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(g)}
	waitFor(t, 10*time.Second, "gadget cached", func() (bool, error) {
		err := informers.Get(ctx, req.NamespacedName, &Gadget{})
		return err == nil, client.IgnoreNotFound(err)
	})
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: ns, Name: "gone-data"}
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, key, cm); err != nil {
		t.Fatalf("child not created: %v", err)
	}
	// Someone deletes the child soon after; the cache sees the create and
	// the delete, and no reconcile ran in between.
	waitFor(t, 10*time.Second, "child cached", func() (bool, error) {
		err := informers.Get(ctx, key, &corev1.ConfigMap{})
		return err == nil, client.IgnoreNotFound(err)
	})
	if err := env.Client.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "child deletion cached", func() (bool, error) {
		err := informers.Get(ctx, key, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, key, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("child not created again: %v", err)
	}
}

// After the finalizer released an object's external resource and removed
// itself, every view of that object the cache may still serve is stale, and
// the reconcile must not act on it: the status step of a webapp-style
// operator registers a route, so a stale live-looking view after the release
// registers it again, for an object about to vanish with nothing left to
// release it (the chaos suite's "route not released" under APF throttling).
//
// The cache here lags as a throttled watch does: the first reconcile adds
// the finalizer; the object is then deleted; the next reconcile, a new
// leader's (which remembers no status write of the first), reads the
// object as it was before the finalizer was added, its add fails the
// finalizer-list test, the re-read past the cache finds the object being
// deleted, and it releases and removes the finalizer there and then; the
// reconcile after that reads the object as the first reconcile left it (the
// finalizer on, no deletionTimestamp). Before the fix that last reconcile ran
// the status step again (twice, for two stale views): `status step ran 2 time(s)
// after the release`.
func TestNoStatusStepFromAStaleViewAfterTheRelease(t *testing.T) {
	staleViewsAfterTheRelease(t, "released", false)
}

// The same lagging cache, when the removal of the finalizer after the
// release is refused (API Priority and Fairness answers 429): the deletion
// is under way, not finished, and the release is remembered as done, so it
// is not run again when the deletion goes on. A stale view without the
// deletionTimestamp must not run the status step then either, or the route
// it registers outlives the object. Before the fix: `status step ran 2
// time(s) after the release`.
func TestNoStatusStepFromAStaleViewWhileTheDeletionIsUnderWay(t *testing.T) {
	staleViewsAfterTheRelease(t, "refused", true)
}

// staleViewsAfterTheRelease runs the scenarios above; refuseRemoval makes
// the API refuse the first removal of the finalizer with a 429.
func staleViewsAfterTheRelease(t *testing.T, name string, refuseRemoval bool) {
	ns := env.Namespace(t)
	ctx := context.Background()
	real, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	const fin = "test.opkit.dev/route"
	var (
		mu      sync.Mutex
		serve   []*Gadget // what the next Gets of the Gadget return, in order; live once empty
		events  []string
		refuse  = refuseRemoval
		refused int
	)
	record := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	// removal reports whether a write removes the finalizer: an update of
	// the Gadget without it, or a JSON patch that removes something.
	refuseNow := func(removal bool) error {
		mu.Lock()
		defer mu.Unlock()
		if !removal || !refuse {
			return nil
		}
		refused++
		return apierrors.NewTooManyRequests("throttled by the test", 1)
	}
	c := interceptor.NewClient(real, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			g, ok := obj.(*Gadget)
			mu.Lock()
			defer mu.Unlock()
			if !ok || len(serve) == 0 {
				return c.Get(ctx, key, obj, opts...)
			}
			*g = *serve[0].DeepCopyObject().(*Gadget)
			serve = serve[1:]
			return nil
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := refuseNow(!slices.Contains(obj.GetFinalizers(), fin)); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			if err := refuseNow(patch.Type() == types.JSONPatchType && strings.Contains(string(data), `"op":"remove"`)); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	build := func() *reconciler.Reconciler[*Gadget] {
		t.Helper()
		r, err := reconciler.ForClient(c, "gadget-"+name, newGadget).
			Finalizer(fin, finalizer.WithStep("release-route", func(context.Context, *Gadget) (finalizer.StepResult, error) {
				record("release")
				return finalizer.Done(), nil
			})).
			Status(func(ctx context.Context, g *Gadget, o reconciler.Observed) error {
				record("status")
				return markReady(ctx, g, o)
			}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// The first reconcile is a replica's that then lost its lease; the rest
	// are the new leader's, which remembers none of its predecessor's status
	// writes (one that does lays that write's status and finalizers over the
	// stale view, and never reaches the re-read this test is about).
	first, r := build(), build()
	req, beforeFinalizer, withFinalizer := finalizedOnce(t, first, ns, name, fin)
	if err := env.Client.Delete(ctx, withFinalizer); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	serve = []*Gadget{beforeFinalizer}
	events = nil
	mu.Unlock()
	res, err := r.Reconcile(ctx, req)
	gerr := env.Client.Get(ctx, req.NamespacedName, &Gadget{})
	mu.Lock()
	if refuseRemoval {
		// A 429 is retried after the delay it names, not returned as an error.
		if refused == 0 || gerr != nil || (err == nil && res.RequeueAfter <= 0) {
			t.Fatalf("the reconcile whose removal was refused: %+v, error %v, refusals %d, get %v; want a retry and the object still there", res, err, refused, gerr)
		}
	} else if err != nil || !apierrors.IsNotFound(gerr) {
		t.Fatalf("the reconcile from the view before the finalizer did not finish the deletion: error %v, get = %v, events %v", err, gerr, events)
	}
	if !slices.Equal(events, []string{"release"}) {
		t.Fatalf("the reconcile from the view before the finalizer: events %v, want [release]", events)
	}
	serve = []*Gadget{withFinalizer, withFinalizer}
	events = nil
	refuse = false
	mu.Unlock()
	var errs []error
	for range 2 {
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			errs = append(errs, err)
		}
		if refuseRemoval && res.RequeueAfter <= 0 {
			t.Errorf("a stale view while the deletion is under way: %+v; want a requeue", res)
		}
	}
	mu.Lock()
	n, got := len(events), slices.Clone(events)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("status step ran %d time(s) after the release (events %v; errors %v): a stale view was reconciled as live", n, got, errs)
	}
	if len(errs) > 0 {
		t.Fatalf("reconciles of a stale view: %v", errs)
	}
	if !refuseRemoval {
		return
	}
	// The current view: the deletion goes on without releasing again.
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, req.NamespacedName, &Gadget{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the deletion did not finish once the cache caught up: get = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 0 {
		t.Fatalf("the reconcile that finished the deletion: events %v, want none (the release is remembered as done)", events)
	}
}

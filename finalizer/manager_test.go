package finalizer_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/testenv"
)

type deleteRun struct {
	objects       int
	addWrites     int // requests that changed state while the manager added finalizers
	deleteWrites  int // ... while it cleaned up after the objects were deleted
	deleteElapsed time.Duration
	reconciles    int64
}

// runManagerDelete creates n ConfigMaps, lets a real manager whose Reconcile
// calls Finalizer.Reconcile add the finalizer, deletes them all and waits
// until they are gone. The manager's requests are counted; the test's own
// (create, deletecollection, polling) are not.
func runManagerDelete(tb testing.TB, n int) deleteRun {
	tb.Helper()
	ns := env.Namespace(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cfg, counter := testenv.CountRequests(env.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	noop := func(context.Context, *corev1.ConfigMap) (finalizer.StepResult, error) { return finalizer.Done(), nil }
	f, err := finalizer.New[*corev1.ConfigMap](mgr.GetClient(), ours,
		finalizer.WithStep("snapshot", noop), finalizer.WithStep("detach", noop), finalizer.WithStep("delete", noop),
		finalizer.WithAPIReader(mgr.GetAPIReader()),
		finalizer.WithEventRecorder(mgr.GetEventRecorder("opkit-finalizer-bench")))
	if err != nil {
		tb.Fatal(err)
	}
	var reconciles atomic.Int64
	err = ctrl.NewControllerManagedBy(mgr).Named("bench").For(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			reconciles.Add(1)
			cm := &corev1.ConfigMap{}
			if err := mgr.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			res, err := f.Reconcile(ctx, cm)
			return res.Result, err
		}))
	if err != nil {
		tb.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	}()

	sel := client.MatchingLabels{"bench": "1"}
	countWithOurs := func() (total, withOurs int) {
		var list corev1.ConfigMapList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns), sel); err != nil {
			tb.Fatal(err)
		}
		for _, cm := range list.Items {
			for _, fin := range cm.Finalizers {
				if fin == ours {
					withOurs++
				}
			}
		}
		return len(list.Items), withOurs
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		tb.Fatal("cache did not sync")
	}
	counter.Reset()
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("obj-%04d", i), Labels: map[string]string{"bench": "1"}}}
		if err := env.Client.Create(ctx, cm); err != nil {
			tb.Fatal(err)
		}
	}
	eventually(tb, 5*time.Minute, "finalizer on every object", func() (bool, error) {
		_, with := countWithOurs()
		return with == n, nil
	})
	// Let reconciles triggered by our own adds drain before switching counts.
	eventually(tb, time.Minute, "reconciles settle", func() (bool, error) {
		before := reconciles.Load()
		time.Sleep(300 * time.Millisecond)
		return reconciles.Load() == before, nil
	})
	run := deleteRun{objects: n, addWrites: counter.Writes()}
	counter.Reset()
	start := time.Now()
	if err := env.Client.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns), sel); err != nil {
		tb.Fatal(err)
	}
	eventually(tb, 5*time.Minute, "every object gone", func() (bool, error) {
		total, _ := countWithOurs()
		return total == 0, nil
	})
	run.deleteElapsed = time.Since(start)
	// A late stale reconcile would still count: wait for quiet.
	eventually(tb, time.Minute, "reconciles settle", func() (bool, error) {
		before := reconciles.Load()
		time.Sleep(300 * time.Millisecond)
		return reconciles.Load() == before, nil
	})
	run.deleteWrites = counter.Writes()
	run.reconciles = reconciles.Load()
	// Ours is every object's only finalizer: each removal is an update that
	// deletes the object.
	if run.deleteWrites != counter.Count("update", "configmaps") {
		tb.Errorf("unexpected write kinds during delete (want updates only):\n%s", counter)
	}
	return run
}

// TestManagerDeleteCostsOneWritePerObject is the CI-sized run of
// BenchmarkDelete1000: 100 objects through a real manager.
func TestManagerDeleteCostsOneWritePerObject(t *testing.T) {
	r := runManagerDelete(t, 100)
	if r.addWrites != r.objects {
		t.Errorf("adding the finalizer: %d writes for %d objects, want exactly one each", r.addWrites, r.objects)
	}
	if r.deleteWrites != r.objects {
		t.Errorf("deleting: %d writes for %d objects, want exactly one each", r.deleteWrites, r.objects)
	}
	t.Logf("%d objects: add %d writes, delete %d writes (%.2f/object) in %s = %.0f objects/s, %d reconciles",
		r.objects, r.addWrites, r.deleteWrites, float64(r.deleteWrites)/float64(r.objects), r.deleteElapsed,
		float64(r.objects)/r.deleteElapsed.Seconds(), r.reconciles)
}

// BenchmarkDelete1000 deletes 1,000 objects (100 with -short) carrying the
// finalizer with three cleanup steps, driven by a controller-runtime manager.
// Metrics: objects/s (deletecollection until the last object is gone) and
// writes/object (requests from the manager that change state).
func BenchmarkDelete1000(b *testing.B) {
	n := 1000
	if testing.Short() {
		n = 100
	}
	var objects, writes int
	var elapsed time.Duration
	for range b.N {
		r := runManagerDelete(b, n)
		objects += r.objects
		writes += r.deleteWrites
		elapsed += r.deleteElapsed
	}
	b.ReportMetric(float64(objects)/elapsed.Seconds(), "objects/s")
	b.ReportMetric(float64(writes)/float64(objects), "writes/object")
	b.ReportMetric(0, "ns/op") // dominated by setup; objects/s is the measure
}

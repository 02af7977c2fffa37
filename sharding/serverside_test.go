package sharding_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/sharding"
	"github.com/opkit/opkit/testenv"
)

// TestServerSideDetectionFallsBack: the package's default control plane runs
// without the ShardedListAndWatch gate; the probe must say so (the server
// ignores the selector there and would hand every replica everything).
func TestServerSideDetectionFallsBack(t *testing.T) {
	ok, err := sharding.ServerSideSupported(testCtx(t, 30*time.Second), env.Client, &corev1.ConfigMapList{})
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Fatal("shard selector reported as supported without the feature gate")
	}
}

// TestServerSideSharding starts a second control plane with
// ShardedListAndWatch=true and three replicas with server-side shards: each
// replica's cache holds exactly the ConfigMaps whose UID hash is in its
// ranges, each reconciles exactly those, and no label is written.
func TestServerSideSharding(t *testing.T) {
	env2 := testenv.Start(t, testenv.WithFeatureGates(sharding.ServerSideFeatureGate+"=true"))
	ctx := testCtx(t, 3*time.Minute)
	metaList := &metav1.PartialObjectMetadataList{}
	metaList.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	ok, err := sharding.ServerSideSupported(ctx, env2.Client, metaList)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatal("shard selector not supported with the feature gate on")
	}
	ns := env2.Namespace(t)
	const n = 90
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%03d", i)}}
		if err := env2.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	members := []string{"a", "b", "c"}
	reconciled := &reconciledNames{}
	var overlap overlapDetector
	caches := map[string]cache.Cache{}
	shards := map[string]*sharding.Shard{}
	for _, m := range members {
		shard, err := sharding.NewServerSideShard("server", m, members)
		if err != nil {
			t.Fatal(err)
		}
		shards[m] = shard
		mgr, err := manager.New(env2.Config, manager.Options{
			Scheme:                 env2.Scheme,
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Cache: cache.Options{
				DefaultNamespaces: map[string]cache.Config{ns: {}},
				NewInformer:       shard.NewInformer(&corev1.ConfigMap{}),
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := shard.SetupWithManager(mgr, &corev1.ConfigMap{}); err != nil {
			t.Fatal(err)
		}
		err = builder.ControllerManagedBy(mgr).Named("server-"+m).
			For(&corev1.ConfigMap{}, builder.WithPredicates(shard.Predicate())).
			WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
			Complete(sharding.Wrap[corev1.ConfigMap](shard, reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
				overlap.enter(req.String())
				defer overlap.exit(req.String())
				reconciled.add(m, req.Name)
				return reconcile.Result{}, nil
			})))
		if err != nil {
			t.Fatal(err)
		}
		caches[m] = mgr.GetCache()
		runManager(ctx, t, mgr)
	}

	all := &corev1.ConfigMapList{}
	if err := env2.Client.List(ctx, all, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	for _, cm := range all.Items {
		if len(cm.Labels) > 0 {
			t.Fatalf("%s has labels %v: server-side sharding must not write labels", cm.Name, cm.Labels)
		}
		owners := 0
		for _, m := range members {
			if shards[m].Owns(&cm) {
				owners++
				want[m] = append(want[m], cm.Name)
			}
		}
		if owners != 1 {
			t.Fatalf("%s is owned by %d members", cm.Name, owners)
		}
	}
	eventually(t, time.Minute, "each replica reconciled exactly its hash ranges", func() (bool, string) {
		for _, m := range members {
			got := reconciled.sorted(m)
			if !slices.Equal(got, want[m]) {
				return false, fmt.Sprintf("%s reconciled %d, want %d", m, len(got), len(want[m]))
			}
		}
		return true, ""
	})
	for _, m := range members {
		list := &corev1.ConfigMapList{}
		if err := caches[m].List(ctx, list); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, cm := range list.Items {
			names = append(names, cm.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, want[m]) {
			t.Errorf("%s caches %d ConfigMaps, want exactly its %d", m, len(names), len(want[m]))
		}
		t.Logf("member %s: caches and reconciles %d of %d ConfigMaps (selector %d bytes)", m, len(names), n, len(shards[m].ShardSelector()))
	}
	if max, key := overlap.Max(); max > 1 {
		t.Errorf("%s reconciled %d times at once", key, max)
	}
}

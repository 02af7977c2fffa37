package sharding_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
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
)

// TestDuplicateMemberIdentity starts a second process with a member name that
// a live process holds: it stays inactive (reconciles nothing) while the
// first keeps renewing, and takes over once the first releases its lease.
func TestDuplicateMemberIdentity(t *testing.T) {
	ns := env.Namespace(t)
	c := newCluster(t, "dup", ns)
	first := c.start("a")
	eventually(t, time.Minute, "first instance active", func() (bool, string) { return first.shard.Active(), "inactive" })
	second := c.start("a")
	if first.shard.InstanceID() == second.shard.InstanceID() {
		t.Fatal("instance IDs must differ")
	}
	key := client.ObjectKey{Namespace: ns, Name: sharding.LeaseName("dup", "a")}
	seen := map[string]bool{}
	// Watch the first instance renew four times; the second must stay out.
	eventually(t, time.Minute, "first instance renews while second waits", func() (bool, string) {
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(testCtx(t, 10*time.Second), key, l); err != nil {
			return false, err.Error()
		}
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != first.shard.InstanceID() {
			t.Fatalf("lease holder changed to %q while the first instance is alive", h)
		}
		if second.shard.Active() {
			t.Fatal("second instance with the same member name became active")
		}
		seen[l.ResourceVersion] = true
		return len(seen) >= 5, fmt.Sprintf("%d renewals seen", len(seen))
	})
	first.stop(t)
	eventually(t, time.Minute, "second instance takes over after release", func() (bool, string) {
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(testCtx(t, 10*time.Second), key, l); err != nil {
			return false, err.Error()
		}
		return second.shard.Active() && ptr.Deref(l.Spec.HolderIdentity, "") == second.shard.InstanceID(),
			"holder " + ptr.Deref(l.Spec.HolderIdentity, "")
	})
}

// TestStaticSharding: each replica caches and reconciles exactly the objects
// labelled for it; unlabelled objects are nobody's.
func TestStaticSharding(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t, 2*time.Minute)
	members := []string{"s0", "s1"}
	reconciled := &reconciledNames{}
	caches := map[string]cache.Cache{}
	for _, m := range members {
		shard, err := sharding.NewStaticShard("static", m)
		if err != nil {
			t.Fatal(err)
		}
		mgr, err := manager.New(env.Config, manager.Options{
			Scheme:                 env.Scheme,
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Cache: cache.Options{
				DefaultNamespaces:    map[string]cache.Config{ns: {}},
				DefaultLabelSelector: shard.LabelSelector(),
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := shard.SetupWithManager(mgr, &corev1.ConfigMap{}); err != nil {
			t.Fatal(err)
		}
		err = builder.ControllerManagedBy(mgr).Named("static-"+m).
			For(&corev1.ConfigMap{}, builder.WithPredicates(shard.Predicate())).
			WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
			Complete(sharding.Wrap[corev1.ConfigMap](shard, reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
				reconciled.add(m, req.Name)
				return reconcile.Result{}, nil
			})))
		if err != nil {
			t.Fatal(err)
		}
		caches[m] = mgr.GetCache()
		runManager(ctx, t, mgr)
	}
	want := map[string][]string{}
	for i := range 15 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%02d", i)}}
		if i < 10 {
			m := members[i%2]
			cm.Labels = map[string]string{sharding.ShardLabel("static"): m}
			want[m] = append(want[m], cm.Name)
		}
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, "each static shard reconciled its objects", func() (bool, string) {
		for _, m := range members {
			got := reconciled.sorted(m)
			if !slices.Equal(got, want[m]) {
				return false, fmt.Sprintf("%s reconciled %v, want %v", m, got, want[m])
			}
		}
		return true, ""
	})
	for _, m := range members {
		list := &corev1.ConfigMapList{}
		if err := caches[m].List(ctx, list); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != len(want[m]) {
			t.Errorf("%s caches %d ConfigMaps, want only its %d", m, len(list.Items), len(want[m]))
		}
	}
}

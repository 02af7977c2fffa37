package reconciler_test

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/reconciler"
	"github.com/opkit/opkit/workflow"
)

// The whole skeleton for a custom resource: a finalizer, one child, status.
// (env is this test package's testenv control plane.)
func ExampleFor() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "example-"}}
	_ = env.Client.Create(ctx, ns)
	mgr, _ := ctrl.NewManager(env.Config, manager.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:      reconciler.CacheOptions(),
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})

	err := reconciler.For(mgr, "gadget", func() *Gadget { return &Gadget{} }).
		Owns(&corev1.ConfigMap{}).
		Finalizer("test.opkit.dev/cleanup", finalizer.WithStep("release", func(context.Context, *Gadget) (finalizer.StepResult, error) {
			return finalizer.Done(), nil // release whatever lives outside Kubernetes
		})).
		Children(func(_ context.Context, g *Gadget) ([]client.Object, error) {
			return []client.Object{&corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.Name + "-data"},
				Data:       map[string]string{"value": g.Spec.Value},
			}}, nil
		}).
		Status(func(_ context.Context, g *Gadget, _ reconciler.Observed) error {
			return conditions.MarkReady(g, "Synced", "the ConfigMap holds the value")
		}).
		Complete()
	if err != nil {
		fmt.Println(err)
		return
	}
	go func() { _ = mgr.Start(ctx) }()

	g := &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "g"}, Spec: GadgetSpec{Value: "42"}}
	_ = env.Client.Create(ctx, g)
	for !conditions.IsTrue(g, conditions.Ready) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(g), g)
	}
	var cm corev1.ConfigMap
	_ = env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "g-data"}, &cm)
	fmt.Println(conditions.Get(g, conditions.Ready).Reason, g.Finalizers, cm.Data["value"])
	// Output: Synced [test.opkit.dev/cleanup] 42
}

// A kubebuilder-style unit test: the reconciler built on a direct client,
// Reconcile called by hand. No manager, no cache; pruning uses label
// selectors.
func ExampleForClient() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "example-"}}
	_ = env.Client.Create(ctx, ns)
	c, _ := client.New(env.Config, client.Options{Scheme: env.Scheme})

	r, err := reconciler.ForClient(c, "gadget", func() *Gadget { return &Gadget{} }).
		Owns(&corev1.ConfigMap{}).
		Children(func(_ context.Context, g *Gadget) ([]client.Object, error) {
			return []client.Object{&corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.Name + "-data"},
				Data:       map[string]string{"value": g.Spec.Value},
			}}, nil
		}).
		Status(func(_ context.Context, g *Gadget, _ reconciler.Observed) error {
			return conditions.MarkReady(g, "Synced", "the ConfigMap holds the value")
		}).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	g := &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "g"}, Spec: GadgetSpec{Value: "7"}}
	_ = c.Create(ctx, g)
	res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(g)})
	_ = c.Get(ctx, client.ObjectKeyFromObject(g), g)
	fmt.Println(res.RequeueAfter, err, conditions.Get(g, conditions.Ready).Reason)
	// Output: 0s <nil> Synced
}

// What real operators need, each in a line or two: history children kept
// (no prune) with a create-only field, a referenced Secret that reconciles
// exactly its referrers (metadata-only watch), controller-runtime options,
// and a healthy object polled every minute without leaving Current.
func ExampleBuilder_References() {
	var mgr manager.Manager // the operator's manager
	err := reconciler.For(mgr, "gadget", func() *Gadget { return &Gadget{} }).
		Owns(&batchv1.Job{}, reconciler.WithoutPrune(), reconciler.WithCreateOnly("spec.selector")).
		References(&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}},
			func(g *Gadget) []types.NamespacedName { return []types.NamespacedName{{Name: g.Spec.SecretRef}} },
			builder.OnlyMetadata).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4, ReconciliationTimeout: time.Minute}).
		Status(func(ctx context.Context, g *Gadget, o reconciler.Observed) error {
			var jobs batchv1.JobList
			if err := o.Children(ctx, &jobs); err != nil { // this Gadget's Jobs, from the cache
				return err
			}
			if err := conditions.MarkReady(g, "Scheduled", fmt.Sprintf("%d runs kept", len(jobs.Items))); err != nil {
				return err
			}
			return outcome.RequeueAfter(time.Minute) // success: Reconciling untouched
		}).
		Complete()
	fmt.Println(err != nil) // no manager here: the builder says so
	// Output: true
}

// Children declared as a workflow: a Secret-like ConfigMap, a migration Job
// that needs it, and the Deployment that needs the migration; an optional
// debug ConfigMap while spec.gate is "debug". With the finalizer, deletion
// removes the Deployment, then the Job, then the ConfigMap.
func ExampleBuilder_Workflow() {
	var mgr manager.Manager // the operator's manager
	_ = reconciler.For(mgr, "gadget", newGadget).
		Owns(&corev1.ConfigMap{}).Owns(&batchv1.Job{}).Owns(&appsv1.Deployment{}).
		Finalizer("example.com/teardown").
		Workflow(func(_ context.Context, g *Gadget) ([]workflow.Node, error) {
			return []workflow.Node{
				{Name: "config", Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: g.Name + "-config"}}},
				{Name: "migrate", Object: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: g.Name + "-migrate"}}, DependsOn: []string{"config"}},
				{Name: "app", Object: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: g.Name}}, DependsOn: []string{"migrate"}},
				{Name: "debug", Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: g.Name + "-debug"}},
					Active: func() bool { return g.Spec.Gate == "debug" }},
			}, nil
		}, nil, workflow.WithNodeConditions("Child-")).
		Status(func(_ context.Context, g *Gadget, _ reconciler.Observed) error {
			return conditions.SetSummary(g, conditions.Ready, conditions.WithPositive(workflow.ConditionChildrenReady))
		}).
		Complete()
}

// A manager whose controllers start the moment its cache has synced: its
// WaitForCacheSync is woken by the informers' sync, not client-go's 100ms
// poll. It composes with any cache.Options.
func ExampleNewCache() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "example-"}}
	_ = env.Client.Create(ctx, ns)
	_ = env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "settings"}})

	mgr, _ := ctrl.NewManager(env.Config, manager.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:    cache.Options{DefaultNamespaces: map[string]cache.Config{ns.Name: {}}},
		NewCache: reconciler.NewCache,
	})
	_, _ = mgr.GetCache().GetInformer(ctx, &corev1.ConfigMap{})
	go func() { _ = mgr.Start(ctx) }()
	fmt.Println(mgr.GetCache().WaitForCacheSync(ctx))
	var cms corev1.ConfigMapList
	_ = mgr.GetClient().List(ctx, &cms, client.InNamespace(ns.Name))
	fmt.Println(len(cms.Items), cms.Items[0].Name)
	// Output:
	// true
	// 1 settings
}

// A manager whose informers fill their caches with a LIST, not a watch-list
// stream: a faster start over many objects (see CacheListWatch for the
// price). It composes with the other cache options.
func ExampleCacheListWatch() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "example-"}}
	_ = env.Client.Create(ctx, ns)
	_ = env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "settings"}})

	opts := reconciler.CacheListWatch(reconciler.CacheOptions())
	opts.DefaultNamespaces = map[string]cache.Config{ns.Name: {}}
	mgr, _ := ctrl.NewManager(env.Config, manager.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: opts,
	})
	go func() { _ = mgr.Start(ctx) }()
	var cms corev1.ConfigMapList
	_, _ = mgr.GetCache().GetInformer(ctx, &corev1.ConfigMap{})
	mgr.GetCache().WaitForCacheSync(ctx)
	_ = mgr.GetClient().List(ctx, &cms, client.InNamespace(ns.Name))
	fmt.Println(len(cms.Items), cms.Items[0].Name)
	// Output: 1 settings
}

package reconciler_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/reconciler"
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

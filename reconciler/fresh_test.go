package reconciler_test

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/reconciler"
)

// A status step reads a child that Sync just changed. An informer cache that
// has not seen the write yet still holds the child from before the change
// (CI saw a WebApp judged rolled out from the previous Deployment). Here the
// reader is frozen on the first copy of the ConfigMap it served — the stalest
// a cache can be — and Observed.Reader must still return the written one,
// while a reconcile that writes nothing reads the cache as it is.
func TestStatusReadsTheChildAsWrittenNotAStaleCache(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	real, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		frozen *corev1.ConfigMap
	)
	stale := interceptor.NewClient(real, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			cm, ok := obj.(*corev1.ConfigMap)
			if !ok {
				return c.Get(ctx, key, obj, opts...)
			}
			mu.Lock()
			defer mu.Unlock()
			if frozen != nil {
				frozen.DeepCopyInto(cm)
				return nil
			}
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			frozen = cm.DeepCopy()
			return nil
		},
	})
	var seen []string
	r, err := reconciler.ForClient(stale, "gadget-fresh", newGadget).
		Owns(&corev1.ConfigMap{}, reconciler.WithoutPrune()).
		Children(func(_ context.Context, g *Gadget) ([]client.Object, error) {
			return []client.Object{&corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.Name + "-data"},
				Data:       map[string]string{"value": g.Spec.Value},
			}}, nil
		}).
		Status(func(ctx context.Context, g *Gadget, o reconciler.Observed) error {
			cm := &corev1.ConfigMap{}
			if err := o.Reader.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: g.Name + "-data"}, cm); err != nil {
				return err
			}
			seen = append(seen, cm.Data["value"])
			return markReady(ctx, g, o)
		}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	g := createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh"}, Spec: GadgetSpec{Value: "one"}})
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(g)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	// The cache now serves "one" forever.
	cm := &corev1.ConfigMap{}
	if err := stale.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fresh-data"}, cm); err != nil || cm.Data["value"] != "one" {
		t.Fatalf("frozen copy: %v %v", cm.Data, err)
	}
	mutateGadget(t, g, func(g *Gadget) { g.Spec.Value = "two" })
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	live := &corev1.ConfigMap{}
	if err := real.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fresh-data"}, live); err != nil || live.Data["value"] != "two" {
		t.Fatalf("the write did not happen: %v %v", live.Data, err)
	}
	if len(seen) != 2 || seen[0] != "one" || seen[1] != "two" {
		t.Fatalf("status read %q, want [one two]: the second read must be the written child, not the stale cache", seen)
	}
}

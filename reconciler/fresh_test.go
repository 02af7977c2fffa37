package reconciler_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// For a kind with metadata.generation the cache's copy is the one to judge
// when it holds the written generation or a later one: the child's
// controller may have reported on the write before the status step reads it
// (the event that triggered this reconcile, so no other follows), and the
// write's own copy, with the old status, would hold the owner back. A copy
// of an older generation is never returned.
func TestStatusReadsALaterCopyOfTheWrittenGeneration(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	real, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		frozen   *appsv1.Deployment
		freeze   = true
		reported bool // the "Deployment controller" reports right after a write
	)
	c := interceptor.NewClient(real, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			d, ok := obj.(*appsv1.Deployment)
			if !ok {
				return c.Get(ctx, key, obj, opts...)
			}
			mu.Lock()
			defer mu.Unlock()
			if frozen != nil && freeze {
				frozen.DeepCopyInto(d)
				return nil
			}
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			frozen = d.DeepCopy()
			return nil
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := c.Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			mu.Lock()
			report := reported
			mu.Unlock()
			// ensure patches a typed declaration's child through a typed
			// object, an unstructured one's through an unstructured object.
			_, isDeployment := obj.(*appsv1.Deployment)
			if u, ok := obj.(*unstructured.Unstructured); ok && u.GetKind() == "Deployment" {
				isDeployment = true
			}
			if isDeployment && report {
				live := &appsv1.Deployment{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
					return err
				}
				live.Status.ObservedGeneration = live.Generation
				return c.Status().Update(ctx, live)
			}
			return nil
		},
	})
	var seen []string
	r, err := reconciler.ForClient(c, "gadget-fresh-gen", newGadget).
		Owns(&appsv1.Deployment{}, reconciler.WithoutPrune()).
		Children(func(_ context.Context, g *Gadget) ([]client.Object, error) {
			labels := map[string]string{"app": g.Name}
			return []client.Object{&appsv1.Deployment{
				TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
				ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.Name},
				Spec: appsv1.DeploymentSpec{
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"value": g.Spec.Value}},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
					},
				},
			}}, nil
		}).
		Status(func(ctx context.Context, g *Gadget, o reconciler.Observed) error {
			d := &appsv1.Deployment{}
			if err := o.Reader.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: g.Name}, d); err != nil {
				return err
			}
			seen = append(seen, fmt.Sprintf("gen %d observed %d", d.Generation, d.Status.ObservedGeneration))
			return markReady(ctx, g, o)
		}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	g := createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gen"}, Spec: GadgetSpec{Value: "one"}})
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(g)}
	if _, err := r.Reconcile(ctx, req); err != nil { // creates generation 1; the cache freezes on it
		t.Fatal(err)
	}
	// A stale cache and a spec change: the write's copy (generation 2, not
	// yet observed), never the frozen generation 1.
	mutateGadget(t, g, func(g *Gadget) { g.Spec.Value = "two" })
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	// An up-to-date cache whose copy the controller reported on after the
	// write: that copy (generation 3, observed), not the write's.
	mu.Lock()
	freeze, reported = false, true
	mu.Unlock()
	mutateGadget(t, g, func(g *Gadget) { g.Spec.Value = "three" })
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	want := []string{"gen 1 observed 0", "gen 2 observed 0", "gen 3 observed 3"}
	if !slices.Equal(seen, want) {
		t.Fatalf("status read %q, want %q", seen, want)
	}
}

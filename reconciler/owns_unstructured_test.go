package reconciler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/reconciler"
)

// TestOwnsUnstructuredOfKnownKind: Owns given an unstructured prototype of a
// kind the scheme knows (a ConfigMap here, as a chart operator declares the
// kinds its charts render) is watched, indexed and pruned like the typed
// kind. Before the fix the owner index went on the unstructured informer
// while prune listed the typed one, and every reconcile failed with
// `Index with name field:ensure.opkit.dev/owner-uid-bucket does not exist`;
// Observed.Children given an UnstructuredList of the kind failed the same
// way (the status step below lists the children so).
// On a cache of every namespace the owner index is in the typed informer's
// store (ensure.IndexOwner), read by prune and Observed.Children without a
// List.
func TestOwnsUnstructuredOfKnownKind(t *testing.T) {
	t.Run("one-namespace", func(t *testing.T) { ownsUnstructuredOfKnownKind(t, nil) })
	t.Run("all-namespaces", func(t *testing.T) {
		ownsUnstructuredOfKnownKind(t, func(o *manager.Options) { o.Cache.DefaultNamespaces = nil })
	})
}

func ownsUnstructuredOfKnownKind(t *testing.T, edit func(*manager.Options)) {
	ns := env.Namespace(t)
	proto := &unstructured.Unstructured{}
	proto.SetAPIVersion("v1")
	proto.SetKind("ConfigMap")
	startManagerWith(t, ns, edit, func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, "gadget", newGadget).
			Owns(proto).
			Children(func(_ context.Context, g *Gadget) ([]client.Object, error) {
				if g.Spec.Value == "none" {
					return nil, nil
				}
				cm := &unstructured.Unstructured{}
				cm.SetAPIVersion("v1")
				cm.SetKind("ConfigMap")
				cm.SetNamespace(g.Namespace)
				cm.SetName(g.Name + "-data")
				if err := unstructured.SetNestedField(cm.Object, g.Spec.Value, "data", "value"); err != nil {
					return nil, err
				}
				return []client.Object{cm}, nil
			}).
			Status(func(ctx context.Context, g *Gadget, o reconciler.Observed) error {
				// Observed.Children with an UnstructuredList of the kind
				// reads the typed informer the owner index is on.
				l := &unstructured.UnstructuredList{}
				l.SetAPIVersion("v1")
				l.SetKind("ConfigMapList")
				if err := o.Children(ctx, l); err != nil {
					return err
				}
				want := 1
				if g.Spec.Value == "none" {
					want = 0
				}
				if len(l.Items) != want {
					return fmt.Errorf("Observed.Children: %d ConfigMaps, want %d", len(l.Items), want)
				}
				return markReady(ctx, g, o)
			}).
			Observability(obs).
			Complete()
	})
	ctx := context.Background()
	g := &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g1"}, Spec: GadgetSpec{Value: "one"}}
	if err := env.Client.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: ns, Name: "g1-data"}
	var said string
	waitFor(t, 30*time.Second, "Ready and the child created", func() (bool, error) {
		if err := get(t, g)(); err != nil {
			return false, err
		}
		if c := conditions.Get(g, conditions.Ready); c != nil && c.Status != metav1.ConditionTrue && c.Message != said {
			said = c.Message
			t.Logf("Ready=%s: %s %s", c.Status, c.Reason, c.Message)
		}
		err := env.Client.Get(ctx, key, cm)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return conditions.IsTrue(g, conditions.Ready) && g.Status.ObservedGeneration == g.Generation, err
	})

	// A watched child's drift reconciles the owner (the watch is on the informer the index is on).
	cm.Data["value"] = "drifted"
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "drift corrected", func() (bool, error) {
		err := env.Client.Get(ctx, key, cm)
		return cm.Data["value"] == "one", err
	})

	// A child no longer declared is pruned (through the owner index).
	g.Spec.Value = "none"
	if err := env.Client.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "child pruned", func() (bool, error) {
		err := env.Client.Get(ctx, key, cm)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	waitFor(t, 30*time.Second, "Ready after prune", func() (bool, error) {
		err := get(t, g)()
		return conditions.IsTrue(g, conditions.Ready) && g.Status.ObservedGeneration == g.Generation, err
	})
}

package reconciler_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/reconciler"
	"github.com/opkit/opkit/workflow"
)

// TestWorkflowBuilder: children declared as a workflow converge in order,
// cost nothing in steady state, follow the activation condition, and are torn
// down in reverse order by the finalizer's last step.
func TestWorkflowBuilder(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	var calls atomic.Int32
	cm := func(g *Gadget, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: g.Name + "-" + name}, Data: map[string]string{"value": g.Spec.Value}}
	}
	requests := startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, "gadget", newGadget).
			Owns(&corev1.ConfigMap{}).
			Finalizer("test.opkit.dev/cleanup").
			Workflow(func(_ context.Context, g *Gadget) ([]workflow.Node, error) {
				calls.Add(1)
				return []workflow.Node{
					{Name: "config", Object: cm(g, "config")},
					{Name: "data", Object: cm(g, "data"), DependsOn: []string{"config"}},
					{Name: "extra", Object: cm(g, "extra"), DependsOn: []string{"data"}, Active: func() bool { return g.Spec.Gate != "off" }},
					{Name: "app", Object: cm(g, "app"), DependsOn: []string{"data", "extra"}},
				}, nil
			}, nil, workflow.WithNodeConditions("Child-")).
			Status(func(_ context.Context, g *Gadget, _ reconciler.Observed) error {
				return conditions.SetSummary(g, conditions.Ready, conditions.WithPositive(workflow.ConditionChildrenReady))
			}).
			Observability(obs).
			Complete()
	})
	var mu sync.Mutex
	var events []string
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			if o, ok := ev.Object.(*corev1.ConfigMap); ok && o.Name != "kube-root-ca.crt" && ev.Type != watch.Modified {
				mu.Lock()
				events = append(events, string(ev.Type)+" "+strings.TrimPrefix(o.Name, "g-"))
				mu.Unlock()
			}
		}
	}()
	seen := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(events, ", ")
	}

	g := &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"}, Spec: GadgetSpec{Value: "one"}}
	if err := env.Client.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "Ready", func() (bool, error) {
		err := get(t, g)()
		return conditions.IsTrue(g, conditions.Ready) && conditions.IsTrue(g, "Child-app"), err
	})
	waitFor(t, 10*time.Second, "four creations watched", func() (bool, error) { return strings.Count(seen(), "ADDED") == 4, nil })
	if got, want := seen(), "ADDED config, ADDED data, ADDED extra, ADDED app"; got != want {
		t.Fatalf("creation order %q, want %q", got, want)
	}

	// Steady state: a reconcile that sends nothing.
	time.Sleep(time.Second)
	requests.Reset()
	before := calls.Load()
	g.Annotations = map[string]string{"touch": "1"}
	if err := env.Client.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a reconcile after the annotation change", func() (bool, error) { return calls.Load() > before, nil })
	time.Sleep(500 * time.Millisecond)
	if n := requests.Total(); n != 0 {
		t.Fatalf("a steady-state reconcile made %d requests:\n%s", n, requests)
	}

	// Deactivate "extra": deleted; app stays (an inactive dependency that is gone satisfies it).
	g.Spec.Gate = "off"
	if err := env.Client.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "extra deleted, still Ready", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "g-extra"}, &corev1.ConfigMap{})
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		err = get(t, g)()
		c := conditions.Get(g, "Child-extra")
		return conditions.IsTrue(g, conditions.Ready) && c != nil && c.Reason == workflow.ReasonInactive && g.Status.ObservedGeneration == g.Generation, err
	})

	// Delete: the finalizer's teardown step removes app, then data, then config.
	mu.Lock()
	events = nil
	mu.Unlock()
	if err := env.Client.Delete(ctx, g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "gadget gone", func() (bool, error) {
		err := get(t, g)()
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	waitFor(t, 10*time.Second, "three deletions watched", func() (bool, error) { return strings.Count(seen(), "DELETED") == 3, nil })
	if got, want := seen(), "DELETED app, DELETED data, DELETED config"; got != want {
		t.Fatalf("teardown order %q, want %q", got, want)
	}
}

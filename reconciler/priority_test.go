package reconciler_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/reconciler"
)

// TestStartedWorkGoesBeforeNewObjects: with one worker busy, 20 new
// Gadgets queue up; then a child of an already reconciled Gadget changes.
// The Gadget whose work had started is reconciled next, before any of the
// 20 created before its child's event (without ChildEventPriority the queue
// is first in, first out and it would come last).
func TestStartedWorkGoesBeforeNewObjects(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	var (
		mu      sync.Mutex
		order   []string
		blocked = make(chan struct{})
		release = make(chan struct{})
		reader  client.Reader
	)
	startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		reader = mgr.GetCache()
		return reconciler.For(mgr, "gadget-priority", newGadget).
			WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
			Owns(&corev1.ConfigMap{}).
			Children(desiredConfigMap(new(atomic.Int32))).
			Status(func(_ context.Context, g *Gadget, _ reconciler.Observed) error {
				mu.Lock()
				order = append(order, g.Name)
				n := len(slices.DeleteFunc(slices.Clone(order), func(s string) bool { return s != g.Name }))
				mu.Unlock()
				if g.Name == "blocker" && n == 1 {
					close(blocked)
					<-release
				}
				return markReady(ctx, g, reconciler.Observed{})
			}).
			Observability(obs).
			Complete()
	})
	create := func(name string) {
		t.Helper()
		if err := env.Client.Create(ctx, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: GadgetSpec{Value: name}}); err != nil {
			t.Fatal(err)
		}
	}
	create("first")
	waitFor(t, 30*time.Second, "first reconciled", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(order, "first"), nil
	})
	create("blocker")
	select {
	case <-blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the blocker was not reconciled")
	}
	for i := range 20 {
		create(fmt.Sprintf("new-%02d", i))
	}
	waitFor(t, 30*time.Second, "the manager's cache holds the 22 Gadgets", func() (bool, error) {
		l := &GadgetList{}
		err := reader.List(ctx, l, client.InNamespace(ns))
		return err == nil && len(l.Items) == 22, err
	})
	time.Sleep(300 * time.Millisecond) // the create events reach the queue
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "first-data"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["value"] = "drifted"
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the manager's cache sees the drift", func() (bool, error) {
		got := &corev1.ConfigMap{}
		err := reader.Get(ctx, client.ObjectKeyFromObject(cm), got)
		return err == nil && got.Data["value"] == "drifted", err
	})
	time.Sleep(300 * time.Millisecond) // the update event reaches the queue
	mu.Lock()
	start := len(order)
	mu.Unlock()
	close(release)
	waitFor(t, 60*time.Second, "every Gadget reconciled after the release", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		after := order[start:]
		return slices.Contains(after, "first") && slices.Contains(after, "new-19"), nil
	})
	mu.Lock()
	after := slices.Clone(order[start:])
	mu.Unlock()
	firstAt := slices.Index(after, "first")
	newAt := slices.IndexFunc(after, func(s string) bool { return strings.HasPrefix(s, "new-") })
	if firstAt > newAt {
		t.Fatalf("after the release the reconciles ran in the order %v: the Gadget whose child changed came after %d new ones", after, firstAt-newAt)
	}
	t.Logf("order after the release: %v", after)
}

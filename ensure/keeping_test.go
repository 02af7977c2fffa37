package ensure_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/ensure"
)

// TestEnsureKeeping: children named by keep survive the prune of a partial
// Ensure untouched; a later full Ensure without them prunes them.
func TestEnsureKeeping(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	h := newHarness(t, ns)
	owner := newOwner(t, ns, "app")
	e := h.ensurer(t, ensure.MergePatch, ensure.WithPrune(&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}))
	dep, svc, cm := children("nginx:1.27")
	if _, err := e.Ensure(ctx, owner, dep, svc, cm); err != nil {
		t.Fatal(err)
	}
	h.waitCached(t, inNS(ns, dep, svc, cm)...)

	// Only the ConfigMap is written; the Deployment and Service are kept by
	// identity alone (a bare object with no spec: never written).
	keepDep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: dep.Name}}
	keepSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: ns}}
	cm2 := cm.DeepCopy()
	cm2.Data["mode"] = "dev"
	h.counter.Reset()
	cs, err := e.EnsureKeeping(ctx, owner, []client.Object{keepDep, keepSvc}, cm2)
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, ensure.Updated)
	if w := h.counter.Writes(); w != 1 {
		t.Fatalf("partial ensure wrote %d times, want 1 (the ConfigMap):\n%s", w, h.counter)
	}
	for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, o); err != nil {
			t.Fatalf("kept %T: %v", o, err)
		}
	}

	// Keep only the Service: the Deployment is pruned.
	cs, err = e.EnsureKeeping(ctx, owner, []client.Object{keepSvc}, cm2)
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, ensure.Unchanged, ensure.Deleted)
	if cs[1].GVK.Kind != "Deployment" {
		t.Fatalf("pruned %v, want the Deployment", cs[1])
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Deployment not pruned: %v", err)
	}

	// A keep object that cannot be a child is refused like a desired one.
	if _, err := e.EnsureKeeping(ctx, owner, []client.Object{&corev1.Service{}}, cm2); err == nil {
		t.Fatal("keep object without a name accepted")
	}
}

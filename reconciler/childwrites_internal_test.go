package reconciler

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var configMapKind = schema.GroupKind{Kind: "ConfigMap"}

func configMapAt(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

// passes reports whether decide passes obj's event on; for events whose
// write is not in flight, where decide answers before it returns.
func passes(w *childWrites, obj *corev1.ConfigMap) bool {
	var passed bool
	w.decide(configMapKind, obj, func() { passed = true })
	return passed
}

// TestChildWritesDropOnlyTheOwnVersion: the event of the recorded write is
// dropped once; another version, another object, a failed write, a kind not
// recorded and a write outside the Children step are passed on.
func TestChildWritesDropOnlyTheOwnVersion(t *testing.T) {
	w := newChildWrites([]schema.GroupKind{configMapKind})
	ctx := recording(context.Background())
	k := childKey{gk: configMapKind, namespace: "ns", name: "a"}
	w.end(k, w.begin(ctx, k), "10", nil)

	if !passes(w, configMapAt("a", "9")) {
		t.Error("an older version was taken for the own write")
	}
	if !passes(w, configMapAt("b", "10")) {
		t.Error("another object was taken for the own write")
	}
	if passes(w, configMapAt("a", "10")) {
		t.Fatal("the own write's event was passed on")
	}
	if !passes(w, configMapAt("a", "10")) {
		t.Error("the own write was taken twice")
	}

	w.end(k, w.begin(ctx, k), "11", errors.New("conflict"))
	if !passes(w, configMapAt("a", "11")) {
		t.Error("a failed write's version was taken for an own write")
	}
	if e := w.begin(context.Background(), k); e != nil {
		t.Error("a write outside the Children step was recorded")
	}
	other := childKey{gk: schema.GroupKind{Group: "apps", Kind: "Deployment"}, namespace: "ns", name: "a"}
	if e := w.begin(ctx, other); e != nil {
		t.Error("a kind not declared WithoutOwnWriteEvents was recorded")
	}
}

// TestChildWritesEventBeforeResponse: an event that arrives while its write
// is in flight does not hold up its caller (the informer's dispatch of the
// next events); it is dropped once the write returns with its version, and
// passed on after childWriteWait when the write never returns.
func TestChildWritesEventBeforeResponse(t *testing.T) {
	w := newChildWrites([]schema.GroupKind{configMapKind})
	ctx := recording(context.Background())
	k := childKey{gk: configMapKind, namespace: "ns", name: "a"}
	e := w.begin(ctx, k)
	passed := make(chan struct{})
	start := time.Now()
	w.decide(configMapKind, configMapAt("a", "7"), func() { close(passed) })
	if d := time.Since(start); d > childWriteWait/2 {
		t.Fatalf("decide waited %v for the write in flight", d)
	}
	if !passes(w, configMapAt("b", "3")) {
		t.Fatal("another child's event was not passed on while a write was in flight")
	}
	w.end(k, e, "7", nil)
	// The waiting decision forgets the write when it takes the event as its own.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if got, _ := w.lookup(configMapKind, configMapAt("a", "7")); got == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the early event's decision never took the write")
		}
	}
	select {
	case <-passed:
		t.Fatal("the own write's early event was passed on")
	default:
	}

	w.begin(ctx, k) // never answered
	late := make(chan time.Time, 1)
	start = time.Now()
	w.decide(configMapKind, configMapAt("a", "8"), func() { late <- time.Now() })
	select {
	case at := <-late:
		if d := at.Sub(start); d < childWriteWait {
			t.Fatalf("gave up after %v, want %v", d, childWriteWait)
		}
	case <-time.After(10 * childWriteWait):
		t.Fatal("the event of a write that never returned was never passed on")
	}
}

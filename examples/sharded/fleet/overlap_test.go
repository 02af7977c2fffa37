package fleet

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestOverlapDetectorSeesTwoReplicas shows the detector can fail: two
// replicas inside a reconcile of the same WebApp at once count 2, one
// replica's back-to-back reconciles count 1, and a reconcile whose end it
// cannot see is an error.
func TestOverlapDetectorSeesTwoReplicas(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "app"}
	d := NewOverlapDetector(0)
	reconcileCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), time.Minute)
	}
	a1, endA1 := reconcileCtx()
	a2, endA2 := reconcileCtx()
	d.enter(a1, "replica-a", key, "1")
	d.enter(a2, "replica-a", key, "2") // the same replica: the previous reconcile's end not yet seen
	if n, _ := d.Max(); n != 1 {
		t.Fatalf("one replica counted as %d", n)
	}
	b, endB := reconcileCtx()
	d.enter(b, "replica-b", key, "3")
	if n, worst := d.Max(); n != 2 || worst != "ns/app by replica-a+replica-b" {
		t.Fatalf("two replicas at once: max %d (%s), want 2", n, worst)
	}
	endA1()
	endA2()
	endB()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d.mu.Lock()
		left := len(d.inside)
		d.mu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ended reconciles still counted as inside")
		}
		time.Sleep(10 * time.Millisecond)
	}
	d.enter(context.Background(), "replica-a", key, "4")
	if err := d.Err(); err == nil {
		t.Fatal("a reconcile without a deadline was counted")
	}
	if d.Reconciles() != 3 {
		t.Fatalf("reconciles %d, want 3", d.Reconciles())
	}
}

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

// TestChildWritesDropOnlyTheOwnVersion: the event of the recorded write is
// dropped once; another version, another object, a failed write, a kind not
// recorded and a write outside the Children step are passed on.
func TestChildWritesDropOnlyTheOwnVersion(t *testing.T) {
	w := newChildWrites([]schema.GroupKind{configMapKind})
	ctx := recording(context.Background())
	k := childKey{gk: configMapKind, namespace: "ns", name: "a"}
	w.end(k, w.begin(ctx, k), "10", nil)

	if w.own(configMapKind, configMapAt("a", "9")) {
		t.Error("an older version was taken for the own write")
	}
	if w.own(configMapKind, configMapAt("b", "10")) {
		t.Error("another object was taken for the own write")
	}
	if !w.own(configMapKind, configMapAt("a", "10")) {
		t.Fatal("the own write's event was passed on")
	}
	if w.own(configMapKind, configMapAt("a", "10")) {
		t.Error("the own write was taken twice")
	}

	w.end(k, w.begin(ctx, k), "11", errors.New("conflict"))
	if w.own(configMapKind, configMapAt("a", "11")) {
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
// is in flight waits for the write's response, then is dropped when it is
// that write's; after childWriteWait it is passed on.
func TestChildWritesEventBeforeResponse(t *testing.T) {
	w := newChildWrites([]schema.GroupKind{configMapKind})
	ctx := recording(context.Background())
	k := childKey{gk: configMapKind, namespace: "ns", name: "a"}
	e := w.begin(ctx, k)
	got := make(chan bool)
	go func() { got <- w.own(configMapKind, configMapAt("a", "7")) }()
	time.Sleep(20 * time.Millisecond)
	w.end(k, e, "7", nil)
	if !<-got {
		t.Fatal("the own write's early event was passed on")
	}

	w.begin(ctx, k) // never answered
	start := time.Now()
	if w.own(configMapKind, configMapAt("a", "8")) {
		t.Fatal("an event was dropped for a write that never returned")
	}
	if d := time.Since(start); d < childWriteWait {
		t.Fatalf("gave up after %v, want %v", d, childWriteWait)
	}
}

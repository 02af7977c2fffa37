package observability_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/testenv"
)

// countingRecorder counts the calls that reach the real recorder.
type countingRecorder struct {
	next  events.EventRecorder
	calls atomic.Int64
}

func (c *countingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	c.calls.Add(1)
	c.next.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

const reasonBackendUnavailable = "BackendUnavailable"

func TestEventsAreDeduplicatedUnderAFailingLoop(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	cfg, counter := testenv.CountRequests(env.Config)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	bctx, cancel := context.WithCancel(context.Background())
	if err := b.StartRecordingToSinkWithContext(bctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); b.Shutdown() })
	inner := &countingRecorder{next: b.NewRecorder(env.Scheme, "dedup-test")}
	rec := observability.NewRecorder(inner)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flaky"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	// A retry loop: 50 identical failures.
	recorded := 0
	for range 50 {
		if warned(rec, cm, reasonBackendUnavailable, "backend %s unavailable", "db-0") {
			recorded++
		}
	}
	if recorded != 1 || inner.calls.Load() != 1 {
		t.Fatalf("50 identical failures: %d recorded, %d reached the recorder; want 1 and 1", recorded, inner.calls.Load())
	}
	if r, s := rec.Stats(); r != 1 || s != 49 {
		t.Fatalf("Stats() = %d recorded, %d suppressed; want 1, 49", r, s)
	}
	var ev eventsv1.Event
	eventually(t, 30*time.Second, "the Event on the object", func() (bool, error) {
		var list eventsv1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.UID == cm.UID && e.Reason == string(reasonBackendUnavailable) {
				ev = e
				return true, nil
			}
		}
		return false, fmt.Errorf("%d events", len(list.Items))
	})
	if ev.Type != corev1.EventTypeWarning || ev.Note != "backend db-0 unavailable" || ev.Action != "Reconcile" || ev.Series != nil {
		t.Errorf("event = type %s note %q action %q series %v; want one Warning without a series", ev.Type, ev.Note, ev.Action, ev.Series)
	}
	// Without deduplication client-go would also have patched an EventSeries
	// onto it (count 2): exactly one write reached the API server.
	if w := counter.Writes(); w != 1 || counter.Count("create", "events.events.k8s.io") != 1 {
		t.Errorf("API writes for 50 failures:\n%s\nwant exactly one create of events.events.k8s.io", counter)
	}

	// kubectl shows it.
	out, err := env.Kubectl(ctx, "events", "-n", ns, "--for", "configmap/flaky")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, string(reasonBackendUnavailable)) || !strings.Contains(out, "backend db-0 unavailable") {
		t.Errorf("kubectl events lacks the event:\n%s", out)
	}
}

// warned records a Warning through rec and reports whether it reached the
// underlying recorder (was not deduplicated).
func warned(rec *observability.Recorder, obj runtime.Object, reason, msg string, args ...any) bool {
	before, _ := rec.Stats()
	rec.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Reconcile", msg, args...)
	after, _ := rec.Stats()
	return after > before
}

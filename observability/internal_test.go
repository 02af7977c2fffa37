package observability

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type noteRecorder struct{ notes []string }

func (n *noteRecorder) Eventf(_, _ runtime.Object, _, reason, _, note string, args ...any) {
	n.notes = append(n.notes, reason+": "+fmt.Sprintf(note, args...))
}

// warn and normal record through Eventf and report whether the event
// reached the underlying recorder.
func warn(r *Recorder, obj runtime.Object, reason, msg string, args ...any) bool {
	before, _ := r.Stats()
	r.Eventf(obj, nil, "Warning", reason, "Reconcile", msg, args...)
	after, _ := r.Stats()
	return after > before
}

func normal(r *Recorder, obj runtime.Object, reason, msg string, args ...any) bool {
	before, _ := r.Stats()
	r.Eventf(obj, nil, "Normal", reason, "Reconcile", msg, args...)
	after, _ := r.Stats()
	return after > before
}

func TestRecorderDedupRules(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	inner := &noteRecorder{}
	r := NewRecorder(inner, WithClock(clk), WithDedupInterval(time.Minute), WithDedupBurst(3))
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: "u1", Name: "a", Namespace: "ns"}}
	other := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: "u2", Name: "b", Namespace: "ns"}}

	for range 10 {
		warn(r, obj, "Failed", "same")
	}
	if len(inner.notes) != 1 {
		t.Fatalf("identical: %d recorded, want 1", len(inner.notes))
	}
	warn(r, other, "Failed", "same") // other object: own budget
	warn(r, obj, "Other", "same")    // other reason: own budget
	if len(inner.notes) != 3 {
		t.Fatalf("other object/reason: %d recorded, want 3", len(inner.notes))
	}
	// Distinct messages: burst 3 per interval in total (1 already used).
	for i := range 5 {
		warn(r, obj, "Failed", "attempt %d", i)
	}
	if len(inner.notes) != 5 {
		t.Fatalf("distinct messages: %d recorded, want 5 (burst 3)", len(inner.notes))
	}
	clk.SetTime(clk.Now().Add(time.Minute))
	if !warn(r, obj, "Failed", "same") {
		t.Fatal("identical message not recorded again after the interval")
	}
	if warn(r, obj, "Failed", "same") {
		t.Fatal("identical message recorded twice in the new interval")
	}
	if rec, sup := r.Stats(); rec != 6 || sup != 13 { // 9 identical + 3 over burst + 1 identical
		t.Fatalf("Stats = %d, %d; want 6, 13", rec, sup)
	}
}

func TestRecorderFormatsOnceAndTruncatesLongMessages(t *testing.T) {
	inner := &noteRecorder{}
	r := NewRecorder(inner)
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
	normal(r, obj, "Scaled", "%s", "100%s done") // a '%' in an argument must reach the API verbatim
	normal(r, obj, "Long", "%s", strings.Repeat("é", 1000))
	if inner.notes[0] != "Scaled: 100%s done" {
		t.Errorf("an argument was re-formatted: %q", inner.notes[0])
	}
	long := strings.TrimPrefix(inner.notes[1], "Long: ")
	if len(long) > maxNoteBytes || !strings.HasSuffix(long, "...") || !strings.HasPrefix(long, "é") {
		t.Errorf("long note: %d bytes, suffix %q", len(long), long[len(long)-5:])
	}
}

func TestRecorderCacheIsBounded(t *testing.T) {
	r := NewRecorder(&noteRecorder{}, WithDedupCacheSize(10))
	for i := range 1000 {
		warn(r, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: types.UID(fmt.Sprint(i))}}, "Failed", "x")
	}
	if n := r.cache.len(); n != 10 {
		t.Fatalf("cache holds %d entries for 1000 objects, want 10", n)
	}
}

func TestTriggersAreBoundedAndCoalesce(t *testing.T) {
	tr := newTriggers(nil, 100)
	obj := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}}
	for i := range 1000 {
		tr.record("c", reconcile.Request{NamespacedName: types.NamespacedName{Name: fmt.Sprint(i)}}, TriggerCreate, obj)
	}
	if n := tr.cache.len(); n != 100 {
		t.Fatalf("%d pending triggers, want 100", n)
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: "x"}}
	tr.record("c", req, TriggerCreate, obj)
	tr.record("c", req, TriggerUpdate, obj)
	got := tr.take("c", req)
	if got.Event != TriggerCreate || got.Kind != "Secret" || got.Name != "s" || got.Coalesced != 1 {
		t.Fatalf("take = %+v, want the first event (create of Secret s) with 1 coalesced", got)
	}
	if got := tr.take("c", req); got.Event != TriggerUnknown {
		t.Fatalf("second take = %+v, want unknown", got)
	}
	tr.markRequeue("c", req)
	if got := tr.take("c", req); got.Event != TriggerRequeue {
		t.Fatalf("after markRequeue: %+v, want requeue", got)
	}
	if got := tr.take("c", reconcile.Request{NamespacedName: types.NamespacedName{Name: "0"}}); got.Event != TriggerUnknown {
		t.Fatalf("evicted trigger: %+v, want unknown", got)
	}
}

func TestDefaultClassifier(t *testing.T) {
	for err, want := range map[error]string{
		nil:                                      "success",
		reconcile.TerminalError(errors.New("x")): "terminal",
		fmt.Errorf("wrapped: %w", apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("x"))): "conflict",
		errors.New("boom"): "transient",
	} {
		if got := DefaultClassifier(err); got != want {
			t.Errorf("DefaultClassifier(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestNewMetricsRejectsBadInputAtStartup(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []MetricsOption
	}{
		{"unsorted buckets", []MetricsOption{WithReconcileBuckets(1, 0.5)}},
		{"no buckets", []MetricsOption{WithReconcileBuckets()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			if _, err := NewMetrics(reg, tc.opts...); err == nil {
				t.Fatal("NewMetrics accepted bad input")
			}
			if mfs, err := reg.Gather(); err != nil || len(mfs) != 0 {
				t.Fatalf("registry after a failed NewMetrics: %d families, %v", len(mfs), err)
			}
		})
	}
	if _, err := NewMetrics(nil); err == nil {
		t.Fatal("NewMetrics(nil) accepted")
	}
}

// TestNewMetricsTwiceOnOneRegistryShares: several managers (or a test suite)
// in one process set observability up on one registry; the second set shares
// the first's collectors instead of failing.
func TestNewMetricsTwiceOnOneRegistryShares(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	first.ObserveReconcile("c", "success", time.Second)
	second, err := NewMetrics(reg)
	if err != nil {
		t.Fatalf("second NewMetrics on one registry: %v", err)
	}
	second.ObserveReconcile("c", "success", time.Second)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "opkit_reconcile_total" && mf.GetMetric()[0].GetCounter().GetValue() != 2 {
			t.Fatalf("reconcile_total = %v, want 2", mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// A clash with someone else's metric of the same name is reported.
	other := prometheus.NewRegistry()
	other.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "opkit_reconcile_total", Help: "x"}))
	if _, err := NewMetrics(other); err == nil {
		t.Fatal("clash with an existing metric name accepted")
	}
}

func TestNilMetricsIsANoOp(t *testing.T) {
	var m *Metrics
	k := types.NamespacedName{Name: "x"}
	m.ObserveReconcile("c", "success", 0)
	m.SetConditions("c", k, []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}})
	m.ForgetObject("c", k)
	m.InitController("c", DefaultClasses...)
}

func TestConditionGaugeNormalisesStatus(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	// Unknown or odd statuses count as Unknown; same conditions again change nothing.
	k := types.NamespacedName{Name: "k"}
	for range 2 {
		m.SetConditions("c", k, []metav1.Condition{{Type: "Ready", Status: "Maybe"}})
	}
	if g := gaugeValue(t, m.conditionObjects.WithLabelValues("c", "Ready", "Unknown")); g != 1 {
		t.Errorf("Ready/Unknown = %v, want 1", g)
	}
}

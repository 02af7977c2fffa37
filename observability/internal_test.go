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

func TestRecorderDedupRules(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	inner := &noteRecorder{}
	r := NewRecorder(inner, RecorderClock(clk), DedupInterval(time.Minute), DedupBurst(3))
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: "u1", Name: "a", Namespace: "ns"}}
	other := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: "u2", Name: "b", Namespace: "ns"}}

	for range 10 {
		r.Warning(obj, "Failed", "same")
	}
	if len(inner.notes) != 1 {
		t.Fatalf("identical: %d recorded, want 1", len(inner.notes))
	}
	r.Warning(other, "Failed", "same") // other object: own budget
	r.Warning(obj, "Other", "same")    // other reason: own budget
	if len(inner.notes) != 3 {
		t.Fatalf("other object/reason: %d recorded, want 3", len(inner.notes))
	}
	// Distinct messages: burst 3 per interval in total (1 already used).
	for i := range 5 {
		r.Warning(obj, "Failed", "attempt %d", i)
	}
	if len(inner.notes) != 5 {
		t.Fatalf("distinct messages: %d recorded, want 5 (burst 3)", len(inner.notes))
	}
	clk.SetTime(clk.Now().Add(time.Minute))
	if !r.Warning(obj, "Failed", "same") {
		t.Fatal("identical message not recorded again after the interval")
	}
	if r.Warning(obj, "Failed", "same") {
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
	r.Normal(obj, "Scaled", "%s", "100%s done") // a '%' in an argument must reach the API verbatim
	r.Normal(obj, "Long", "%s", strings.Repeat("é", 1000))
	if inner.notes[0] != "Scaled: 100%s done" {
		t.Errorf("an argument was re-formatted: %q", inner.notes[0])
	}
	long := strings.TrimPrefix(inner.notes[1], "Long: ")
	if len(long) > maxNoteBytes || !strings.HasSuffix(long, "...") || !strings.HasPrefix(long, "é") {
		t.Errorf("long note: %d bytes, suffix %q", len(long), long[len(long)-5:])
	}
}

func TestRecorderCacheIsBounded(t *testing.T) {
	r := NewRecorder(&noteRecorder{}, DedupCacheSize(10))
	for i := range 1000 {
		r.Warning(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: types.UID(fmt.Sprint(i))}}, "Failed", "x")
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
		nil:                                      ClassSuccess,
		reconcile.TerminalError(errors.New("x")): ClassTerminal,
		fmt.Errorf("wrapped: %w", apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("x"))): ClassConflict,
		errors.New("boom"): ClassError,
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
		{"dash in namespace", []MetricsOption{MetricsNamespace("my-operator")}},
		{"leading digit", []MetricsOption{MetricsNamespace("1op")}},
		{"empty namespace", []MetricsOption{MetricsNamespace("")}},
		{"unsorted buckets", []MetricsOption{ReconcileBuckets(1, 0.5)}},
		{"no buckets", []MetricsOption{PhaseBuckets()}},
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

func TestNewMetricsDuplicateRegistrationIsAnErrorNotAPanic(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	first.ObserveReconcile("c", ClassSuccess, time.Second)
	_, err = NewMetrics(reg)
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Fatalf("second NewMetrics on one registry: %v, want AlreadyRegisteredError", err)
	}
	// The first set still works and scrapes cleanly.
	first.ObserveReconcile("c", ClassSuccess, time.Second)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "opkit_reconcile_total" && mf.GetMetric()[0].GetCounter().GetValue() != 2 {
			t.Fatalf("reconcile_total = %v, want 2", mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// A clash with someone else's metric of the same name is reported too.
	other := prometheus.NewRegistry()
	other.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "opkit_ensure_results_total", Help: "x"}))
	if _, err := NewMetrics(other); err == nil {
		t.Fatal("clash with an existing metric name accepted")
	}
	if mfs, _ := other.Gather(); len(mfs) != 1 {
		t.Fatalf("failed NewMetrics left %d families registered, want only the original 1", len(mfs))
	}
}

func TestNilMetricsIsANoOp(t *testing.T) {
	var m *Metrics
	k := types.NamespacedName{Name: "x"}
	m.ObserveReconcile("c", ClassSuccess, 0)
	m.SetConditions("c", k, []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}})
	m.ForgetObject("c", k)
	m.PhaseTransition("c", "", "A", 0)
	m.CleanupFinished("c", "s", 0, nil)
	m.StuckDeletion("c", k, true)
	m.EnsureResult("c", "created", 1)
	m.InitController("c", DefaultClasses...)
	m.Unregister()
}

func TestStuckDeletionCountsTransitionsOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	a, b := types.NamespacedName{Name: "a"}, types.NamespacedName{Name: "b"}
	for range 3 {
		m.StuckDeletion("c", a, true)
	}
	m.StuckDeletion("c", b, true)
	m.StuckDeletion("c", b, false)
	m.StuckDeletion("c", b, true)
	m.ForgetObject("c", a)
	if g := gaugeValue(t, m.stuckObjects.WithLabelValues("c")); g != 1 {
		t.Errorf("stuck objects = %v, want 1 (b)", g)
	}
	if c := counterValue(t, m.stuckDeletionsTotal.WithLabelValues("c")); c != 3 {
		t.Errorf("stuck deletions total = %v, want 3 (a once, b twice)", c)
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

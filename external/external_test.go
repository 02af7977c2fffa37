package external_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/external"
	"github.com/opkit/opkit/reconciler"
)

func isReady(w *Widget) bool {
	return conditions.IsTrue(w, conditions.Ready) && w.Status.ObservedGeneration == w.Generation
}

func annotate(t *testing.T, w *Widget, key, value string) {
	t.Helper()
	var patch []byte
	if value == "" {
		patch = []byte(`{"metadata":{"annotations":{"` + key + `":null}}}`)
	} else {
		patch = []byte(`{"metadata":{"annotations":{"` + key + `":"` + value + `"}}}`)
	}
	if err := env.Client.Patch(t.Context(), w, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

func TestCreateRecordsMarkersPublishesSecretAndLeaksNothing(t *testing.T) {
	f := newFixture(t)
	f.api.set(func(a *widgetAPI) { a.failNext = 1 }) // an error message on the way
	w := f.create(t, "alpha", nil)
	f.converge(t, w, "Ready", isReady)

	it, ok := f.api.get("alpha")
	if !ok || it.token != string(w.UID) || it.color != "red" {
		t.Fatalf("external widget %+v (found %v)", it, ok)
	}
	if n := f.api.count("create"); n != 1 {
		t.Fatalf("%d creates, want 1", n)
	}
	a := w.Annotations
	if a[external.AnnotationExternalName] != "alpha" || a[external.AnnotationCreateSucceeded] == "" ||
		a[external.AnnotationCreatePending] != "" || a[external.AnnotationCreateFailed] != "" {
		t.Fatalf("annotations %v", a)
	}
	if len(w.Finalizers) != 1 || w.Finalizers[0] != external.FinalizerName {
		t.Fatalf("finalizers %v", w.Finalizers)
	}
	if c := conditions.Get(w, conditions.Ready); c.Reason != external.ReasonAvailable {
		t.Fatalf("Ready %+v", c)
	}
	var s corev1.Secret
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: "alpha-connection"}, &s); err != nil {
		t.Fatal(err)
	}
	if string(s.Data["password"]) != it.secret || !metav1.IsControlledBy(&s, w) {
		t.Fatalf("connection Secret %v, owners %v", s.Data, s.OwnerReferences)
	}
	if !f.events.has("Normal " + external.ReasonCreated) {
		t.Fatalf("events:\n%s", f.events.all())
	}

	// Secret hygiene: the stored object, every event, every log line and
	// error of the reconciles.
	raw := &unstructured.Unstructured{}
	raw.SetGroupVersionKind(widgetGV.WithKind("Widget"))
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(w), raw); err != nil {
		t.Fatal(err)
	}
	stored, err := json.Marshal(raw.Object)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.logs.String(), "503") {
		t.Fatalf("the injected 503 left no error in the logs, so the scan proves little:\n%s", f.logs)
	}
	for what, text := range map[string]string{"the stored object": string(stored), "an event": f.events.all(), "the logs": f.logs.String()} {
		if strings.Contains(text, it.secret) {
			t.Errorf("%s holds the connection secret", what)
		}
	}
}

// TestCrashBetweenCreateAndRecordMakesOneWidget: the API makes the widget
// but the process dies before recording it; the next reconcile observes,
// finds it by its token, and records it — no second create.
func TestCrashBetweenCreateAndRecordMakesOneWidget(t *testing.T) {
	f := newFixture(t)
	f.api.set(func(a *widgetAPI) { a.loseCreate = true })
	w := f.create(t, "fragile", nil)
	if _, err := f.reconcile(t, w); err == nil {
		t.Fatal("the lost create reported no error")
	}
	a := w.Annotations
	if a[external.AnnotationExternalName] != "fragile" || a[external.AnnotationCreatePending] == "" || a[external.AnnotationCreateSucceeded] != "" {
		t.Fatalf("markers after the crash: %v", a)
	}
	if conditions.IsTrue(w, conditions.Ready) {
		t.Fatal("Ready after a create whose outcome is unknown")
	}
	f.converge(t, w, "Ready", isReady)
	if n := f.api.count("create"); n != 1 {
		t.Fatalf("%d creates, want 1: the recorded pending create must be observed, not repeated", n)
	}
	if w.Annotations[external.AnnotationCreatePending] != "" || w.Annotations[external.AnnotationCreateSucceeded] == "" {
		t.Fatalf("markers after recovery: %v", w.Annotations)
	}
	if !f.events.has("Normal " + external.ReasonCreateRecovered) {
		t.Fatalf("events:\n%s", f.events.all())
	}
}

func TestUnknownCreateOutcome(t *testing.T) {
	t.Run("idempotent API: sent again with the same token", func(t *testing.T) {
		f := newFixture(t)
		f.api.set(func(a *widgetAPI) { a.dropCreate = true })
		w := f.create(t, "late", nil)
		if _, err := f.reconcile(t, w); err == nil || w.Annotations[external.AnnotationCreatePending] == "" {
			t.Fatalf("a timed-out create: err %v, annotations %v", err, w.Annotations)
		}
		f.converge(t, w, "Ready", isReady)
		if n := f.api.count("create"); n != 2 {
			t.Fatalf("%d creates, want 2", n)
		}
	})
	t.Run("non-idempotent API: stalls and is never sent again", func(t *testing.T) {
		f := newFixture(t, external.WithNonIdempotentCreate())
		f.api.set(func(a *widgetAPI) { a.dropCreate, a.ignoreToken = true, true })
		w := f.create(t, "careful", nil)
		_, _ = f.reconcile(t, w)
		for range 3 {
			_, err := f.reconcile(t, w)
			if !errors.Is(err, reconcile.TerminalError(nil)) {
				t.Fatalf("want a terminal error, got %v", err)
			}
		}
		st := conditions.Get(w, conditions.Stalled)
		if st == nil || st.Reason != external.ReasonCreateOutcomeUnknown || !strings.Contains(st.Message, external.AnnotationCreatePending) {
			t.Fatalf("Stalled %+v", st)
		}
		if n := f.api.count("create"); n != 1 {
			t.Fatalf("%d creates, want 1", n)
		}
		// A person checked: nothing was made. Removing the marker lets it go on.
		annotate(t, w, external.AnnotationCreatePending, "")
		f.converge(t, w, "Ready", isReady)
		if n := f.api.count("create"); n != 2 {
			t.Fatalf("%d creates, want 2", n)
		}
	})
}

func TestPolicies(t *testing.T) {
	t.Run("observe-only annotation: observed, reported, never written", func(t *testing.T) {
		f := newFixture(t)
		w := f.create(t, "watched", func(w *Widget) { w.Annotations = map[string]string{reconciler.AnnotationObserveOnly: "true"} })
		_, _ = f.reconcile(t, w)
		if c := conditions.Get(w, conditions.Reconciling); c == nil || c.Reason != external.ReasonNotFound {
			t.Fatalf("conditions %+v", w.Status.Conditions)
		}
		f.api.set(func(a *widgetAPI) {
			a.items["watched"] = &item{token: string(w.UID), color: "blue", size: 1, secret: "s"}
		})
		f.converge(t, w, "Ready", isReady)
		if n := f.api.count("create") + f.api.count("update") + f.api.count("delete"); n != 0 {
			t.Fatalf("%d writes to the external API", n)
		}
		if len(w.Finalizers) != 0 || w.Annotations[external.AnnotationExternalName] != "" || w.Spec.Size != 0 {
			t.Fatalf("the object was written: finalizers %v, annotations %v, size %d", w.Finalizers, w.Annotations, w.Spec.Size)
		}
		if c := conditions.Get(w, conditions.Ready); !strings.Contains(c.Message, "color blue→red") {
			t.Fatalf("Ready message %q does not report the difference", c.Message)
		}
		if err := env.Client.Delete(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		if _, ok := f.api.get("watched"); !ok {
			t.Fatal("the observed widget was deleted")
		}
	})
	t.Run("observe-only annotation on a managed object: deletion leaves the widget", func(t *testing.T) {
		f := newFixture(t)
		w := f.create(t, "handed-over", nil)
		f.converge(t, w, "Ready", isReady)
		annotate(t, w, reconciler.AnnotationObserveOnly, "true")
		if err := env.Client.Delete(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		f.converge(t, w, "object gone", func(w *Widget) bool {
			return apierrors.IsNotFound(env.Client.Get(t.Context(), client.ObjectKeyFromObject(w), &Widget{}))
		})
		if _, ok := f.api.get("handed-over"); !ok || f.api.count("delete") != 0 {
			t.Fatalf("widget present %v, %d deletes", ok, f.api.count("delete"))
		}
	})
	t.Run("orphan: the object goes, the widget stays", func(t *testing.T) {
		f := newFixture(t)
		w := f.create(t, "kept", func(w *Widget) { w.Spec.Orphan = true })
		f.converge(t, w, "Ready", isReady)
		if err := env.Client.Delete(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		f.converge(t, w, "object gone", func(w *Widget) bool {
			return apierrors.IsNotFound(env.Client.Get(t.Context(), client.ObjectKeyFromObject(w), &Widget{}))
		})
		if _, ok := f.api.get("kept"); !ok || f.api.count("delete") != 0 {
			t.Fatalf("orphan: widget present %v, %d deletes", ok, f.api.count("delete"))
		}
		if !f.events.has("Normal " + external.ReasonOrphaned) {
			t.Fatalf("events:\n%s", f.events.all())
		}
	})
	t.Run("observe-only policy set later: deletion leaves the widget", func(t *testing.T) {
		f := newFixture(t)
		w := f.create(t, "adopted", nil)
		f.converge(t, w, "Ready", isReady)
		w.Spec.ObserveOnly, w.Spec.Color = true, "green"
		if err := env.Client.Update(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		f.converge(t, w, "Ready for the new generation", isReady)
		if it, _ := f.api.get("adopted"); it.color != "red" || f.api.count("update") != 0 {
			t.Fatalf("observe-only updated the widget: %+v", it)
		}
		if err := env.Client.Delete(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		f.converge(t, w, "object gone", func(w *Widget) bool {
			return apierrors.IsNotFound(env.Client.Get(t.Context(), client.ObjectKeyFromObject(w), &Widget{}))
		})
		if _, ok := f.api.get("adopted"); !ok {
			t.Fatal("an observe-only widget was deleted")
		}
	})
	t.Run("paused: no call at all, deletion waits", func(t *testing.T) {
		f := newFixture(t)
		w := f.create(t, "frozen", nil)
		f.converge(t, w, "Ready", isReady)
		annotate(t, w, reconciler.AnnotationPaused, "true")
		calls := f.api.count("")
		w.Spec.Color = "green"
		if err := env.Client.Update(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Delete(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			_, _ = f.reconcile(t, w)
		}
		if n := f.api.count(""); n != calls {
			t.Fatalf("%d external calls while paused", n-calls)
		}
		if !conditions.IsTrue(w, reconciler.ConditionPaused) || w.DeletionTimestamp.IsZero() {
			t.Fatalf("paused, deleting: %+v", w)
		}
		annotate(t, w, reconciler.AnnotationPaused, "")
		f.converge(t, w, "object gone", func(w *Widget) bool {
			return apierrors.IsNotFound(env.Client.Get(t.Context(), client.ObjectKeyFromObject(w), &Widget{}))
		})
		if _, ok := f.api.get("frozen"); ok {
			t.Fatal("the widget outlived its object")
		}
	})
	t.Run("delete: the finalizer goes only once the widget is verified gone", func(t *testing.T) {
		f := newFixture(t)
		f.api.set(func(a *widgetAPI) { a.deleteObserves = 3 })
		w := f.create(t, "doomed", nil)
		f.converge(t, w, "Ready", isReady)
		if err := env.Client.Delete(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		waited := 0
		f.converge(t, w, "object gone", func(w *Widget) bool {
			gone := apierrors.IsNotFound(env.Client.Get(t.Context(), client.ObjectKeyFromObject(w), &Widget{}))
			_, exists := f.api.get("doomed")
			if gone && exists {
				t.Fatal("the finalizer went while the widget exists")
			}
			if !gone && exists {
				waited++
			}
			return gone
		})
		if waited < 3 || f.api.count("delete") != 1 {
			t.Fatalf("waited %d reconciles, %d deletes; want ≥3 and 1", waited, f.api.count("delete"))
		}
	})
}

func TestDriftIsCorrectedAndMeasured(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := external.NewMetrics(reg, "widget")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, external.WithObserver(m))
	w := f.create(t, "steady", nil)
	f.converge(t, w, "Ready", isReady)
	f.api.set(func(a *widgetAPI) { a.items["steady"].color = "green" })
	f.converge(t, w, "drift corrected", func(*Widget) bool { it, _ := f.api.get("steady"); return it.color == "red" })
	if !strings.Contains(f.events.all(), "Warning "+external.ReasonDriftCorrected+": external resource steady was changed outside Kubernetes; set back: color green→red") {
		t.Fatalf("events:\n%s", f.events.all())
	}
	// Deleted outside Kubernetes: created again, with the same token.
	f.api.set(func(a *widgetAPI) { delete(a.items, "steady") })
	f.converge(t, w, "re-created", func(*Widget) bool { _, ok := f.api.get("steady"); return ok })
	f.converge(t, w, "Ready", isReady)
	if !strings.Contains(f.events.all(), "deleted outside Kubernetes; created it again") {
		t.Fatalf("events:\n%s", f.events.all())
	}
	// A spec change is an update, not drift.
	w.Spec.Color = "blue"
	if err := env.Client.Update(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	f.converge(t, w, "updated", isReady)
	if !f.events.has("Normal " + external.ReasonUpdated) {
		t.Fatalf("events:\n%s", f.events.all())
	}
	if v := metricValue(t, reg, "opkit_external_drift_corrections_total", nil); v != 2 {
		t.Fatalf("drift corrections %v, want 2", v)
	}
	if n := testutil.CollectAndCount(reg, "opkit_external_time_to_first_ready_seconds"); n != 1 {
		t.Fatalf("%d first-ready series", n)
	}
	if c := histogramCount(t, reg, "opkit_external_time_to_first_ready_seconds"); c != 1 {
		t.Fatalf("first Ready observed %d times, want 1", c)
	}
	if c := histogramCount(t, reg, "opkit_external_call_duration_seconds"); c < 6 {
		t.Fatalf("%d calls timed", c)
	}
}

// metricValue sums the counter name's series whose labels include labels.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for k, want := range labels {
				found := false
				for _, l := range m.GetLabel() {
					found = found || l.GetName() == k && l.GetValue() == want
				}
				if !found {
					continue series
				}
			}
			v += m.GetCounter().GetValue()
		}
	}
	return v
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

func TestErrorClasses(t *testing.T) {
	t.Run("quota: Stalled, create recorded as failed", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := external.NewMetrics(reg, "widget")
		if err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, external.WithObserver(m))
		f.api.set(func(a *widgetAPI) { a.items["other"], a.quota = &item{token: "x"}, 1 })
		w := f.create(t, "refused", nil)
		_, err = f.reconcile(t, w)
		if !errors.Is(err, reconcile.TerminalError(nil)) {
			t.Fatalf("want a terminal error, got %v", err)
		}
		if st := conditions.Get(w, conditions.Stalled); st == nil || st.Reason != "QuotaExceeded" || !conditions.IsFalse(w, conditions.Ready) {
			t.Fatalf("conditions %+v", w.Status.Conditions)
		}
		if w.Annotations[external.AnnotationCreateFailed] == "" || w.Annotations[external.AnnotationCreatePending] != "" {
			t.Fatalf("annotations %v", w.Annotations)
		}
		if v := metricValue(t, reg, "opkit_external_call_errors_total", map[string]string{"operation": external.OpCreate, "code": "QuotaExceeded"}); v != 1 {
			t.Fatalf("create errors {code=QuotaExceeded} = %v, want 1", v)
		}
	})
	t.Run("503: backoff, Reconciling", func(t *testing.T) {
		f := newFixture(t)
		f.api.set(func(a *widgetAPI) { a.failNext = 1 })
		w := f.create(t, "flaky", nil)
		res, err := f.reconcile(t, w)
		if err == nil || errors.Is(err, reconcile.TerminalError(nil)) || res.RequeueAfter != 0 {
			t.Fatalf("want an error for backoff, got %v %+v", err, res)
		}
		if c := conditions.Get(w, conditions.Reconciling); c == nil || c.Reason != "ServiceUnavailable" {
			t.Fatalf("conditions %+v", w.Status.Conditions)
		}
		f.converge(t, w, "Ready", isReady)
	})
	t.Run("429: waits Retry-After, reports Throttled", func(t *testing.T) {
		f := newFixture(t)
		f.api.set(func(a *widgetAPI) { a.throttleNext, a.retryAfter = 1, 2*time.Second })
		w := f.create(t, "busy", nil)
		res, err := f.reconcile(t, w)
		if err != nil || res.RequeueAfter < 2*time.Second {
			t.Fatalf("want a wait of the Retry-After, got %v %+v", err, res)
		}
		calls := f.api.count("")
		res, _ = f.reconcile(t, w) // before the Retry-After: nothing sent
		if n := f.api.count(""); n != calls || res.RequeueAfter <= 0 {
			t.Fatalf("%d calls before the Retry-After passed (requeue %s)", n-calls, res.RequeueAfter)
		}
		if c := conditions.Get(w, conditions.Reconciling); c == nil || c.Reason != external.ReasonThrottled {
			t.Fatalf("conditions %+v", w.Status.Conditions)
		}
	})
}

func TestLateInitialisedFieldsAreWritten(t *testing.T) {
	f := newFixture(t)
	w := f.create(t, "defaulted", nil)
	f.converge(t, w, "Ready with the size filled", func(w *Widget) bool { return isReady(w) && w.Spec.Size == 3 })
	var stored Widget
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(w), &stored); err != nil || stored.Spec.Size != 3 {
		t.Fatalf("stored size %d (%v)", stored.Spec.Size, err)
	}
}

// TestSharedLimiterPacesEveryObjectOfOneEndpoint: N objects calling one
// endpoint through one Limiter: the API sees at most burst + rate·w calls
// in any window of w seconds, the objects held back say Throttled, and a
// Retry-After one object receives holds every object back.
func TestSharedLimiterPacesEveryObjectOfOneEndpoint(t *testing.T) {
	const (
		n     = 8
		rate  = 5.0
		burst = 2
	)
	f := newFixture(t, external.WithLimiter(external.NewLimiter(rate, burst)), external.WithMaxWait(300*time.Millisecond))
	ws := make([]*Widget, n)
	for i := range ws {
		ws[i] = f.create(t, "shared-"+string(rune('a'+i)), nil)
	}
	var mu sync.Mutex
	throttledSeen := false
	run := func(until func(*Widget) bool) {
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Go(func() {
				deadline := time.Now().Add(30 * time.Second)
				for time.Now().Before(deadline) {
					res, _ := f.r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
					var cur Widget
					if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(w), &cur); err != nil {
						t.Error(err)
						return
					}
					if c := conditions.Get(&cur, conditions.Reconciling); c != nil && c.Reason == external.ReasonThrottled {
						mu.Lock()
						throttledSeen = true
						mu.Unlock()
					}
					if until(&cur) {
						return
					}
					time.Sleep(min(res.RequeueAfter, time.Second) + 10*time.Millisecond)
				}
				t.Errorf("%s: not done in time", w.Name)
			})
		}
		wg.Wait()
	}
	run(isReady)
	calls := f.api.callLog()
	if len(calls) < 2*n {
		t.Fatalf("%d calls for %d objects", len(calls), n)
	}
	for i, c := range calls {
		inWindow := 0
		for _, d := range calls[i:] {
			if d.at.Sub(c.at) < time.Second {
				inWindow++
			}
		}
		// One call of slack: the API logs a call a little after the
		// Limiter admitted it.
		if inWindow > burst+int(rate)+1 {
			t.Fatalf("%d calls within 1s of %s (limit %d + %v/s)", inWindow, c.at.Format(time.StampMilli), burst, rate)
		}
	}
	if !throttledSeen {
		t.Fatal("no object reported Throttled while held back")
	}

	// Retry-After, received by one object, holds back all of them.
	const retryAfter = time.Second
	f.api.set(func(a *widgetAPI) { a.throttleNext, a.retryAfter = 1, retryAfter })
	start := len(f.api.callLog())
	if res, _ := f.r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ws[0])}); res.RequeueAfter < retryAfter {
		t.Fatalf("the throttled object requeues after %s, want ≥ %s", res.RequeueAfter, retryAfter)
	}
	throttled := f.api.callLog()[start:]
	if len(throttled) != 1 || throttled[0].status != 429 {
		t.Fatalf("calls %+v, want one 429", throttled)
	}
	at := throttled[0].at
	done := map[string]bool{}
	run(func(w *Widget) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range f.api.callLog()[start+1:] {
			if c.name == w.Name && c.status == 200 {
				done[w.Name] = true
			}
		}
		return done[w.Name]
	})
	after := f.api.callLog()[start+1:]
	if len(after) < n {
		t.Fatalf("%d calls after the 429, want one per object at least", len(after))
	}
	for _, c := range after {
		if c.at.Sub(at) < retryAfter {
			t.Fatalf("%s called %s after a 429 with Retry-After %s", c.name, c.at.Sub(at), retryAfter)
		}
	}
}

package observability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/phase"
)

const reasonInvalidSpec = "InvalidSpec"

// scrapeReconciler drives a known sequence of outcomes from ConfigMap names:
// ok-* succeed (and report conditions, a phase change, an ensure result and a
// cleanup step), "terminal" fails terminally and reports a stuck deletion,
// "conflict" fails once with a conflict and then succeeds, "block" waits for
// gate. A missing ConfigMap is forgotten.
type scrapeReconciler struct {
	name     string
	c        client.Client
	obs      *observability.Observability
	fin      *finalizer.Metrics
	ph       *phase.Metrics
	en       *ensure.Metrics
	gate     chan struct{}
	mu       sync.Mutex
	conflict int
}

func (r *scrapeReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := r.obs.Metrics()
	var cm corev1.ConfigMap
	if err := r.c.Get(ctx, req.NamespacedName, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			m.ForgetObject(r.name, req.NamespacedName)
			r.fin.Forget(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	switch {
	case strings.HasPrefix(cm.Name, "ok-"):
		m.SetConditions(r.name, req.NamespacedName, []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}})
		r.ph.Transition(r.name, "", "Pending", 0)
		r.ph.Transition(r.name, "Pending", "Ready", 2*time.Second)
		r.en.ObserveChange(ctx, ensure.Change{Action: ensure.Created})
		r.fin.StepFinished(&cm, "remove-dns", 100*time.Millisecond, true, nil)
	case cm.Name == "terminal":
		r.obs.Recorder(r.name).Eventf(&cm, nil, corev1.EventTypeWarning, reasonInvalidSpec, "Reconcile", "spec.data.size %q is not a number", "x")
		m.SetConditions(r.name, req.NamespacedName, []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse}})
		r.fin.StepFinished(&cm, "remove-dns", 200*time.Millisecond, false, errors.New("dns api down"))
		r.fin.StuckDeletion(&cm, "remove-dns", time.Minute)
		return reconcile.Result{}, reconcile.TerminalError(errors.New("invalid spec"))
	case cm.Name == "conflict":
		r.mu.Lock()
		r.conflict++
		first := r.conflict == 1
		r.mu.Unlock()
		if first {
			return reconcile.Result{}, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, cm.Name, errors.New("stale"))
		}
	case cm.Name == "block":
		select {
		case <-r.gate:
		case <-ctx.Done():
		}
	}
	return reconcile.Result{}, nil
}

type series struct {
	labels map[string]string
	value  float64 // counter/gauge value, or histogram sample count
	sum    float64 // histogram sum
}

func parseScrape(t testing.TB, body []byte) map[string][]series {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse scrape: %v", err)
	}
	out := map[string][]series{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			s := series{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				s.value = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				s.value = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				s.value, s.sum = float64(m.GetHistogram().GetSampleCount()), m.GetHistogram().GetSampleSum()
			}
			out[name] = append(out[name], s)
		}
	}
	return out
}

// sum adds the values of family name's series whose labels include want.
func sum(fams map[string][]series, name string, want map[string]string) float64 {
	var total float64
	for _, s := range fams[name] {
		if hasLabels(s, want) {
			total += s.value
		}
	}
	return total
}

func hasLabels(s series, want map[string]string) bool {
	for k, v := range want {
		if s.labels[k] != v {
			return false
		}
	}
	return true
}

// value returns the series of family name whose labels include want, or fails.
func value(t testing.TB, fams map[string][]series, name string, want map[string]string) series {
	t.Helper()
	for _, s := range fams[name] {
		if hasLabels(s, want) {
			return s
		}
	}
	t.Fatalf("no series %s%v in scrape; have %v", name, want, fams[name])
	return series{}
}

func TestMetricsEndpointServesDocumentedSeriesAndPassesLint(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not on PATH: run hack/ensure-promtool.sh (%v)", err)
	}
	ns := env.Namespace(t)
	ctx := testCtx(t)
	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	mgr := newManager(t, ns, mgrConfig{metricsAddr: metricsAddr, probeAddr: probeAddr})
	// The default registerer: controller-runtime's metrics.Registry, which the manager serves.
	obs, err := observability.Setup(mgr)
	if err != nil {
		t.Fatal(err)
	}
	// controller-runtime's own metrics are process-global: a name unique to
	// this run keeps -count=N runs from seeing each other's reconciles.
	name := "scrape-" + ns
	rec := &scrapeReconciler{name: name, c: mgr.GetClient(), obs: obs, gate: make(chan struct{})}
	// The pattern packages' own metrics, on the registerer observability
	// uses, as the reconciler package wires them: one endpoint serves all.
	if rec.fin, err = finalizer.NewMetrics(obs.Registerer(), name); err != nil {
		t.Fatal(err)
	}
	if rec.ph, err = phase.NewMetrics(obs.Registerer(), name); err != nil {
		t.Fatal(err)
	}
	if rec.en, err = ensure.NewMetrics(obs.Registerer(), name); err != nil {
		t.Fatal(err)
	}
	err = builder.ControllerManagedBy(mgr).Named(name).
		For(&corev1.ConfigMap{}, builder.WithPredicates(obs.TriggerPredicate(name))).
		Complete(obs.Wrap(name, rec, observability.WithObjectKind("ConfigMap")))
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)

	for _, n := range []string{"ok-0", "ok-1", "ok-2", "terminal", "conflict"} {
		if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	base := "http://" + metricsAddr
	scrape := func() (map[string][]series, []byte, error) {
		code, body, err := httpGet(ctx, base+"/metrics")
		if err != nil || code != 200 {
			return nil, body, fmt.Errorf("GET /metrics: %d: %w", code, err)
		}
		return parseScrape(t, body), body, nil
	}
	var fams map[string][]series
	var body []byte
	// 3 ok + terminal + conflict (fails) + conflict retry = 6 reconciles.
	// Wait until every family that counts reconciles has all 6 in one
	// scrape: the registry gathers families concurrently, and
	// controller-runtime counts a reconcile after Wrap has, so a scrape taken
	// as the last reconcile ends can hold 6 in one family and 5 in another.
	eventually(t, 30*time.Second, "6 reconciles counted", func() (bool, error) {
		var err error
		if fams, body, err = scrape(); err != nil {
			return false, err
		}
		d := value(t, fams, "opkit_reconcile_duration_seconds", map[string]string{"controller": name}).value
		o := sum(fams, "opkit_reconcile_total", map[string]string{"controller": name})
		cr := sum(fams, "controller_runtime_reconcile_total", map[string]string{"controller": name})
		return d == 6 && o == 6 && cr == 6, fmt.Errorf("duration count %v, opkit_reconcile_total %v, controller_runtime_reconcile_total %v", d, o, cr)
	})
	c := map[string]string{"controller": name}
	with := func(kv ...string) map[string]string {
		m := map[string]string{"controller": name}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		family string
		labels map[string]string
		want   float64
	}{
		{"opkit_reconcile_total", with("result", "success"), 4},
		{"opkit_reconcile_total", with("result", "conflict"), 1},
		{"opkit_reconcile_total", with("result", "terminal"), 1},
		{"opkit_reconcile_total", with("result", "transient"), 0}, // pre-created at zero by Wrap
		{"opkit_condition_objects", with("type", "Ready", "status", "True"), 3},
		{"opkit_condition_objects", with("type", "Ready", "status", "False"), 1},
		{"opkit_phase_transitions_total", with("from", "none", "to", "Pending"), 3},
		{"opkit_phase_transitions_total", with("from", "Pending", "to", "Ready"), 3},
		{"opkit_phase_duration_seconds", with("phase", "Pending"), 3},
		{"opkit_finalizer_cleanup_duration_seconds", with("step", "remove-dns", "result", "success"), 3},
		{"opkit_finalizer_cleanup_duration_seconds", with("step", "remove-dns", "result", "error"), 1},
		{"opkit_finalizer_stuck_objects", c, 1},
		{"opkit_finalizer_stuck_deletions_total", c, 1},
		{"opkit_ensure_results_total", with("action", "created"), 3},
	} {
		if got := value(t, fams, tc.family, tc.labels).value; got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.family, tc.labels, got, tc.want)
		}
	}
	if got := value(t, fams, "opkit_phase_duration_seconds", with("phase", "Pending")).sum; got != 6 {
		t.Errorf("phase_duration_seconds_sum{phase=Pending} = %v, want 6", got)
	}
	// controller-runtime's own reconcile metrics agree on the number of reconciles.
	if got := value(t, fams, "controller_runtime_reconcile_total", map[string]string{"controller": name, "result": "success"}).value; got != 4 {
		t.Errorf("controller_runtime_reconcile_total{success} = %v, want 4", got)
	}

	lintScrape(t, promtool, body)

	// Deleting objects: the stuck object and its conditions stop counting.
	for _, n := range []string{"terminal", "ok-0"} {
		if err := env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "deleted objects forgotten", func() (bool, error) {
		fams, _, err := scrape()
		if err != nil {
			return false, err
		}
		stuck := value(t, fams, "opkit_finalizer_stuck_objects", c).value
		ready := value(t, fams, "opkit_condition_objects", with("type", "Ready", "status", "True")).value
		notReady := value(t, fams, "opkit_condition_objects", with("type", "Ready", "status", "False")).value
		return stuck == 0 && ready == 2 && notReady == 0, fmt.Errorf("stuck=%v ready=%v notReady=%v", stuck, ready, notReady)
	})

	// The terminal failure's Event is on the object, written through the
	// manager's events.k8s.io/v1 recorder.
	eventually(t, 30*time.Second, "InvalidSpec event", func() (bool, error) {
		var list eventsv1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Reason == string(reasonInvalidSpec) && e.Regarding.Name == "terminal" && e.Type == corev1.EventTypeWarning &&
				e.ReportingController == name && e.Note == `spec.data.size "x" is not a number` {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d events, none matching", len(list.Items))
	})

	// Health: /healthz passes; /readyz passes once the cache has synced and
	// names the opkit check.
	eventually(t, 30*time.Second, "/healthz and /readyz 200", func() (bool, error) {
		hc, _, err := httpGet(ctx, "http://"+probeAddr+"/healthz")
		if err != nil {
			return false, err
		}
		rc, rb, err := httpGet(ctx, "http://"+probeAddr+"/readyz?verbose=1")
		if err != nil {
			return false, err
		}
		return hc == 200 && rc == 200 && strings.Contains(string(rb), observability.ReadyzCheckName), fmt.Errorf("healthz %d readyz %d %s", hc, rc, rb)
	})

	// Debug endpoint: last reconcile and queue depth. One worker blocked in
	// "block" leaves three later requests queued.
	debug := func() (observability.ControllerStatus, error) {
		code, b, err := httpGet(ctx, base+observability.DefaultDebugPath)
		if err != nil || code != 200 {
			return observability.ControllerStatus{}, fmt.Errorf("GET debug: %d: %w", code, err)
		}
		var rep observability.DebugReport
		if err := json.Unmarshal(b, &rep); err != nil {
			return observability.ControllerStatus{}, fmt.Errorf("%w: %s", err, b)
		}
		for _, cs := range rep.Controllers {
			if cs.Name == name {
				return cs, nil
			}
		}
		return observability.ControllerStatus{}, fmt.Errorf("controller %s missing: %s", name, b)
	}
	st, err := debug()
	if err != nil {
		t.Fatal(err)
	}
	if st.Reconciles < 8 || st.LastReconcileStart == nil || st.LastResult != "success" || st.QueueDepth != 0 {
		t.Errorf("debug status after the sequence = %+v, want ≥8 reconciles, a last start, last result success, depth 0", st)
	}
	for _, n := range []string{"block", "q-1", "q-2", "q-3"} {
		if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}); err != nil {
			t.Fatal(err)
		}
		if n == "block" { // make sure the worker is inside "block" before queueing more
			eventually(t, 30*time.Second, "block reconcile running", func() (bool, error) {
				code, b, err := httpGet(ctx, base+"/metrics")
				if err != nil || code != 200 {
					return false, err
				}
				s := value(t, parseScrape(t, b), "controller_runtime_active_workers", c)
				return s.value == 1, nil
			})
		}
	}
	eventually(t, 30*time.Second, "debug queue depth 3 while the worker is blocked", func() (bool, error) {
		st, err := debug()
		return err == nil && st.QueueDepth == 3, fmt.Errorf("%+v: %w", st, err)
	})
	close(rec.gate)
	eventually(t, 30*time.Second, "debug queue drained", func() (bool, error) {
		st, err := debug()
		return err == nil && st.QueueDepth == 0 && st.LastResult == "success", fmt.Errorf("%+v: %w", st, err)
	})
}

// lintScrape fails on any problem promlint or `promtool check metrics` finds
// in opkit's series of body; problems in other libraries' series are logged.
func lintScrape(t *testing.T, promtool string, body []byte) {
	t.Helper()
	var own bytes.Buffer
	for _, line := range strings.SplitAfter(string(body), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "#" && (f[1] == "HELP" || f[1] == "TYPE") && strings.HasPrefix(f[2], "opkit_"),
			strings.HasPrefix(line, "opkit_"):
			own.WriteString(line)
		}
	}
	if !strings.Contains(own.String(), "# TYPE opkit_reconcile_total counter") {
		t.Fatalf("scrape lacks opkit_reconcile_total:\n%s", body)
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "opkit_") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		} else {
			t.Logf("promlint (not opkit's): %s: %s", p.Metric, p.Text)
		}
	}
	run := func(in []byte) (string, error) {
		cmd := exec.CommandContext(context.Background(), promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(own.Bytes()); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("promtool check metrics on opkit's series: %v\n%s", err, out)
	}
	out, _ := run(body) // the whole scrape: report opkit problems only
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "opkit_") {
			t.Errorf("promtool check metrics: %s", line)
		} else if strings.TrimSpace(line) != "" {
			t.Logf("promtool (not opkit's): %s", line)
		}
	}
}

// TestSetupTwiceInOneProcess: a test suite with several managers sets
// observability up on each, on controller-runtime's one global registry; the
// second Setup shares the first's metrics instead of failing, and both
// record into the same series.
func TestSetupTwiceInOneProcess(t *testing.T) {
	ns := env.Namespace(t)
	first, err := observability.Setup(newManager(t, ns, mgrConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	second, err := observability.Setup(newManager(t, ns, mgrConfig{}))
	if err != nil {
		t.Fatalf("second Setup in one process: %v", err)
	}
	name := "twice-" + ns
	first.Metrics().ObserveReconcile(name, "success", time.Millisecond)
	second.Metrics().ObserveReconcile(name, "success", time.Millisecond)
	fams, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got float64
	for _, mf := range fams {
		if mf.GetName() != "opkit_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == name {
					got += m.GetCounter().GetValue()
				}
			}
		}
	}
	if got != 2 {
		t.Fatalf("opkit_reconcile_total{controller=%q} = %v, want 2 (one series shared by both setups)", name, got)
	}
}

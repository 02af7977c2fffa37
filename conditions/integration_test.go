package conditions_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	// A fuzzing worker process (go test -fuzz) runs only the fuzz target,
	// which needs no API server; starting one per worker makes fuzzing hang.
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		os.Exit(m.Run())
	}
	logf.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := addGizmo(scheme); err != nil {
		panic(err)
	}
	os.Exit(testenv.RunMain(m, &env, testenv.WithCRDPaths("testdata"), testenv.WithScheme(scheme)))
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	testenv.WaitForEvery(t, 50*time.Millisecond, timeout, what, cond)
}

// record is what one reconcile did.
type record struct {
	class      outcome.Class
	before     []metav1.Condition
	after      []metav1.Condition
	sentStatus bool
	result     reconcile.Result
	err        error
}

// gizmoReconciler is a minimal controller built the way opkit intends:
// read from the cache, snapshot, work, ApplyOutcome, patch status only if it
// changed, return outcome.Result. spec.mode chooses what the work returns.
type gizmoReconciler struct {
	client client.Client
	mu     sync.Mutex
	recs   map[string][]record
}

func (r *gizmoReconciler) records(name string) []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recs[name])
}

func (r *gizmoReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	g := &Gizmo{}
	if err := r.client.Get(ctx, req.NamespacedName, g); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	rec := record{before: slices.Clone(g.Status.Conditions)}
	patcher := conditions.NewStatusPatcher(g)
	err := r.work(ctx, g, len(r.records(req.Name))+1)
	if err == nil {
		err = conditions.MarkReady(g, "Succeeded", "mode "+g.Spec.Mode)
	}
	if aerr := conditions.ApplyOutcome(g, err); aerr != nil {
		err = aerr
	}
	rec.after = slices.Clone(g.Status.Conditions)
	sent, perr := patcher.Patch(ctx, r.client, g)
	if perr != nil && err == nil {
		err = perr
	}
	rec.sentStatus, rec.class = sent, outcome.Classify(err).Class
	rec.result, rec.err = outcome.Result(err)
	r.mu.Lock()
	r.recs[req.Name] = append(r.recs[req.Name], rec)
	r.mu.Unlock()
	return rec.result, rec.err
}

func (r *gizmoReconciler) work(ctx context.Context, g *Gizmo, attempt int) error {
	switch g.Spec.Mode {
	case "terminal":
		return outcome.Terminal("UnsupportedMode", fmt.Errorf("mode %q is not supported", g.Spec.Mode))
	case "transient":
		return errors.New("backend unavailable")
	case "conflict":
		if attempt > 1 {
			return nil
		}
		// Another writer changes the object after this reconcile read it,
		// so the write below hits a real 409 from the API server.
		fresh := &Gizmo{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(g), fresh); err != nil {
			return err
		}
		fresh.Annotations = map[string]string{"other-writer": "was-here"}
		if err := env.Client.Update(ctx, fresh); err != nil {
			return err
		}
		stale := g.DeepCopyObject().(*Gizmo)
		stale.Labels = map[string]string{"touched": "yes"}
		return r.client.Update(ctx, stale)
	}
	return nil
}

type harness struct {
	rec     *gizmoReconciler
	counter *testenv.RequestCounter
	cache   client.Client
	trigger chan event.GenericEvent
}

// startManager runs a real manager whose requests are counted. The
// controller watches Gizmos through predicate.GenerationChangedPredicate, so
// its own status writes (which do not change metadata.generation) do not
// trigger reconciles: only creation, spec changes, requeues and the explicit
// trigger channel do. That is the composition opkit prescribes, and it is
// what lets a Terminal error stop for good.
func startManager(t *testing.T, ns string) *harness {
	t.Helper()
	cfg, counter := testenv.CountRequests(env.Config)
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{
		rec:     &gizmoReconciler{client: mgr.GetClient(), recs: map[string][]record{}},
		counter: counter, cache: mgr.GetClient(),
		trigger: make(chan event.GenericEvent),
	}
	err = builder.ControllerManagedBy(mgr).
		Named("gizmo").
		For(&Gizmo{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(h.trigger, &handler.EnqueueRequestForObject{})).
		Complete(h.rec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(testCtx(t)) {
		t.Fatal("cache did not sync")
	}
	return h
}

func newGizmo(ns, name, mode string) *Gizmo {
	return &Gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: GizmoSpec{Mode: mode}}
}

func getGizmo(ctx context.Context, t *testing.T, ns, name string) *Gizmo {
	t.Helper()
	g := &Gizmo{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestTerminalDoesNotHotLoop: a Terminal error marks the object Stalled and is
// not retried — its own status write does not re-trigger it either — until
// the spec changes. A Transient error in the same setup is retried, which
// shows the counting would see a loop.
func TestTerminalDoesNotHotLoop(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	h := startManager(t, ns)
	for _, g := range []*Gizmo{newGizmo(ns, "stuck", "terminal"), newGizmo(ns, "flaky", "transient")} {
		if err := env.Client.Create(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "Stalled=True on the server", func() (bool, error) {
		return conditions.IsTrue(getGizmo(ctx, t, ns, "stuck"), conditions.Stalled), nil
	})
	// A reconcile's record is appended after its status write returns:
	// count from the record of the reconcile that wrote Stalled.
	eventually(t, 30*time.Second, "the stalling reconcile's record", func() (bool, error) {
		for _, r := range h.rec.records("stuck") {
			if r.class == outcome.ClassTerminal {
				return true, nil
			}
		}
		return false, nil
	})
	// Observing that something does NOT happen needs a window; 5s is far more
	// than the workqueue's first backoff steps (5ms, 10ms, ... doubling).
	window := 5 * time.Second
	startStuck, startFlaky := len(h.rec.records("stuck")), len(h.rec.records("flaky"))
	time.Sleep(window)
	stuck, flaky := h.rec.records("stuck"), h.rec.records("flaky")
	t.Logf("reconciles: terminal %d (window +%d), transient %d (window +%d)", len(stuck), len(stuck)-startStuck, len(flaky), len(flaky)-startFlaky)
	if len(stuck) > 2 || len(stuck)-startStuck != 0 {
		t.Fatalf("terminal error reconciled %d times (+%d in %s): hot loop", len(stuck), len(stuck)-startStuck, window)
	}
	if len(flaky)-startFlaky < 3 {
		t.Fatalf("control: transient error reconciled only %d times in %s; the window cannot detect retries", len(flaky)-startFlaky, window)
	}
	r := stuck[0]
	if r.class != outcome.ClassTerminal || !errors.Is(r.err, reconcile.TerminalError(nil)) || !r.sentStatus {
		t.Fatalf("terminal reconcile: %+v", r)
	}
	g := getGizmo(ctx, t, ns, "stuck")
	st := conditions.Get(g, conditions.Stalled)
	if st.Reason != "UnsupportedMode" || st.Message != `mode "terminal" is not supported` || st.ObservedGeneration != g.Generation {
		t.Fatalf("Stalled = %+v", st)
	}
	if !conditions.IsFalse(g, conditions.Ready) || conditions.Get(g, conditions.Reconciling) != nil {
		t.Fatalf("conditions %+v", g.Status.Conditions)
	}
	if ks := kstatusOf(t, g); ks != status.FailedStatus {
		t.Fatalf("kstatus %s, want Failed", ks)
	}
	if fl := getGizmo(ctx, t, ns, "flaky"); !conditions.IsTrue(fl, conditions.Reconciling) || conditions.Get(fl, conditions.Reconciling).Reason != "TransientError" {
		t.Fatalf("transient object conditions %+v", fl.Status.Conditions)
	}

	// A spec change bumps the generation: the object is reconciled again.
	g.Spec.Mode = "ok"
	if err := env.Client.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "Ready=True after the spec change", func() (bool, error) {
		g = getGizmo(ctx, t, ns, "stuck")
		return conditions.IsTrue(g, conditions.Ready) && conditions.Get(g, conditions.Stalled) == nil, nil
	})
	// The reconcile is recorded when it returns, which can be just after its
	// status write became visible: wait for the record, then require exactly one.
	eventually(t, 10*time.Second, "the reconcile after the spec change recorded", func() (bool, error) {
		return len(h.rec.records("stuck")) > len(stuck), nil
	})
	if n := len(h.rec.records("stuck")); n != len(stuck)+1 {
		t.Fatalf("want exactly one more reconcile after the spec change, got %d more", n-len(stuck))
	}
	if g.Status.ObservedGeneration != g.Generation || conditions.IsStale(g) || kstatusOf(t, g) != status.CurrentStatus {
		t.Fatalf("after recovery: observedGeneration %d generation %d, kstatus %s", g.Status.ObservedGeneration, g.Generation, kstatusOf(t, g))
	}
}

// TestConflictRequeuesQuietly: a real 409 makes the controller requeue with no
// error and no condition change; the retry comes from the requeue alone (the
// other writer's metadata change is filtered out by the predicate).
func TestConflictRequeuesQuietly(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	h := startManager(t, ns)
	if err := env.Client.Create(ctx, newGizmo(ns, "contended", "conflict")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "Ready after the conflict", func() (bool, error) {
		return conditions.IsTrue(getGizmo(ctx, t, ns, "contended"), conditions.Ready), nil
	})
	// The retry's record is appended after its status write returns, so
	// Ready can be visible a moment before it: wait for the record too.
	eventually(t, 30*time.Second, "the retry's reconcile record", func() (bool, error) {
		return len(h.rec.records("contended")) >= 2, nil
	})
	recs := h.rec.records("contended")
	if len(recs) != 2 {
		t.Fatalf("want 2 reconciles (conflict, retry), got %d: %+v", len(recs), recs)
	}
	c := recs[0]
	if c.class != outcome.ClassConflict {
		t.Fatalf("first reconcile classified %v, want Conflict", c.class)
	}
	if c.err != nil || c.result.RequeueAfter != outcome.ConflictRequeueAfter {
		t.Fatalf("conflict result %+v, %v; want a quiet requeue", c.result, c.err)
	}
	if c.sentStatus || !reflect.DeepEqual(c.before, c.after) {
		t.Fatalf("conflict changed conditions (sent=%v): %+v -> %+v", c.sentStatus, c.before, c.after)
	}
	if h.counter.Count("patch", "gizmos.conditions.test.opkit.dev/status") != 1 {
		t.Fatalf("want exactly one status write (by the retry):\n%s", h.counter)
	}
}

// TestSteadyStateMakesNoRequests: once the status is right, a reconcile with
// nothing new reads from the cache and writes nothing.
func TestSteadyStateMakesNoRequests(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	h := startManager(t, ns)
	if err := env.Client.Create(ctx, newGizmo(ns, "calm", "ok")); err != nil {
		t.Fatal(err)
	}
	var server *Gizmo
	eventually(t, 30*time.Second, "Ready on the server", func() (bool, error) {
		server = getGizmo(ctx, t, ns, "calm")
		return conditions.IsTrue(server, conditions.Ready), nil
	})
	// The record of the reconcile that wrote Ready is appended after its
	// status write returns: wait for it, or it would be taken for the first
	// steady-state reconcile below (CI raced once on this).
	eventually(t, 30*time.Second, "the writing reconcile's record", func() (bool, error) {
		return slices.ContainsFunc(h.rec.records("calm"), func(r record) bool { return r.sentStatus }), nil
	})
	// Wait until the cache has seen our own status write; otherwise the next
	// reconcile would legitimately re-send it.
	eventually(t, 30*time.Second, "cache caught up", func() (bool, error) {
		cached := &Gizmo{}
		err := h.cache.Get(ctx, client.ObjectKeyFromObject(server), cached)
		return err == nil && cached.ResourceVersion == server.ResourceVersion, err
	})
	for i := range 3 {
		before := len(h.rec.records("calm"))
		h.counter.Reset()
		h.trigger <- event.GenericEvent{Object: server}
		eventually(t, 30*time.Second, "triggered reconcile", func() (bool, error) {
			return len(h.rec.records("calm")) > before, nil
		})
		rec := h.rec.records("calm")[before]
		if rec.err != nil || rec.sentStatus || !reflect.DeepEqual(rec.before, rec.after) {
			t.Fatalf("steady-state reconcile %d: err %v sent %v", i, rec.err, rec.sentStatus)
		}
		if h.counter.Writes() != 0 || h.counter.Verb("get") != 0 || h.counter.Verb("list") != 0 {
			t.Fatalf("steady-state reconcile %d made requests:\n%s", i, h.counter)
		}
	}
	if after := getGizmo(ctx, t, ns, "calm"); after.ResourceVersion != server.ResourceVersion {
		t.Fatalf("object changed during steady state: %s -> %s", server.ResourceVersion, after.ResourceVersion)
	}
}

// TestServerAgreesWithSet: everything Set writes is accepted by an API server
// that validates conditions like metav1.Condition (testdata/gizmos.yaml), and
// reading it back changes nothing, so StatusPatcher sends nothing the second
// time. The raw control shows the server really enforces those rules.
func TestServerAgreesWithSet(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	cfg, counter := testenv.CountRequests(env.Config)
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{newGizmo(ns, "typed", ""), func() client.Object {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gizmoGV.WithKind("Gizmo"))
		u.SetNamespace(ns)
		u.SetName("unstructured")
		return u
	}()} {
		t.Run(fmt.Sprintf("%T", obj), func(t *testing.T) {
			if err := c.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
			p := conditions.NewStatusPatcher(obj)
			huge := strings.Repeat("ü", 40000) + "\xff"
			for _, cond := range []metav1.Condition{
				{Type: "Ready", Status: "False", Reason: "A1:b,c_D", Message: huge},
				{Type: "example.com/DatabaseReady", Status: "Unknown", Reason: "X"},
			} {
				if err := conditions.Set(obj, cond); err != nil {
					t.Fatal(err)
				}
			}
			if err := conditions.SetObservedGeneration(obj); err != nil {
				t.Fatal(err)
			}
			if sent, err := p.Patch(ctx, c, obj); err != nil || !sent {
				t.Fatalf("first patch: sent=%v err=%v", sent, err)
			}
			counter.Reset()
			// The same writes again, from the server's copy: nothing to send.
			if err := conditions.Set(obj, metav1.Condition{Type: "Ready", Status: "False", Reason: "A1:b,c_D", Message: huge}); err != nil {
				t.Fatal(err)
			}
			if err := conditions.MarkReady(obj, "Done", ""); err != nil {
				t.Fatal(err)
			}
			if err := conditions.Set(obj, metav1.Condition{Type: "Ready", Status: "False", Reason: "A1:b,c_D", Message: huge}); err != nil {
				t.Fatal(err)
			}
			if sent, err := p.Patch(ctx, c, obj); err == nil && sent {
				t.Fatalf("unchanged status was sent")
			} else if err != nil {
				t.Fatal(err)
			}
			if counter.Total() != 0 {
				t.Fatalf("unchanged status made requests:\n%s", counter)
			}
			if err := conditions.Set(obj, metav1.Condition{Type: "Ready", Status: "False", Reason: "bad reason"}); err == nil {
				t.Fatal("invalid reason accepted by Set")
			}
			if counter.Total() != 0 {
				t.Fatalf("invalid condition reached the server:\n%s", counter)
			}
		})
	}
	t.Run("control: the server rejects an invalid reason", func(t *testing.T) {
		raw := `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"bad reason","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
		err := c.Status().Patch(ctx, newGizmo(ns, "typed", ""), client.RawPatch(types.MergePatchType, []byte(raw)))
		if err == nil || !strings.Contains(err.Error(), "reason") {
			t.Fatalf("want the server to reject the reason, got %v", err)
		}
	})
	t.Run("optimistic lock turns a lost update into a Conflict", func(t *testing.T) {
		g := getGizmo(ctx, t, ns, "typed")
		p := conditions.NewStatusPatcher(g, conditions.WithOptimisticLock())
		other := g.DeepCopyObject().(*Gizmo)
		if err := conditions.Set(other, metav1.Condition{Type: "Other", Status: "True", Reason: "Writer"}); err != nil {
			t.Fatal(err)
		}
		if err := c.Status().Update(ctx, other); err != nil {
			t.Fatal(err)
		}
		if err := conditions.MarkReady(g, "Done", ""); err != nil {
			t.Fatal(err)
		}
		_, err := p.Patch(ctx, c, g)
		if cl := outcome.Classify(err); cl.Class != outcome.ClassConflict {
			t.Fatalf("want Conflict, got %v (%v)", cl.Class, err)
		}
	})
}

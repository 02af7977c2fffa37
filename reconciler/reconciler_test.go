package reconciler_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/opkit/opkit/conditions"
	bucketv1 "github.com/opkit/opkit/examples/bucket/api/v1"
	dbv1 "github.com/opkit/opkit/examples/database/api/v1"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/phase"
	"github.com/opkit/opkit/reconciler"
	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := addGadgets(s); err != nil {
		panic(err)
	}
	for _, add := range []func(*runtime.Scheme) error{webappv1.AddToScheme, bucketv1.AddToScheme, dbv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	os.Exit(testenv.RunMain(m, &env, testenv.WithScheme(s), testenv.WithCRDPaths("testdata",
		"../examples/webapp/config/crd", "../examples/bucket/config/crd", "../examples/database/config/crd")))
}

func newGadget() *Gadget { return &Gadget{} }

// startManager runs a manager scoped to ns whose requests the returned counter counts.
func startManager(t *testing.T, ns string, setup func(mgr manager.Manager, obs *observability.Observability) error) *testenv.RequestCounter {
	t.Helper()
	return startManagerWith(t, ns, nil, setup)
}

// startManagerWith is startManager with edit applied to the manager's
// options first.
func startManagerWith(t *testing.T, ns string, edit func(*manager.Options), setup func(mgr manager.Manager, obs *observability.Observability) error) *testenv.RequestCounter {
	t.Helper()
	cfg, requests := testenv.CountRequests(env.Config)
	opts := manager.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		NewCache:               reconciler.NewCache,
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	}
	if edit != nil {
		edit(&opts)
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := observability.Setup(mgr, observability.WithRegisterer(prometheus.NewRegistry()), observability.WithoutHealthChecks())
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr, obs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return requests
}

// waitFor polls cond with testenv.WaitForEvery (every 50ms).
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	testenv.WaitForEvery(t, 50*time.Millisecond, timeout, what, cond)
}

func get(t *testing.T, g *Gadget) func() error {
	return func() error { return env.Client.Get(context.Background(), client.ObjectKeyFromObject(g), g) }
}

// desiredConfigMap declares one ConfigMap holding the gadget's value; the
// value "invalid" is a terminal error, as an invalid spec would be.
func desiredConfigMap(calls *atomic.Int32) reconciler.DesiredFunc[*Gadget] {
	return func(_ context.Context, g *Gadget) ([]client.Object, error) {
		calls.Add(1)
		if g.Spec.Value == "invalid" {
			return nil, outcome.Terminal("InvalidValue", errors.New(`spec.value "invalid" is not allowed`))
		}
		return []client.Object{&corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.Name + "-data"},
			Data:       map[string]string{"value": g.Spec.Value},
		}}, nil
	}
}

// gadgetConfigMaps sets up the plain gadget controller: one ConfigMap per
// Gadget (desiredConfigMap, counting into calls), Ready when it is ensured.
func gadgetConfigMaps(calls *atomic.Int32) func(manager.Manager, *observability.Observability) error {
	return func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, "gadget", newGadget).
			Owns(&corev1.ConfigMap{}).
			Children(desiredConfigMap(calls)).
			Status(markReady).
			Observability(obs).
			Complete()
	}
}

func markReady(_ context.Context, g *Gadget, _ reconciler.Observed) error {
	return conditions.MarkReady(g, "Synced", "the ConfigMap holds the value")
}

func TestSkeletonConvergesThenCostsNothing(t *testing.T) {
	ns := env.Namespace(t)
	var calls atomic.Int32
	var released atomic.Int32
	requests := startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, "gadget", newGadget).
			Owns(&corev1.ConfigMap{}).
			Finalizer("test.opkit.dev/cleanup", finalizer.WithStep("release", func(context.Context, *Gadget) (finalizer.StepResult, error) {
				released.Add(1)
				return finalizer.Done(), nil
			})).
			Children(desiredConfigMap(&calls)).
			Status(markReady).
			Observability(obs).
			Complete()
	})
	g := &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g1"}, Spec: GadgetSpec{Value: "one"}}
	if err := env.Client.Create(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "Ready", func() (bool, error) {
		err := get(t, g)()
		return conditions.IsTrue(g, conditions.Ready) && g.Status.ObservedGeneration == g.Generation, err
	})
	if len(g.Finalizers) != 1 || g.Finalizers[0] != "test.opkit.dev/cleanup" {
		t.Fatalf("finalizers = %v", g.Finalizers)
	}
	var cm corev1.ConfigMap
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "g1-data"}, &cm); err != nil || cm.Data["value"] != "one" {
		t.Fatalf("child: %v %v", err, cm.Data)
	}

	// A resync with nothing new: the reconcile runs and makes no request at all.
	time.Sleep(time.Second)
	requests.Reset()
	before := calls.Load()
	g.Annotations = map[string]string{"touch": "1"}
	if err := env.Client.Update(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a reconcile after the annotation change", func() (bool, error) { return calls.Load() > before, nil })
	time.Sleep(500 * time.Millisecond)
	if n := requests.Total(); n != 0 {
		t.Fatalf("a steady-state reconcile made %d requests:\n%s", n, requests)
	}

	// Spec change: one child update and one status write.
	g.Spec.Value = "two"
	if err := env.Client.Update(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "child updated", func() (bool, error) {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(&cm), &cm)
		return cm.Data["value"] == "two", err
	})

	if err := env.Client.Delete(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "gadget gone", func() (bool, error) {
		err := get(t, g)()
		return apierrors.IsNotFound(err), nil
	})
	if released.Load() != 1 {
		t.Fatalf("release step ran %d times, want 1", released.Load())
	}
}

func TestTerminalErrorStallsWithoutHotLoop(t *testing.T) {
	ns := env.Namespace(t)
	var calls atomic.Int32
	startManager(t, ns, gadgetConfigMaps(&calls))
	g := &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}, Spec: GadgetSpec{Value: "invalid"}}
	if err := env.Client.Create(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "Stalled", func() (bool, error) {
		err := get(t, g)()
		return conditions.IsTrue(g, conditions.Stalled), err
	})
	st := conditions.Get(g, conditions.Stalled)
	if st.Reason != "InvalidValue" || st.Message == "" || !conditions.IsFalse(g, conditions.Ready) {
		t.Fatalf("stalled condition %+v; ready %+v", st, conditions.Get(g, conditions.Ready))
	}
	settled := calls.Load()
	time.Sleep(3 * time.Second)
	if extra := calls.Load() - settled; extra > 0 {
		t.Fatalf("terminal error reconciled %d more times in 3s: a hot loop", extra)
	}
	// Fixing the spec (a new generation) resumes.
	g.Spec.Value = "fixed"
	if err := env.Client.Update(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "Ready after the fix", func() (bool, error) {
		err := get(t, g)()
		return conditions.IsTrue(g, conditions.Ready) && conditions.Get(g, conditions.Stalled) == nil, err
	})
	t.Logf("reconciles: %d while stalled (settled), %d in total", settled, calls.Load())
}

func TestStatusOnlyUpdatesDoNotReconcile(t *testing.T) {
	ns := env.Namespace(t)
	var calls atomic.Int32
	startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, "gadget", newGadget).
			Children(desiredConfigMap(&calls)).
			Status(markReady).
			Observability(obs).
			Complete()
	})
	g := &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quiet"}, Spec: GadgetSpec{Value: "v"}}
	if err := env.Client.Create(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "Ready", func() (bool, error) {
		err := get(t, g)()
		return conditions.IsTrue(g, conditions.Ready), err
	})
	time.Sleep(time.Second)
	before := calls.Load()
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"status":{"phase":"poked"}}`))
	if err := env.Client.Status().Patch(context.Background(), g, patch); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if calls.Load() != before {
		t.Fatalf("a status-only update triggered %d reconciles", calls.Load()-before)
	}
}

func TestPhaseMachineThenDeletionHandsOverToFinalizer(t *testing.T) {
	ns := env.Namespace(t)
	var mu sync.Mutex
	var order []string
	record := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	machine := phase.New[*Gadget]("gadget").
		Initial(phase.Pending).
		On(phase.Pending, func(context.Context, *Gadget) (phase.Outcome, error) {
			record("pending")
			return phase.Next(phase.Provisioning), nil
		}, phase.To(phase.Provisioning)).
		On(phase.Provisioning, func(_ context.Context, g *Gadget) (phase.Outcome, error) {
			if g.Spec.Gate != "open" {
				return phase.Wait(), nil
			}
			record("provisioning")
			return phase.Next(phase.Ready), nil
		}, phase.To(phase.Ready)).
		On(phase.Ready, func(context.Context, *Gadget) (phase.Outcome, error) { return phase.Wait(), nil }).
		OnDelete(phase.Deleting, func(context.Context, *Gadget) (phase.Outcome, error) {
			record("deleting-phase")
			return phase.Done(), nil
		})
	var gather prometheus.Gatherer
	startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		gather, _ = obs.Registerer().(prometheus.Gatherer)
		return reconciler.For(mgr, "gadget", newGadget).
			Phases(machine).
			Finalizer("test.opkit.dev/cleanup", finalizer.WithStep("release", func(context.Context, *Gadget) (finalizer.StepResult, error) {
				record("finalizer-step")
				return finalizer.Done(), nil
			})).
			Observability(obs).
			Complete()
	})
	g := &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "staged"}}
	if err := env.Client.Create(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "waiting in Provisioning", func() (bool, error) {
		err := get(t, g)()
		return g.Status.Phase == string(phase.Provisioning) && conditions.IsTrue(g, conditions.Reconciling), err
	})
	g.Spec.Gate = "open"
	if err := env.Client.Update(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "Ready phase", func() (bool, error) {
		err := get(t, g)()
		return g.Status.Phase == string(phase.Ready) && conditions.IsTrue(g, conditions.Ready), err
	})
	if err := env.Client.Delete(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "gone", func() (bool, error) {
		return apierrors.IsNotFound(get(t, g)()), nil
	})
	mu.Lock()
	defer mu.Unlock()
	want := []string{"pending", "provisioning", "deleting-phase", "finalizer-step"}
	if len(order) != len(want) {
		t.Fatalf("order = %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order = %v, want %v", order, want)
		}
	}
	// The builder wired the phase machine's and the finalizer's own metrics
	// (and the reconcile metrics) on the registerer Observability uses.
	fams, err := gather.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range fams {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "gadget" {
					have[mf.GetName()] = true
				}
			}
		}
	}
	for _, name := range []string{"opkit_phase_transitions_total", "opkit_phase_duration_seconds", "opkit_finalizer_cleanup_duration_seconds", "opkit_reconcile_total"} {
		if !have[name] {
			t.Errorf("%s{controller=\"gadget\"} not recorded on the reconciler path; have %v", name, have)
		}
	}
}

// TestOwnWriteEventsDoNotReconcileTheOwner: with WithoutOwnWriteEvents the
// reconcile that creates or patches a child is not followed by another one
// for that write's event, while a change by anybody else and a delete of the
// child still reconcile the owner, once each: the repair's own write wakes it
// no more. Without the option each of these steps costs one reconcile more.
func TestOwnWriteEventsDoNotReconcileTheOwner(t *testing.T) {
	ns := env.Namespace(t)
	var calls atomic.Int32
	startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, "gadget", newGadget).
			Owns(&corev1.ConfigMap{}, reconciler.WithoutOwnWriteEvents()).
			Children(desiredConfigMap(&calls)).
			Status(markReady).
			Observability(obs).
			Complete()
	})
	ctx := context.Background()
	settled := func(what string, want int32) {
		t.Helper()
		time.Sleep(time.Second)
		if n := calls.Load(); n != want {
			t.Fatalf("%s: %d reconciles in all, want %d", what, n, want)
		}
	}
	g := &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g1"}, Spec: GadgetSpec{Value: "one"}}
	if err := env.Client.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "Ready", func() (bool, error) {
		err := get(t, g)()
		return conditions.IsTrue(g, conditions.Ready) && g.Status.ObservedGeneration == g.Generation, err
	})
	settled("after the create", 1)

	var cm corev1.ConfigMap
	key := client.ObjectKey{Namespace: ns, Name: "g1-data"}
	value := func(want string) func() (bool, error) {
		return func() (bool, error) {
			err := env.Client.Get(ctx, key, &cm)
			return err == nil && cm.Data["value"] == want, client.IgnoreNotFound(err)
		}
	}
	g.Spec.Value = "two"
	if err := env.Client.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the child patched", value("two"))
	settled("after a spec change", 2)

	cm.Data["value"] = "drifted"
	if err := env.Client.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the drift corrected", value("two"))
	settled("after a change of the child by someone else", 3)

	if err := env.Client.Delete(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the child created again", value("two"))
	settled("after a delete of the child", 4)
}

// TestChildResyncDoesNotReconcileTheOwner: informers resyncing every second
// hand every cached object to the handlers again as an update carrying the
// resourceVersion the informer already had — what a relist after a broken
// watch or an API server restart does for every unchanged object. Such an
// update of a child is no news and reconciles nothing (T's own is dropped by
// the default predicate).
func TestChildResyncDoesNotReconcileTheOwner(t *testing.T) {
	ns := env.Namespace(t)
	var calls atomic.Int32
	startManagerWith(t, ns, func(o *manager.Options) { o.Cache.SyncPeriod = ptr.To(time.Second) }, gadgetConfigMaps(&calls))
	g := &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g1"}, Spec: GadgetSpec{Value: "one"}}
	if err := env.Client.Create(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "Ready", func() (bool, error) {
		err := get(t, g)()
		return conditions.IsTrue(g, conditions.Ready) && g.Status.ObservedGeneration == g.Generation, err
	})
	time.Sleep(time.Second)
	settled := calls.Load()
	time.Sleep(3500 * time.Millisecond) // three resyncs of the Gadget and its ConfigMap
	if extra := calls.Load() - settled; extra > 0 {
		t.Fatalf("%d reconciles during 3.5s of resyncs with nothing changed, want 0", extra)
	}
	// A real change of the child still reconciles the owner (drift corrected).
	var cm corev1.ConfigMap
	key := client.ObjectKey{Namespace: ns, Name: "g1-data"}
	if err := env.Client.Get(context.Background(), key, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["value"] = "drifted"
	if err := env.Client.Update(context.Background(), &cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "drift corrected", func() (bool, error) {
		err := env.Client.Get(context.Background(), key, &cm)
		return cm.Data["value"] == "one", err
	})
}

package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/testenv"
	"github.com/opkit/opkit/testenv/chaos"
)

// plainLabel marks the ConfigMaps plainReconciler owns (not, e.g., the
// kube-root-ca.crt ConfigMap kube-controller-manager keeps in every namespace).
const plainLabel = "chaos.opkit.dev/plain"

// plainReconciler is an operator written with controller-runtime alone: it
// marks every labelled ConfigMap seen (one patch, then nothing) and panics
// once, on the first reconcile of the ConfigMap named "boom".
type plainReconciler struct {
	c        client.Client
	panicked atomic.Bool
}

func (r *plainReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cm corev1.ConfigMap
	if err := r.c.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if req.Name == "boom" && r.panicked.CompareAndSwap(false, true) {
		panic("kaboom")
	}
	if cm.Data["seen"] == "yes" {
		return reconcile.Result{}, nil
	}
	base := cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data["seen"] = "yes"
	return reconcile.Result{}, r.c.Patch(ctx, &cm, client.MergeFrom(base))
}

// A controller-runtime operator with no opkit code is monitored two ways:
// from controller-runtime's own reconcile log lines (the manager's logger)
// and by chaos's reconciler wrapper. Both see every reconcile of every
// object and the one panic, and agree with controller-runtime's metrics.
func TestMonitorPlainControllerRuntime(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxFor(t, 2*time.Minute)
	name := "plain-" + ns
	panics0, err := chaos.ControllerPanics(crmetrics.Registry, name)
	if err != nil {
		t.Fatal(err)
	}
	fromLogs, fromWrap := chaos.NewReconcileMonitor(), chaos.NewReconcileMonitor()
	cfg, counter := testenv.CountRequests(env.Config)
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Logger:                 fromLogs.Logger(logr.Discard()),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &plainReconciler{c: mgr.GetClient()}
	owned := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[plainLabel] == "yes" })
	if err := ctrl.NewControllerManagedBy(mgr).Named(name).For(&corev1.ConfigMap{}, builder.WithPredicates(owned)).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 2}).
		Complete(fromWrap.Wrap(r)); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := mgr.Start(mctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })

	names := []string{"a", "b", "boom"}
	for _, n := range names {
		obj := cm(ns, n)
		obj.Labels = map[string]string{plainLabel: "yes"}
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: n} }
	// agree is true once nothing runs and both monitors and
	// controller_runtime_reconcile_total counted the same reconciles.
	agree := func() (bool, error) {
		total, err := chaos.ControllerReconciles(crmetrics.Registry, name)
		if err != nil {
			return false, err
		}
		if fromLogs.InFlight() != 0 || fromWrap.InFlight() != 0 || fromLogs.Total() != fromWrap.Total() || float64(fromLogs.Total()) != total {
			return false, fmt.Errorf("logs %d (%d running), wrapper %d (%d running), controller_runtime_reconcile_total %v",
				fromLogs.Total(), fromLogs.InFlight(), fromWrap.Total(), fromWrap.InFlight(), total)
		}
		return true, nil
	}
	waitFor(t, time.Minute, "every ConfigMap seen, boom after its panic, all counts agreeing", func() (bool, error) {
		for _, n := range names {
			var got corev1.ConfigMap
			if err := env.Client.Get(ctx, key(n), &got); err != nil || got.Data["seen"] != "yes" {
				return false, err
			}
		}
		return agree()
	})
	for _, n := range names {
		if fromLogs.Reconciles(key(n)) == 0 {
			t.Errorf("%s: no reconcile seen in the logs", n)
		}
	}
	if n := fromLogs.Reconciles(key("boom")); n < 2 {
		t.Errorf("boom: %d reconciles seen in the logs, want the panic and its retry", n)
	}

	// The log feed times a reconcile well enough for Pass and Idempotent.
	touches := 0
	touch := func(ctx context.Context) error {
		touches++
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"chaos.opkit.dev/touch":"%d"}}}`, touches)
		return env.Client.Patch(ctx, cm(ns, "a"), client.RawPatch(types.MergePatchType, patch))
	}
	if err := chaos.Idempotent(ctx, counter, fromLogs.Pass(key("a"), touch)); err != nil {
		t.Error(err)
	}
	waitFor(t, 30*time.Second, "counts agreeing after the idempotence passes", agree)
	logs, wrapped := fromLogs.Since(chaos.Mark{}), fromWrap.Since(chaos.Mark{})
	if fmt.Sprint(logs) != fmt.Sprint(wrapped) {
		t.Errorf("reconciles per object differ: logs %v, wrapper %v", logs, wrapped)
	}
	if logs[key("a")] < 3 {
		t.Errorf("a: %d reconciles, want its create and the two touches at least", logs[key("a")])
	}

	if d, err := chaos.ControllerPanics(crmetrics.Registry, name); err != nil || d-panics0 != 1 {
		t.Errorf("controller_runtime_reconcile_panics_total grew by %v (%v), want 1", d-panics0, err)
	}
	for feed, mon := range map[string]*chaos.ReconcileMonitor{"logs": fromLogs, "wrapper": fromWrap} {
		err := mon.CheckNoPanic()
		if err == nil || !strings.Contains(err.Error(), "1 reconciles panicked") || !strings.Contains(err.Error(), ns+"/boom: kaboom") {
			t.Errorf("%s: want the one panic of %s/boom, got %v", feed, ns, err)
		}
		if err := errors.Join(mon.CheckNoOverlap(), mon.CheckNoHotLoop(chaos.Mark{}, 10)); err != nil {
			t.Errorf("%s: %v", feed, err)
		}
	}
}

// The log feed against the exact lines controller-runtime writes, including
// the panic that is not recovered (which would end a real test binary), and
// lines passed on to the inner logger unchanged, at its own verbosity.
func TestMonitorLoggerLines(t *testing.T) {
	var inner []string
	mon := chaos.NewReconcileMonitor()
	base := mon.Logger(funcr.New(func(prefix, args string) { inner = append(inner, prefix+" "+args) }, funcr.Options{Verbosity: 1})).
		WithName("ctrl").WithValues("controller", "plain")
	req := func(name, id string) logr.Logger {
		return base.WithValues("namespace", "ns", "name", name).WithValues("reconcileID", types.UID(id))
	}
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}

	l := req("a", "r1")
	l.V(5).Info("Reconciling")
	l.V(5).Info("Reconciling") // the reconciler, through the context's logger
	l.Info("user line", "k", "v")
	if mon.InFlight() != 1 || mon.Reconciles(a) != 1 {
		t.Fatalf("after Reconciling: %d in flight, %d reconciles of a; want 1, 1", mon.InFlight(), mon.Reconciles(a))
	}
	l.V(5).Info("Reconcile done, requeueing after 1s")
	l.V(5).Info("Reconcile successful") // a second end of r1 changes nothing
	if mon.InFlight() != 0 {
		t.Fatalf("after the end: %d in flight", mon.InFlight())
	}
	for _, end := range []func(logr.Logger){
		func(l logr.Logger) { l.V(5).Info("Reconcile successful") },
		func(l logr.Logger) { l.V(5).Info("Reconcile done, requeueing") },
		func(l logr.Logger) { l.Error(errors.New("conflict"), "Reconciler error") },
		func(l logr.Logger) { l.Error(errors.New("panic: first [recovered]"), "Reconciler error") },
		func(l logr.Logger) { l.Info("Observed a panic in reconciler: second") },
	} {
		l := req("b", fmt.Sprintf("b%d", mon.Reconciles(b)))
		l.V(5).Info("Reconciling")
		end(l)
	}
	base.WithValues("reconcileID", "no-request").V(5).Info("Reconciling") // no object: not a reconcile.Request
	if mon.InFlight() != 0 || mon.Reconciles(b) != 5 || mon.Total() != 6 {
		t.Fatalf("%d in flight, %d reconciles of b, %d in all; want 0, 5, 6", mon.InFlight(), mon.Reconciles(b), mon.Total())
	}
	err := mon.CheckNoPanic()
	if err == nil || !strings.Contains(err.Error(), "2 reconciles panicked") || !strings.Contains(err.Error(), "ns/b: first") || !strings.Contains(err.Error(), "ns/b: second") {
		t.Fatalf("want the recovered and the unrecovered panic, got %v", err)
	}
	got := strings.Join(inner, "\n")
	for _, want := range []string{`"msg"="user line" "controller"="plain" "namespace"="ns" "name"="a" "reconcileID"="r1" "k"="v"`, `"msg"="Reconciler error" "error"="conflict"`, `ctrl`} {
		if !strings.Contains(got, want) {
			t.Errorf("inner logger did not get %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Reconciling") || len(inner) != 4 {
		t.Errorf("inner logger (verbosity 1) got %d lines, want the 4 at verbosity ≤ 1:\n%s", len(inner), got)
	}
}

// testenv and testenv/chaos serve operators written with controller-runtime
// alone: their non-test code imports no opkit package outside testenv/.
func TestTestenvImportsNoOpkitLibrary(t *testing.T) {
	const module = "github.com/opkit/opkit"
	root := ".." // testenv/
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(path, 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return nil
		}
		if err != nil {
			return err
		}
		checked++
		for _, imp := range pkg.Imports {
			if (imp == module || strings.HasPrefix(imp, module+"/")) && imp != module+"/testenv" && !strings.HasPrefix(imp, module+"/testenv/") {
				t.Errorf("%s (%s) imports %s", pkg.Name, path, imp)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 3 {
		t.Fatalf("checked %d packages under testenv/, want testenv, testenv/assets and testenv/chaos at least", checked)
	}
}

func ExampleReconcileMonitor_Wrap() {
	mon := chaos.NewReconcileMonitor()
	r := mon.Wrap(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		panic("boom")
	}))
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}}
	func() {
		defer func() { _ = recover() }() // controller-runtime recovers it by default
		_, _ = r.Reconcile(context.Background(), req)
	}()
	fmt.Println(mon.Reconciles(req.NamespacedName), mon.InFlight())
	fmt.Println(mon.CheckNoPanic())
	// Output:
	// 1 0
	// chaos: 1 reconciles panicked: ns/a: boom
}

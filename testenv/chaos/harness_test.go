package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/testenv"
	"github.com/opkit/opkit/testenv/chaos"
)

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func cm(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func TestRulesRejectBadInput(t *testing.T) {
	cases := map[string]struct {
		rule chaos.Rule
		want string
	}{
		"unknown verb":         {chaos.Rule{Verbs: []string{"fetch"}, Fault: chaos.Conflict()}, `unknown verb "fetch"`},
		"upper-case verb":      {chaos.Rule{Verbs: []string{"GET"}, Fault: chaos.Conflict()}, `unknown verb "GET"`},
		"no fault":             {chaos.Rule{Verbs: []string{"get"}}, "no fault"},
		"probability above 1":  {chaos.Rule{Probability: 1.5, Fault: chaos.Conflict()}, "probability 1.5"},
		"negative probability": {chaos.Rule{Probability: -0.1, Fault: chaos.Conflict()}, "probability -0.1"},
		"negative count":       {chaos.Rule{Count: -1, Fault: chaos.Conflict()}, "negative count"},
		"4xx server error":     {chaos.Rule{Fault: chaos.ServerError(404)}, "status 404"},
		"non-error status":     {chaos.Rule{Fault: chaos.ServerError(200)}, "not an error status"},
		"zero hang":            {chaos.Rule{Fault: chaos.Hang(0)}, "hang 0s"},
		"unbounded hang":       {chaos.Rule{Fault: chaos.Hang(time.Hour)}, "hang 1h0m0s"},
		"negative Retry-After": {chaos.Rule{Fault: chaos.TooManyRequests(-time.Second)}, "negative Retry-After"},
		"path as resource":     {chaos.Rule{Resources: []string{"/api/v1/configmaps"}, Fault: chaos.Conflict()}, "not of the form"},
		"empty resource":       {chaos.Rule{Resources: []string{""}, Fault: chaos.Conflict()}, "not of the form"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := chaos.InjectErrors(&rest.Config{Host: "https://127.0.0.1:1"}, 1, chaos.Rule{Fault: chaos.Conflict()}, tc.rule)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "rule 1") {
				t.Fatalf("want an error naming rule 1 and %q, got %v", tc.want, err)
			}
		})
	}
	if _, _, err := chaos.InjectErrors(&rest.Config{}, 1, chaos.Rule{Verbs: chaos.Verbs, Probability: 1, Count: 3, Fault: chaos.Hang(chaos.MaxHang)}); err != nil {
		t.Fatalf("valid rule rejected: %v", err)
	}
}

func TestInjectedErrorsLookLikeTheServers(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxFor(t, time.Minute)
	create := []string{"create"}
	res := []string{"configmaps"}
	cases := []struct {
		name   string
		fault  chaos.Fault
		check  func(error) bool
		exists bool // whether the object exists afterwards
	}{
		{"conflict", chaos.Conflict(), apierrors.IsConflict, false},
		{"internal error", chaos.ServerError(500), apierrors.IsInternalError, false},
		{"unavailable", chaos.ServerError(503), apierrors.IsServiceUnavailable, false},
		{"server timeout", chaos.ServerTimeout(), apierrors.IsTimeout, false},
		{"client timeout", chaos.Hang(200 * time.Millisecond), func(err error) bool { return strings.Contains(fmt.Sprint(err), "injected timeout") }, false},
		{"connection reset", chaos.ConnectionReset(), func(err error) bool { return errors.Is(err, syscall.ECONNRESET) }, false},
		{"lost response", chaos.LostResponse(), func(err error) bool { return strings.Contains(fmt.Sprint(err), "response lost") }, true},
		// client-go waits Retry-After and retries: the caller sees success.
		{"too many requests", chaos.TooManyRequests(time.Second), func(err error) bool { return err == nil }, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, inj, err := chaos.InjectErrors(env.Config, 1, chaos.Rule{Verbs: create, Resources: res, Count: 1, Fault: tc.fault})
			if err != nil {
				t.Fatal(err)
			}
			c := newClient(t, cfg)
			obj := cm(ns, fmt.Sprintf("c%d", i))
			t0 := time.Now()
			err = c.Create(ctx, obj)
			if !tc.check(err) {
				t.Fatalf("%s: unexpected error %v", tc.fault, err)
			}
			if tc.name == "too many requests" && time.Since(t0) < 900*time.Millisecond {
				t.Errorf("client-go did not wait Retry-After: %s", time.Since(t0))
			}
			if n := inj.InjectedFor("create", "configmaps"); n != 1 {
				t.Fatalf("injected %d faults, want 1:\n%s", n, inj)
			}
			gerr := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), &corev1.ConfigMap{})
			if tc.exists != (gerr == nil) {
				t.Fatalf("object exists=%v after %s, want %v (%v)", gerr == nil, tc.fault, tc.exists, gerr)
			}
			// The count is used up: the next request passes.
			if err := c.Create(ctx, cm(ns, fmt.Sprintf("d%d", i))); err != nil {
				t.Fatalf("second create: %v", err)
			}
		})
	}
}

func TestRulesSelectVerbAndResource(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxFor(t, time.Minute)
	cfg, inj, err := chaos.InjectErrors(env.Config, 7,
		chaos.Rule{Verbs: []string{"patch"}, Resources: []string{"configmaps"}, Fault: chaos.Conflict()},
		chaos.Rule{Verbs: []string{"get"}, Resources: []string{"webapps.apps.example.com"}, Fault: chaos.ServerError(500)},
	)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, cfg)
	obj := cm(ns, "sel")
	if err := c.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"data":{"a":"b"}}`))
	if err := c.Patch(ctx, obj, patch); !apierrors.IsConflict(err) {
		t.Fatalf("patch: want conflict, got %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "absent"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get secret: want the server's NotFound, got %v", err)
	}
	inj.Disable()
	if err := c.Patch(ctx, obj, patch); err != nil {
		t.Fatalf("disabled injector still injects: %v", err)
	}
	inj.Enable()
	if err := c.Patch(ctx, obj, patch); !apierrors.IsConflict(err) {
		t.Fatalf("re-enabled: want conflict, got %v", err)
	}
	if got := inj.Injected(); got != 2 {
		t.Fatalf("injected %d, want 2:\n%s", got, inj)
	}
}

// The same seed and the same request sequence inject the same faults.
func TestInjectorIsDeterministicWithSeed(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxFor(t, time.Minute)
	pattern := func(seed uint64) string {
		cfg, _, err := chaos.InjectErrors(env.Config, seed, chaos.Rule{Verbs: []string{"get"}, Resources: []string{"configmaps"}, Probability: 0.5, Fault: chaos.ServerError(500)})
		if err != nil {
			t.Fatal(err)
		}
		c := newClient(t, cfg)
		var b strings.Builder
		for range 40 {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "none"}, &corev1.ConfigMap{})
			switch {
			case apierrors.IsInternalError(err):
				b.WriteByte('x')
			case apierrors.IsNotFound(err):
				b.WriteByte('.')
			default:
				t.Fatalf("unexpected %v", err)
			}
		}
		return b.String()
	}
	a, b, other := pattern(42), pattern(42), pattern(43)
	if a != b {
		t.Fatalf("same seed, different faults:\n%s\n%s", a, b)
	}
	if a == other {
		t.Fatalf("different seeds, same 40 choices: %s", a)
	}
	if !strings.Contains(a, "x") || !strings.Contains(a, ".") {
		t.Fatalf("probability 0.5 gave %s", a)
	}
}

func TestProxyCutBlackholeRestore(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxFor(t, 2*time.Minute)
	proxy, cfg, err := chaos.ProxyConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	cfg.Timeout = 2 * time.Second
	c := newClient(t, cfg)
	get := func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, &corev1.Service{})
	}
	if err := get(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}

	// A watch through the proxy ends when the network is cut.
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	proxy.Cut()
	if err := get(); err == nil {
		t.Fatal("request succeeded through a cut network")
	}
	select {
	case _, ok := <-w.ResultChan():
		for ok {
			_, ok = <-w.ResultChan()
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch survived the cut")
	}
	proxy.Restore()
	waitFor(t, 10*time.Second, "requests pass after Restore", func() (bool, error) { return get() == nil, get() })

	proxy.Blackhole()
	t0 := time.Now()
	if err := get(); err == nil {
		t.Fatal("request succeeded through a blackholed network")
	}
	if d := time.Since(t0); d < time.Second {
		t.Errorf("a blackhole should fail by client timeout, failed after %s", d)
	}
	proxy.Restore()
	waitFor(t, 10*time.Second, "requests pass after Restore", func() (bool, error) { return get() == nil, get() })
	accepted, dropped, _ := proxy.Stats()
	if accepted < 2 || dropped < 1 {
		t.Fatalf("stats: accepted %d dropped %d", accepted, dropped)
	}
}

func TestProxyOnlyLoopback(t *testing.T) {
	for _, target := range []string{"10.0.0.1:443", "example.com:443", "0.0.0.0:443", "127.0.0.1", "127.0.0.1:0"} {
		if p, err := chaos.NewProxy(target); err == nil {
			_ = p.Close()
			t.Errorf("NewProxy(%q) accepted", target)
		}
	}
	if _, _, err := chaos.ProxyConfig(&rest.Config{Host: "https://192.0.2.1:6443"}); err == nil {
		t.Error("ProxyConfig accepted a non-loopback host")
	}
	p, err := chaos.NewProxy("[::1]:6443")
	if err != nil {
		t.Fatalf("IPv6 loopback rejected: %v", err)
	}
	if !strings.HasPrefix(p.Addr(), "127.0.0.1:") {
		t.Errorf("proxy listens on %s", p.Addr())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestPauseAndResumeComponents(t *testing.T) {
	ns := env.Namespace(t)
	if _, err := env.PID("kube-proxy"); err == nil {
		t.Fatal("PID of an unknown component succeeded")
	}
	pids := map[int]testenv.Component{}
	for _, comp := range []testenv.Component{testenv.APIServer, testenv.Etcd, testenv.ControllerManager, testenv.Scheduler, testenv.Kwok} {
		pid, err := env.PID(comp)
		if err != nil {
			t.Fatal(err)
		}
		if other, dup := pids[pid]; dup || pid <= 0 {
			t.Fatalf("%s: pid %d (also %s)", comp, pid, other)
		}
		pids[pid] = comp
	}
	short := rest.CopyConfig(env.Config)
	short.Timeout = time.Second
	c := newClient(t, short)
	for i, comp := range []testenv.Component{testenv.APIServer, testenv.Etcd} {
		t.Run(string(comp), func(t *testing.T) {
			t.Cleanup(func() { _ = env.Resume(comp) })
			if err := env.Pause(comp); err != nil {
				t.Fatal(err)
			}
			ctx := ctxFor(t, time.Minute)
			if err := c.Create(ctx, cm(ns, fmt.Sprintf("paused-%d", i))); err == nil {
				t.Fatalf("create succeeded with %s paused", comp)
			}
			if err := env.Resume(comp); err != nil {
				t.Fatal(err)
			}
			if err := env.Resume(comp); err != nil {
				t.Fatalf("second Resume: %v", err)
			}
			waitFor(t, 30*time.Second, "create after resume", func() (bool, error) {
				err := c.Create(ctx, cm(ns, fmt.Sprintf("resumed-%d", i)))
				return err == nil || apierrors.IsAlreadyExists(err), err
			})
		})
	}
}

func TestRestartAPIServerKeepsDataAndClients(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxFor(t, 2*time.Minute)
	// Clients made before the restart: the admin, and a second user.
	before := newClient(t, env.Config)
	obj := cm(ns, "survivor")
	obj.Data = map[string]string{"k": "v"}
	if err := before.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	pid0, err := env.PID(testenv.APIServer)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
	pid1, err := env.PID(testenv.APIServer)
	if err != nil {
		t.Fatal(err)
	}
	if pid1 == pid0 {
		t.Fatalf("same pid %d after restart", pid0)
	}
	var got corev1.ConfigMap
	waitFor(t, 30*time.Second, "old client reads the object after restart", func() (bool, error) {
		err := before.Get(ctx, client.ObjectKeyFromObject(obj), &got)
		return err == nil, err
	})
	if got.Data["k"] != "v" || got.UID != obj.UID {
		t.Fatalf("object changed across the restart: %+v", got)
	}
	if out, err := env.Kubectl(ctx, "get", "configmap", "survivor", "-n", ns, "-o", "name"); err != nil || !strings.Contains(out, "survivor") {
		t.Fatalf("kubectl with the original kubeconfig after restart: %v %s", err, out)
	}
	// The suite's restart under load (TestOperatorSurvivesFaults) is a
	// second restart of this control plane, from the kept certificates.
}

func TestIdempotent(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxFor(t, time.Minute)
	cfg, counter := testenv.CountRequests(env.Config)
	c := newClient(t, cfg)
	key := client.ObjectKey{Namespace: ns, Name: "idem"}
	converge := func(ctx context.Context) error {
		var cur corev1.ConfigMap
		err := c.Get(ctx, key, &cur)
		if apierrors.IsNotFound(err) {
			o := cm(ns, key.Name)
			o.Data = map[string]string{"a": "1"}
			return c.Create(ctx, o)
		}
		if err != nil || cur.Data["a"] == "1" {
			return err
		}
		cur.Data = map[string]string{"a": "1"}
		return c.Update(ctx, &cur)
	}
	if err := chaos.Idempotent(ctx, counter, converge); err != nil {
		t.Fatal(err)
	}
	alwaysUpdate := func(ctx context.Context) error {
		var cur corev1.ConfigMap
		if err := c.Get(ctx, key, &cur); err != nil {
			return err
		}
		return c.Update(ctx, &cur)
	}
	err := chaos.Idempotent(ctx, counter, alwaysUpdate)
	if err == nil || !strings.Contains(err.Error(), "update configmaps: 1") {
		t.Fatalf("a pass that always updates is idempotent? %v", err)
	}
}

func TestReconcileMonitor(t *testing.T) {
	mon := chaos.NewReconcileMonitor()
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	req := reconcile.Request{NamespacedName: key}
	release := make(chan struct{})
	var inside sync.WaitGroup
	inside.Add(2)
	blocking := mon.Wrap(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		inside.Done()
		<-release
		return reconcile.Result{}, nil
	}))
	ctx := ctxFor(t, 10*time.Second)
	if err := mon.Check(); err != nil {
		t.Fatal(err)
	}
	mk := mon.Mark()
	var done sync.WaitGroup
	for range 2 {
		done.Add(1)
		go func() {
			defer done.Done()
			_, _ = blocking.Reconcile(ctx, req)
		}()
	}
	if err := mon.WaitInFlight(ctx); err != nil {
		t.Fatal(err)
	}
	inside.Wait()
	if n := mon.InFlight(); n != 2 {
		t.Fatalf("in flight %d, want 2", n)
	}
	close(release)
	done.Wait()
	if err := mon.CheckNoOverlap(); err == nil || !strings.Contains(err.Error(), "ns/a") {
		t.Fatalf("overlap not detected: %v", err)
	}
	if err := mon.CheckNoHotLoop(mk, 2); err != nil {
		t.Fatalf("2 reconciles flagged with max 2: %v", err)
	}
	if err := mon.CheckNoHotLoop(mk, 1); err == nil || !strings.Contains(err.Error(), "ns/a: 2") {
		t.Fatalf("hot loop not detected: %v", err)
	}

	// Around a reconciler opkit's observability already wraps: the monitor
	// needs nothing from opkit, and observability re-raises the panic to it.
	mon2 := chaos.NewReconcileMonitor()
	obs, err := observability.New(observability.WithoutMetrics())
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	wrapped := mon2.Wrap(obs.Wrap("test", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		calls++
		if calls == 2 {
			panic("boom")
		}
		return reconcile.Result{}, nil
	})))
	if _, err := wrapped.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { _ = recover() }()
		_, _ = wrapped.Reconcile(ctx, req)
	}()
	if n := mon2.Reconciles(key); n != 2 || mon2.InFlight() != 0 {
		t.Fatalf("spans: %d reconciles, %d in flight; want 2, 0", n, mon2.InFlight())
	}
	if err := mon2.CheckNoPanic(); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("panic not recorded: %v", err)
	}
	if err := mon2.CheckNoOverlap(); err != nil {
		t.Fatal(err)
	}
}

func TestFinalizerChecker(t *testing.T) {
	const fin = "example.com/cleanup"
	obj := func(name string, uid types.UID, deleting bool, finalizers ...string) *corev1.ConfigMap {
		o := cm("ns", name)
		o.UID = uid
		o.Finalizers = finalizers
		if deleting {
			now := metav1.Now()
			o.DeletionTimestamp = &now
		}
		return o
	}
	released := map[types.NamespacedName]bool{{Namespace: "ns", Name: "probed"}: true}
	c := chaos.NewFinalizerChecker(fin, chaos.WithCleanupProbe(func(k types.NamespacedName) bool { return released[k] }))
	h := c.Handler()

	// Cleaned up, then the finalizer removed: fine.
	h.OnAdd(obj("good", "u1", false, fin), false)
	c.CleanupDone(obj("good", "u1", true, fin))
	h.OnUpdate(obj("good", "u1", true, fin), obj("good", "u1", true))
	h.OnDelete(obj("good", "u1", true))
	// Removed before cleanup, deleted in the same step, seen through a relist.
	h.OnAdd(obj("bad", "u2", false, fin), false)
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/bad", Obj: obj("bad", "u2", true, fin)})
	// The probe says the cleanup happened.
	h.OnAdd(obj("probed", "u3", true, fin), false)
	h.OnUpdate(obj("probed", "u3", true, fin), obj("probed", "u3", true))
	// A recreated object under a cleaned-up name needs its own cleanup.
	h.OnAdd(obj("good", "u4", false, fin), false)
	h.OnUpdate(obj("good", "u4", true, fin), obj("good", "u4", true))
	// Never had the finalizer: nothing to check.
	h.OnAdd(obj("plain", "u5", false), false)
	h.OnDelete(obj("plain", "u5", true))

	err := c.Check()
	if err == nil || !strings.Contains(err.Error(), "2 objects") || !strings.Contains(err.Error(), "ns/bad") || !strings.Contains(err.Error(), "ns/good") {
		t.Fatalf("want violations for ns/bad and the recreated ns/good, got %v", err)
	}
	if n := c.Finalized(); n != 2 {
		t.Fatalf("finalized %d, want 2", n)
	}
}

func ExampleInjectErrors() {
	_, _, err := chaos.InjectErrors(&rest.Config{Host: "https://127.0.0.1:6443"}, 1,
		chaos.Rule{Verbs: []string{"fetch"}, Fault: chaos.TooManyRequests(2 * time.Second)})
	fmt.Println(err)
	// Output: chaos: rule 0 (fetch * → 429 TooManyRequests (Retry-After 2s)): unknown verb "fetch" (want one of get, list, watch, create, update, patch, delete, deletecollection)
}

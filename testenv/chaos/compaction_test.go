package chaos_test

// Watch expiry: the operator's informers resume their watches from a
// resourceVersion etcd has already compacted away, get 410 Gone ("too old
// resource version") and must relist without missing a change or creating a
// child twice.
//
// What produces a 410 for a client-go reflector against this API server
// (v1.37): with the watch cache on (the default), a watch is served from the
// cache, which keeps every event of at least the last 75 s (its capacity
// grows to hold them), so a reflector that reconnects after a few seconds
// resumes from the cache and never sees 410; compaction of etcd does not
// reach it. With the watch cache off (--watch-cache=false) every watch is an
// etcd watch from the reflector's resourceVersion, and etcd answers a
// compacted revision with ErrCompacted, which the API server sends as an
// ERROR event with a 410 Status (reason Expired) inside the watch stream. The
// API server compacts etcd itself every --etcd-compaction-interval (default
// 5 min), to the revision it saw one interval earlier; 1 s makes every
// revision older than ~2 s unreachable. So this test runs its own control
// plane with both flags and takes the operator's API server away while the
// load writes, restoring it once at least two compactions have passed. How
// it goes away matters: client-go's reflector resumes a watch from its last
// resourceVersion only when reconnecting is refused (ECONNREFUSED, a server
// that is down); after any other failure (a reset, a timeout) it lists from
// scratch and never asks for the old revision. So the proxy refuses
// ([chaos.Proxy.Refuse]) rather than cuts.
// chaos.CountResponses decodes the operator's watch streams and counts the
// 410 events; a run where none arrived fails.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/config"
	"github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/examples/webapp/registry"
	"github.com/opkit/opkit/testenv"
	"github.com/opkit/opkit/testenv/chaos"
)

// compactionInterval is the API server's --etcd-compaction-interval in the
// tests that need expired watches.
const compactionInterval = time.Second

// startCompactingEnv starts a second control plane (workloads mode, the
// webapp CRD) whose API server serves every watch from etcd
// (--watch-cache=false) and compacts etcd every [compactionInterval], and
// makes it the package's env until the test ends (the suite's helpers all
// use env; tests of this package do not run in parallel). It returns the
// time the control plane took to start.
func startCompactingEnv(t *testing.T, opts ...testenv.Option) time.Duration {
	t.Helper()
	crds, err := config.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	e := testenv.Start(t, append([]testenv.Option{
		testenv.WithWorkloads(), testenv.WithCRDs(crds...), testenv.WithScheme(env.Scheme),
		testenv.WithAPIServerArgs("watch-cache", "false"),
		testenv.WithAPIServerArgs("etcd-compaction-interval", compactionInterval.String()),
	}, opts...)...)
	started := time.Since(t0)
	shared := env
	env = e
	t.Cleanup(func() { env = shared })
	return started
}

// TestWatchExpiryRelists cuts the operator off while the load writes and
// etcd is compacted; when the network returns, its informers' watches
// resume from compacted resourceVersions and get 410 Gone. They must relist:
// every change made during the cut is acted on, no child is created twice,
// the operator does not loop, and at least one 410 must have arrived.
func TestWatchExpiryRelists(t *testing.T) {
	p := currentProfile()
	leaks := leakOptions()
	started := startCompactingEnv(t)
	t.Logf("control plane with --watch-cache=false --etcd-compaction-interval=%s up in %.1fs", compactionInterval, started.Seconds())
	ns := privateNamespace(t)
	panics0 := panics(t)

	proxy, cfg, err := chaos.ProxyConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = proxy.Close() }()
	cfg.Timeout = p.clientTO
	cfg.QPS, cfg.Burst = 200, 400
	cfg, responses := chaos.CountResponses(cfg)
	reg := registry.New()
	mon := chaos.NewReconcileMonitor()
	fc := chaos.NewFinalizerChecker(controller.FinalizerName, chaos.WithCleanupProbe(func(k types.NamespacedName) bool {
		_, routed := reg.Lookup(k.String())
		return !routed
	}))
	stopWatch := watchFinalizers(t, ns, fc)
	op := startOperator(t, ns, opConfig{cfg: cfg, registry: reg, monitor: mon})
	ld := newLoad(ns, 410)
	ctx := ctxFor(t, 5*time.Minute)
	for range p.objects {
		ld.step(ctx, p.objects)
	}
	if _, v := ld.waitConverged(t, reg, p.converge); !v.converged() {
		t.FailNow()
	}
	if n := responses.Undecoded(); n != 0 {
		t.Fatalf("%d watch streams in a media type the counter cannot decode:\n%s", n, responses)
	}
	expired0 := responses.Expired()

	var rows []row
	for round := range p.rounds {
		mk := mon.Mark()
		ops0 := ld.ok.Load() + ld.fail.Load()
		before := responses.Expired()
		lists0 := op.requests.Verb("list")
		lctx, stopLoad := context.WithCancel(context.Background())
		loadDone := make(chan struct{})
		t0 := time.Now()
		// The informers' last resourceVersions are their newest events:
		// take the server away, then write so etcd's revision moves past
		// them, and stay away for at least four compaction intervals (a
		// compaction reaches the revision seen one interval earlier).
		_, dropped0, _ := proxy.Stats()
		proxy.Refuse()
		go func() { defer close(loadDone); ld.run(lctx, p) }()
		time.Sleep(max(p.cut, 4*compactionInterval))
		proxy.Restore()
		_, dropped, _ := proxy.Stats()
		time.Sleep(p.loadBefore) // the load goes on while the informers relist
		stopLoad()
		<-loadDone
		loadTime := time.Since(t0)
		ops := ld.ok.Load() + ld.fail.Load() - ops0

		recovery, v := ld.waitConverged(t, reg, p.converge)
		if len(v.duplicates) > 0 || len(v.lost) > 0 {
			t.Errorf("round %d: lost %v, duplicates %v", round+1, v.lost, v.duplicates)
		}
		// The verdict reads the server; the operator's informers may still
		// be backing off before they resume (and relist). Check the steady
		// state once they hold what the server holds.
		caughtUp := waitCachesCaughtUp(t, op, ns, p.converge, 100*time.Millisecond)
		t.Logf("round %d: converged %.1fs after the outage ended; the operator's caches caught up %.1fs after that", round+1, recovery.Seconds(), caughtUp.Seconds())
		if err := checkQuiet(t, mon, ns, p.quietWindow, p.maxQuiet); err != nil {
			t.Errorf("round %d: %v", round+1, err)
		}
		if live := ld.live(); len(live) > 0 {
			ictx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			if err := idempotentNow(ictx, op, mon, ns, live[0]); err != nil {
				t.Errorf("round %d: %v", round+1, err)
			}
			cancel()
		}
		// Informers that saw no change during the outage may resume later
		// than the operator converged (their reflector backs off): count
		// after the quiet window.
		expired := responses.Expired() - before
		ld.mu.Lock()
		objects := len(ld.live())
		ld.mu.Unlock()
		rows = append(rows, row{
			test: "expiry", fault: fmt.Sprintf("#%d API server refused %s, etcd compacted every %s", round+1, max(p.cut, 4*compactionInterval), compactionInterval),
			objects: objects, ops: ops, opsPerSec: float64(ops) / loadTime.Seconds(),
			injected: fmt.Sprintf("1 outage (%d conns), %d×410", dropped-dropped0, expired),
			lost:     len(v.lost), duplicates: len(v.duplicates), recovery: recovery, ready: v.ready, maxReconciles: maxOf(mon.Since(mk)),
		})
		t.Logf("round %d: %d watches expired (410 Gone; so far %s); %d lists after the cut",
			round+1, expired, expiredFor(responses), op.requests.Verb("list")-lists0)
		if expired == 0 {
			t.Errorf("round %d: no watch got 410 Gone: the test did not exercise expiry (responses:\n%s)", round+1, responses)
		}
	}
	logTable(t, rows)
	t.Logf("410s before the first cut: %d; responses:\n%s", expired0, responses)
	// Nothing missed: a WebApp created during the cut exists with its
	// children (the verdict), and one deleted during it is gone with them.
	if err := errors.Join(mon.Check(), fc.Check()); err != nil {
		t.Error(err)
	}
	if d := panics(t) - panics0; d != 0 {
		t.Errorf("controller-runtime recovered %v reconcile panics", d)
	}
	if n := responses.Status(http.StatusGone); n != 0 {
		t.Logf("%d lists answered 410 as well", n)
	}
	op.stop()
	stopWatch()
	_ = proxy.Close()
	stopEnvNow(t)
	goleak.VerifyNone(t, leaks...)
}

// stopEnvNow stops the test's own control plane before a goroutine leak
// check (its process waiters would count as leaks); the cleanup that
// testenv.Start registered then finds it stopped.
func stopEnvNow(t *testing.T) {
	t.Helper()
	if err := env.Stop(); err != nil {
		t.Errorf("stop control plane: %v", err)
	}
}

// waitCachesCaughtUp polls (every interval) until the operator's cache
// holds, for every kind it watches, exactly the objects (and
// resourceVersions) the server holds in ns, and returns how long that took.
func waitCachesCaughtUp(t *testing.T, op *operator, ns string, bound, interval time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var lastErr error
	for time.Since(start) < bound {
		ok, err := cachesCaughtUp(t, op, ns)
		if ok {
			return time.Since(start)
		}
		lastErr = err
		time.Sleep(interval)
	}
	t.Errorf("the operator's caches did not catch up with the server in %s: %v", bound, lastErr)
	return time.Since(start)
}

func cachesCaughtUp(t *testing.T, op *operator, ns string) (bool, error) {
	{
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, newList := range []func() client.ObjectList{
			func() client.ObjectList { return &webappv1.WebAppList{} },
			func() client.ObjectList { return &appsv1.DeploymentList{} },
			func() client.ObjectList { return &corev1.ConfigMapList{} },
			func() client.ObjectList { return &corev1.ServiceList{} },
		} {
			server, cached := newList(), newList()
			if err := env.Client.List(ctx, server, client.InNamespace(ns)); err != nil {
				return false, err
			}
			if err := op.mgr.GetCache().List(ctx, cached, client.InNamespace(ns)); err != nil {
				return false, err
			}
			if a, b := versions(t, server), versions(t, cached); !maps.Equal(a, b) {
				return false, fmt.Errorf("%T: server %d objects, cache %d, or versions differ", server, len(a), len(b))
			}
		}
		return true, nil
	}
}

func versions(t *testing.T, list client.ObjectList) map[string]string {
	t.Helper()
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(items))
	for _, it := range items {
		o := it.(client.Object)
		out[o.GetName()] = o.GetResourceVersion()
	}
	return out
}

// privateNamespace creates a namespace in a control plane the test stops
// itself (no cleanup: the whole control plane goes).
func privateNamespace(t *testing.T) string {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "chaos-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// expiredFor is a helper for logs: the 410s per kind the operator watches.
func expiredFor(rc *chaos.ResponseCounter) string {
	return fmt.Sprintf("webapps %d, configmaps %d, deployments %d, services %d",
		rc.ExpiredFor("webapps.apps.example.com"), rc.ExpiredFor("configmaps"), rc.ExpiredFor("deployments.apps"), rc.ExpiredFor("services"))
}

// Refuse closes the proxy's port (ECONNREFUSED, as for a server that is
// down) and Restore opens the same port again.
func TestProxyRefuseRestore(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
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
	addr := proxy.Addr()
	proxy.Refuse()
	proxy.Refuse() // idempotent
	if err := get(); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("want connection refused, got %v", err)
	}
	proxy.Restore()
	if proxy.Addr() != addr {
		t.Fatalf("address changed from %s to %s", addr, proxy.Addr())
	}
	waitFor(t, 10*time.Second, "requests pass after Restore", func() (bool, error) { return get() == nil, get() })
	// Refuse then Cut: listening again, but resetting.
	proxy.Refuse()
	proxy.Cut()
	if err := get(); err == nil || errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("after Cut want a reset, got %v", err)
	}
	proxy.Restore()
	waitFor(t, 10*time.Second, "requests pass after Restore", func() (bool, error) { return get() == nil, get() })
	if err := proxy.Close(); err != nil {
		t.Fatal(err)
	}
}

// A client that redials the instant Refuse closes its connection — as a
// reflector does when its watch ends — must be refused (ECONNREFUSED, which
// makes client-go resume the watch from its old resourceVersion), never
// accepted and reset (which makes it list afresh: no 410 to count).
func TestProxyRefuseRedialIsRefused(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	proxy, err := chaos.NewProxy(srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	const rounds = 100
	var other []string
	for range rounds {
		c, err := net.Dial("tcp", proxy.Addr())
		if err != nil {
			t.Fatal(err)
		}
		redial := make(chan error, 1)
		go func() {
			b := make([]byte, 1)
			_, _ = c.Read(b) // returns when the proxy closes the connection
			c2, err := net.Dial("tcp", proxy.Addr())
			if err == nil {
				// Accepted: the proxy resets it, or it stays silent.
				_ = c2.SetReadDeadline(time.Now().Add(time.Second))
				_, err = c2.Read(b)
				_ = c2.Close()
			}
			redial <- err
		}()
		time.Sleep(2 * time.Millisecond) // the client is blocked in Read
		proxy.Refuse()
		if err := <-redial; !errors.Is(err, syscall.ECONNREFUSED) {
			other = append(other, fmt.Sprint(err))
		}
		proxy.Restore()
		_ = c.Close()
	}
	if len(other) > 0 {
		t.Errorf("%d of %d immediate redials after Refuse were not refused, e.g. %v", len(other), rounds, head(other, 3))
	}
}

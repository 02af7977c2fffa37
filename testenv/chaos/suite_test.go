package chaos_test

// The chaos suite: the webapp example operator under a steady load of
// creates, updates and deletes while the harness restarts, pauses and
// partitions its API server, injects API errors, kills its leader and has
// 16 writers fight over its objects. Every object must converge afterwards,
// nothing may be lost or duplicated, and the invariants (no hot loop, no
// concurrent reconcile of one object, no panic, finalizer only after cleanup,
// idempotent steady state) must hold. Each test logs a table row per fault.
//
// CI runs the bounded mode. The soak mode (OPKIT_CHAOS_SOAK=1 or
// -chaos.soak) holds a larger load for longer and cuts the network for 30s:
//
//	OPKIT_CHAOS_SOAK=1 KUBEBUILDER_ASSETS=$(go run ./cmd/opkit-assets) go test -run 'Survives|Failover|Storm' -timeout 30m ./testenv/chaos/

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/opkit/opkit/conditions"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/config"
	"github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/examples/webapp/registry"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/testenv"
	"github.com/opkit/opkit/testenv/chaos"
	"github.com/opkit/opkit/webhook/certs"
)

var soakFlag = flag.Bool("chaos.soak", false, "run the chaos suite in soak mode (also OPKIT_CHAOS_SOAK=1)")

// profile sizes one run of the suite.
type profile struct {
	objects      int           // WebApps alive at once under load
	opsPerSec    float64       // load rate
	loadBefore   time.Duration // load before each fault
	clientTO     time.Duration // the operator's rest.Config Timeout
	pause        time.Duration // API server pause (longer than clientTO)
	cut          time.Duration // network partition
	errorsFor    time.Duration // API error injection window
	converge     time.Duration // bound on recovery after a fault
	quietWindow  time.Duration // steady-state window for the hot-loop check
	maxQuiet     int           // reconciles per object allowed in the quiet window
	rounds       int           // times the fault sequence runs
	stormWriters int
	stormEdits   int // label edits per writer
}

func currentProfile() profile {
	p := profile{
		objects: 20, opsPerSec: 4, loadBefore: 3 * time.Second, clientTO: 3 * time.Second,
		pause: 5 * time.Second, cut: 5 * time.Second, errorsFor: 5 * time.Second,
		converge: 90 * time.Second, quietWindow: 2 * time.Second, maxQuiet: 3, rounds: 1,
		stormWriters: 16, stormEdits: 8,
	}
	if *soakFlag || os.Getenv("OPKIT_CHAOS_SOAK") == "1" {
		p.objects, p.opsPerSec, p.loadBefore = 50, 8, 20*time.Second
		p.pause, p.cut, p.errorsFor = 30*time.Second, 30*time.Second, 30*time.Second
		p.converge, p.quietWindow, p.rounds = 4*time.Minute, 10*time.Second, 3
		p.maxQuiet, p.stormEdits = 6, 40
	}
	return p
}

// ---- the operator ----

type operator struct {
	mgr      manager.Manager
	registry *registry.Registry
	requests *testenv.RequestCounter
	stop     func() // cancels the manager's context and waits for Start to return
	errc     chan error
}

type opConfig struct {
	cfg      *rest.Config
	registry *registry.Registry
	monitor  *chaos.ReconcileMonitor
	leaderID string // leader election on (without release on cancel) when set
	// concurrency is the controller's MaxConcurrentReconciles; 0: the webapp default.
	concurrency int
	// lease times the leader election when leaderID is set; zero: the
	// suite's short lease (leaseDuration, renewDeadline, retryPeriod).
	lease leaseTimes
	// electionCfg is the leader election's config when set (else cfg);
	// the lease lock is then a LeaseLock named leaderID in ns.
	electionCfg *rest.Config
}

// leaseTimes are a leader election's LeaseDuration, RenewDeadline and
// RetryPeriod.
type leaseTimes struct{ duration, renew, retry time.Duration }

func startOperator(t *testing.T, ns string, oc opConfig) *operator {
	t.Helper()
	cfg, requests := testenv.CountRequests(oc.cfg)
	opts := manager.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		// The monitor reads controller-runtime's own per-reconcile log lines:
		// the operator's code is not touched.
		Logger: oc.monitor.Logger(logr.Discard()),
		// rest.Config.Timeout is the http.Client's Timeout, which also ends
		// every watch after that long: at 3 s, under load, with watches
		// served from etcd (compacted every second) the informers spent
		// their time re-opening watches and re-listing and saw no change, so
		// the operator sent no write for a minute (the soak's API-error
		// window at 2,000 WebApps: 24 requests, all watches). The
		// timeout is for the operator's requests; its cache watches
		// without one, through the same transport (proxy, injector,
		// counters), as an operator without a client timeout does.
		NewCache: func(c *rest.Config, o cache.Options) (cache.Cache, error) {
			if c.Timeout == 0 {
				return cache.New(c, o)
			}
			c = rest.CopyConfig(c)
			c.Timeout = 0
			hc, err := rest.HTTPClientFor(c)
			if err != nil {
				return nil, err
			}
			o.HTTPClient = hc
			return cache.New(c, o)
		},
	}
	if oc.leaderID != "" {
		opts.LeaderElection = true
		opts.LeaderElectionID = oc.leaderID
		opts.LeaderElectionNamespace = ns
		lt := oc.lease
		if lt == (leaseTimes{}) {
			lt = leaseTimes{leaseDuration, renewDeadline, retryPeriod}
		}
		opts.LeaseDuration = ptr.To(lt.duration)
		opts.RenewDeadline = ptr.To(lt.renew)
		opts.RetryPeriod = ptr.To(lt.retry)
		opts.LeaderElectionReleaseOnCancel = false
		if oc.electionCfg != nil {
			// The lock is built here: manager.Options.LeaderElectionConfig
			// adds types to the (shared) scheme, a data race with a
			// replica already running.
			cs, err := kubernetes.NewForConfig(oc.electionCfg)
			if err != nil {
				t.Fatal(err)
			}
			opts.LeaderElectionResourceLockInterface = &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: oc.leaderID},
				Client:     cs.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: oc.leaderID + "-" + string(uuid.NewUUID())},
			}
		}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	obs, err := observability.Setup(mgr, observability.WithRegisterer(reg), observability.WithGatherer(reg),
		observability.WithoutHealthChecks())
	if err != nil {
		t.Fatal(err)
	}
	if err := controller.Setup(mgr, controller.Options{Registry: oc.registry, Observability: obs, Concurrency: oc.concurrency}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	op := &operator{mgr: mgr, registry: oc.registry, requests: requests, errc: make(chan error, 1)}
	go func() { op.errc <- mgr.Start(ctx) }()
	var once sync.Once
	op.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-op.errc; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(op.stop)
	return op
}

// ---- the webhooks ----

// webhookOperator is the webapp operator with its own webhook server (the
// defaulting and validating webhooks) in the same manager, as one pod runs
// it, and the API server reaching that server through a chaos.Proxy.
type webhookOperator struct {
	proxy *chaos.Proxy
	mon   *chaos.ReconcileMonitor
	reg   *registry.Registry
	// stop ends the manager and closes the proxy (also at the test's
	// cleanup; the webhook configurations are deleted there).
	stop func()
}

// startWebhookOperator starts the operator for ns and installs the webapp's
// webhook configurations (config/webhook), renamed for ns, limited to ns by
// a namespaceSelector, with failurePolicy policy, pointing at the proxy.
// Without reconcile the manager serves the webhooks only (a webhook
// Deployment of its own), and wo.mon and wo.reg see nothing.
func startWebhookOperator(t *testing.T, ns string, policy admissionregistrationv1.FailurePolicyType, reconcile bool) *webhookOperator {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	ca, err := certs.NewCA("webhook-outage", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(certs.LocalHosts(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "certs")
	if err := certs.WriteFiles(dir, kp, ca.CertPEM); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	wo := &webhookOperator{mon: chaos.NewReconcileMonitor(), reg: registry.New()}
	mgr, err := ctrl.NewManager(env.Config, manager.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		Logger:                 wo.mon.Logger(logr.Discard()),
		WebhookServer:          crwebhook.NewServer(crwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir}),
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	obs, err := observability.Setup(mgr, observability.WithRegisterer(reg), observability.WithGatherer(reg), observability.WithoutHealthChecks())
	if err != nil {
		t.Fatal(err)
	}
	if reconcile {
		if err := controller.Setup(mgr, controller.Options{Registry: wo.reg, Observability: obs}); err != nil {
			t.Fatal(err)
		}
	}
	if err := controller.SetupWebhooks(mgr); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	if wo.proxy, err = chaos.NewProxy(fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() { errc <- mgr.Start(mctx) }()
	var once sync.Once
	wo.stop = func() {
		once.Do(func() {
			_ = wo.proxy.Close()
			cancel()
			if err := <-errc; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(wo.stop)

	mutating, validating, err := config.Webhooks()
	if err != nil {
		t.Fatal(err)
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	point := func(cc *admissionregistrationv1.WebhookClientConfig) {
		path := ptr.Deref(cc.Service.Path, "/")
		*cc = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + wo.proxy.Addr() + path), CABundle: ca.CertPEM}
	}
	var objs []client.Object
	for _, m := range mutating {
		m = m.DeepCopy()
		m.Name += "-" + ns
		for i := range m.Webhooks {
			w := &m.Webhooks[i]
			point(&w.ClientConfig)
			w.FailurePolicy, w.NamespaceSelector, w.TimeoutSeconds = ptr.To(policy), selector, ptr.To[int32](2)
		}
		objs = append(objs, m)
	}
	for _, v := range validating {
		v = v.DeepCopy()
		v.Name += "-" + ns
		for i := range v.Webhooks {
			w := &v.Webhooks[i]
			point(&w.ClientConfig)
			w.FailurePolicy, w.NamespaceSelector, w.TimeoutSeconds = ptr.To(policy), selector, ptr.To[int32](2)
		}
		objs = append(objs, v)
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	wo.waitServing(t, ns)
	return wo
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// invalidApp is a WebApp the validating webhook refuses: a config key that
// cannot be a file name in the ConfigMap.
func invalidApp(ns, name string) *webappv1.WebApp {
	app := newApp(ns, name, "0")
	app.Spec.Config["bad/key"] = "x"
	return app
}

// waitServing waits until the API server calls the webhooks again: a dry-run
// create of an invalid WebApp is denied by the validating webhook.
func (wo *webhookOperator) waitServing(t *testing.T, ns string) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	waitFor(t, 30*time.Second, "the webhooks to answer", func() (bool, error) {
		err := env.Client.Create(ctx, invalidApp(ns, "probe"), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "denied the request"), err
	})
}

// ---- the load ----

// appState is what the user (the load) knows about one WebApp.
type appState struct {
	created       bool              // a create was acknowledged (or found to exist)
	createUnknown bool              // a create failed ambiguously
	deleted       bool              // a delete was issued and acknowledged
	deleteUnknown bool              // a delete failed ambiguously
	values        []string          // spec.config["v"] values it may hold: the last acknowledged one and any ambiguous later ones
	labels        map[string]string // labels the create sets (createBurst)
}

// load creates, updates and deletes WebApps with the test's own (direct)
// client at a steady rate; it never reuses a name.
type load struct {
	ns   string
	rng  *rand.Rand
	mu   sync.Mutex
	apps map[string]*appState
	seq  int
	// replicas is spec.replicas of the WebApps it creates; nil: 1.
	replicas *int32
	ok       atomic.Int64
	fail     atomic.Int64
}

func newLoad(ns string, seed uint64) *load {
	return &load{ns: ns, rng: rand.New(rand.NewPCG(seed, seed)), apps: map[string]*appState{}}
}

func newApp(ns, name, value string) *webappv1.WebApp {
	return &webappv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       webappv1.WebAppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1), Config: map[string]string{"v": value}},
	}
}

func definite(err error) bool {
	return err == nil || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err)
}

func (l *load) live() []string {
	var out []string
	for name, s := range l.apps {
		if (s.created || s.createUnknown) && !s.deleted && !s.deleteUnknown {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// step runs one random operation, keeping about target WebApps alive.
func (l *load) step(ctx context.Context, target int) {
	l.mu.Lock()
	live := l.live()
	roll := l.rng.Float64()
	var name, value string
	kind := "create"
	switch {
	case len(live) < target || roll < 0.15:
		l.seq++
		name, value = fmt.Sprintf("app-%04d", l.seq), "0"
		l.apps[name] = &appState{}
	case roll < 0.3:
		kind, name = "delete", live[l.rng.IntN(len(live))]
	default:
		kind, name = "update", live[l.rng.IntN(len(live))]
		value = strconv.Itoa(l.rng.IntN(1_000_000))
	}
	l.mu.Unlock()
	l.do(ctx, kind, name, value)
}

// updateEach updates each of names once (a new spec value), writers at a
// time; the names must be distinct and live, and no other update of them
// may run meanwhile (the bookkeeping keeps one acknowledged value per name).
func (l *load) updateEach(ctx context.Context, names []string, writers int) {
	l.mu.Lock()
	values := make([]string, len(names))
	for i := range names {
		values[i] = strconv.Itoa(l.rng.IntN(1_000_000))
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(names); i += writers {
				l.do(ctx, "update", names[i], values[i])
			}
		}()
	}
	wg.Wait()
}

// do runs one create, update or delete of name and records its outcome.
func (l *load) do(ctx context.Context, kind, name, value string) {
	l.mu.Lock()
	st := l.apps[name]
	l.mu.Unlock()

	opCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var err error
	switch kind {
	case "create":
		app := newApp(l.ns, name, value)
		app.Labels = st.labels
		if l.replicas != nil {
			app.Spec.Replicas = l.replicas
		}
		err = env.Client.Create(opCtx, app)
	case "update":
		patch := fmt.Appendf(nil, `{"spec":{"config":{"v":%q}}}`, value)
		err = env.Client.Patch(opCtx, &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: l.ns, Name: name}}, client.RawPatch(types.MergePatchType, patch))
	case "delete":
		err = env.Client.Delete(opCtx, &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: l.ns, Name: name}})
	}
	if err == nil {
		l.ok.Add(1)
	} else {
		l.fail.Add(1)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch kind {
	case "create":
		switch {
		case err == nil:
			st.created, st.values = true, []string{value}
		case !definite(err):
			st.createUnknown, st.values = true, []string{value}
		default:
			delete(l.apps, name)
		}
	case "update":
		switch {
		case err == nil:
			st.values = []string{value}
		case !definite(err):
			st.values = append(st.values, value)
		}
	case "delete":
		switch {
		case err == nil || apierrors.IsNotFound(err):
			st.deleted = true
		case !definite(err):
			st.deleteUnknown = true
		}
	}
}

// run steps at the profile's rate until ctx ends.
func (l *load) run(ctx context.Context, p profile) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / p.opsPerSec))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			l.step(ctx, p.objects)
		}
	}
}

// settle turns every ambiguous operation into a known state, by reading the
// server (a user would do the same before complaining).
func (l *load) settle(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, st := range l.apps {
		if !st.createUnknown && !st.deleteUnknown {
			continue
		}
		var app webappv1.WebApp
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: l.ns, Name: name}, &app)
		switch {
		case apierrors.IsNotFound(err):
			if st.createUnknown && !st.created {
				delete(l.apps, name) // the create never happened
				continue
			}
			st.deleted, st.deleteUnknown = true, false
		case err != nil:
			return err
		default:
			st.created, st.createUnknown = true, false
			if st.deleteUnknown {
				if !app.DeletionTimestamp.IsZero() {
					st.deleted = true
				}
				st.deleteUnknown = false
			}
		}
	}
	return nil
}

// verdict compares the cluster with what the user asked for.
type verdict struct {
	ready      int      // converged and Ready
	pending    []string // not converged yet
	lost       []string // acknowledged state missing
	duplicates []string // objects or routes that should not exist
}

func (v verdict) converged() bool { return len(v.pending) == 0 && len(v.lost) == 0 }

func (l *load) check(ctx context.Context, reg *registry.Registry) (verdict, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var v verdict
	var apps webappv1.WebAppList
	if err := env.Client.List(ctx, &apps, client.InNamespace(l.ns)); err != nil {
		return v, err
	}
	onServer := map[string]*webappv1.WebApp{}
	for i := range apps.Items {
		onServer[apps.Items[i].Name] = &apps.Items[i]
	}
	var deps appsv1.DeploymentList
	var cms corev1.ConfigMapList
	var svcs corev1.ServiceList
	for _, list := range []client.ObjectList{&deps, &cms, &svcs} {
		if err := env.Client.List(ctx, list, client.InNamespace(l.ns), client.MatchingLabels{"app.kubernetes.io/managed-by": "opkit-webapp"}); err != nil {
			return v, err
		}
	}
	children := map[string][]client.Object{}
	deployments := map[string]*appsv1.Deployment{}
	for i := range deps.Items {
		deployments[deps.Items[i].Name] = &deps.Items[i]
		children[deps.Items[i].Labels["app.kubernetes.io/instance"]] = append(children[deps.Items[i].Labels["app.kubernetes.io/instance"]], &deps.Items[i])
	}
	for i := range cms.Items {
		children[cms.Items[i].Labels["app.kubernetes.io/instance"]] = append(children[cms.Items[i].Labels["app.kubernetes.io/instance"]], &cms.Items[i])
	}
	for i := range svcs.Items {
		children[svcs.Items[i].Labels["app.kubernetes.io/instance"]] = append(children[svcs.Items[i].Labels["app.kubernetes.io/instance"]], &svcs.Items[i])
	}

	for name, st := range l.apps {
		app := onServer[name]
		key := l.ns + "/" + name
		_, routed := reg.Lookup(key)
		if st.deleted {
			if app != nil {
				if app.DeletionTimestamp.IsZero() {
					v.duplicates = append(v.duplicates, name+": deleted, but exists again")
				} else {
					v.pending = append(v.pending, name+": still deleting")
				}
				continue
			}
			if routed {
				v.pending = append(v.pending, name+": route not released")
			}
			if n := len(children[name]); n > 0 {
				v.pending = append(v.pending, fmt.Sprintf("%s: %d children not garbage-collected", name, n))
			}
			continue
		}
		if app == nil {
			v.lost = append(v.lost, name+": acknowledged, but missing")
			continue
		}
		got := app.Spec.Config["v"]
		if !slices.Contains(st.values, got) {
			v.lost = append(v.lost, fmt.Sprintf("%s: spec value %q, want one of %v", name, got, st.values))
		}
		if reason := l.mirrorsWorld(app, deployments[name], routed); reason != "" {
			v.pending = append(v.pending, name+": "+reason)
		} else if conditions.IsTrue(app, conditions.Ready) {
			v.ready++
		}
		kinds := map[string]int{}
		for _, c := range children[name] {
			kind := fmt.Sprintf("%T", c)
			kinds[kind]++
			ref := metav1.GetControllerOf(c)
			if ref == nil || ref.UID != app.UID {
				v.duplicates = append(v.duplicates, fmt.Sprintf("%s: %s %s not controlled by the current WebApp", name, kind, c.GetName()))
			}
			if cm, ok := c.(*corev1.ConfigMap); ok && cm.Data["v"] != got {
				v.pending = append(v.pending, name+": ConfigMap out of date")
			}
		}
		if len(kinds) != 3 {
			v.pending = append(v.pending, fmt.Sprintf("%s: children %v", name, kinds))
		}
	}
	sort.Strings(v.pending)
	return v, nil
}

// mirrorsWorld returns why app has not converged, or "": the operator has
// done its part when the object carries its finalizer, its route is
// registered, its status describes its current generation, and its
// Available and Ready conditions agree with its Deployment. Whether the
// Deployment's pods are ready is the control plane's business (kwok's fake
// node can itself be hurt by the faults), not the operator's.
func (l *load) mirrorsWorld(app *webappv1.WebApp, dep *appsv1.Deployment, routed bool) string {
	if !slices.Contains(app.Finalizers, controller.FinalizerName) {
		return "no finalizer"
	}
	if !routed {
		return "no route"
	}
	if app.Status.ObservedGeneration != app.Generation {
		return "status not for the current generation"
	}
	if dep == nil {
		return "no Deployment"
	}
	if dep.Status.ObservedGeneration < dep.Generation {
		return "Deployment controller behind"
	}
	depAvailable := metav1.ConditionUnknown
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			depAvailable = metav1.ConditionStatus(c.Status)
		}
	}
	avail := conditions.Get(app, controller.ConditionAvailable)
	if avail == nil || avail.Status != depAvailable {
		return fmt.Sprintf("Available not mirrored (Deployment %s)", depAvailable)
	}
	want := int32(1)
	if app.Spec.Replicas != nil {
		want = *app.Spec.Replicas
	}
	rolledOut := dep.Status.UpdatedReplicas == want && dep.Status.ReadyReplicas == want && dep.Status.Replicas == want
	ready := conditions.IsTrue(app, conditions.Ready)
	if ready != (depAvailable == metav1.ConditionTrue && rolledOut) {
		return fmt.Sprintf("Ready=%v disagrees with the Deployment (Available %s, rolled out %v)", ready, depAvailable, rolledOut)
	}
	if ready && conditions.IsTrue(app, conditions.Reconciling) {
		return "Ready and Reconciling"
	}
	return ""
}

// waitConverged polls (every 250ms) until every object converged and
// returns the time it took.
func (l *load) waitConverged(t *testing.T, reg *registry.Registry, bound time.Duration) (time.Duration, verdict) {
	t.Helper()
	return l.waitConvergedEvery(t, reg, bound, 250*time.Millisecond)
}

// waitConvergedEvery polls every interval until every object converged
// (after settling the load's ambiguous operations) and returns the time it
// took; at bound it fails the test with what is still pending. At
// thousands of objects each check lists four kinds in full, hence the
// interval; it logs progress every 15 s.
func (l *load) waitConvergedEvery(t *testing.T, reg *registry.Registry, bound, interval time.Duration) (time.Duration, verdict) {
	t.Helper()
	start := time.Now()
	var last verdict
	var lastErr error
	logged := start
	for time.Since(start) < bound {
		if time.Since(logged) > 15*time.Second {
			logged = time.Now()
			t.Logf("after %.0fs: %d pending, e.g. %v (error %v)", time.Since(start).Seconds(), len(last.pending), head(last.pending, 3), lastErr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if lastErr = l.settle(ctx); lastErr == nil {
			last, lastErr = l.check(ctx, reg)
		}
		cancel()
		if lastErr == nil && last.converged() {
			return time.Since(start), last
		}
		time.Sleep(interval)
	}
	t.Errorf("not converged after %s (last error %v): %d pending, e.g. %v; lost %v", bound, lastErr, len(last.pending), head(last.pending, 5), head(last.lost, 5))
	l.dump(t)
	return time.Since(start), last
}

// dump logs the status of a few live WebApps, to explain a failure.
func (l *load) dump(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	live := l.live()
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var node corev1.Node
	if err := env.Client.Get(ctx, client.ObjectKey{Name: testenv.FakeNodeName}, &node); err == nil {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				t.Logf("node %s Ready=%s since %s (%s)", node.Name, c.Status, c.LastTransitionTime, c.Message)
			}
		}
	}
	for _, name := range head(live, 3) {
		var app webappv1.WebApp
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: l.ns, Name: name}, &app); err != nil {
			t.Logf("%s: %v", name, err)
			continue
		}
		var dep appsv1.Deployment
		derr := env.Client.Get(ctx, client.ObjectKey{Namespace: l.ns, Name: name}, &dep)
		t.Logf("%s: generation %d observed %d phase %q conditions %+v; deployment (%v) generation %d observed %d status %+v",
			name, app.Generation, app.Status.ObservedGeneration, app.Status.Phase, app.Status.Conditions, derr, dep.Generation, dep.Status.ObservedGeneration, dep.Status)
	}
}

func head(s []string, n int) []string { return s[:min(n, len(s))] }

// ---- reporting ----

type row struct {
	test, fault      string
	objects, ready   int
	ops              int64
	opsPerSec        float64
	injected         string
	lost, duplicates int
	recovery         time.Duration
	maxReconciles    int
}

func logTable(t *testing.T, rows []row) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n| %-8s | %-44s | %7s | %5s | %5s | %5s | %-30s | %4s | %4s | %9s | %11s |\n", "test", "fault", "objects", "ready", "ops", "ops/s", "faults injected", "lost", "dups", "recovery", "max rec/obj")
	fmt.Fprintf(&b, "|%s|\n", strings.Repeat("-", 171))
	for _, r := range rows {
		fmt.Fprintf(&b, "| %-8s | %-44s | %7d | %5d | %5d | %5.1f | %-30s | %4d | %4d | %8.1fs | %11d |\n",
			r.test, r.fault, r.objects, r.ready, r.ops, r.opsPerSec, r.injected, r.lost, r.duplicates, r.recovery.Seconds(), r.maxReconciles)
	}
	t.Log(b.String())
}

func maxOf(m map[types.NamespacedName]int) int {
	n := 0
	for _, v := range m {
		n = max(n, v)
	}
	return n
}

// ---- invariant plumbing ----

// watchFinalizers feeds a FinalizerChecker from an informer on the direct
// (never faulted) config, until the returned stop (or the test's cleanup).
func watchFinalizers(t *testing.T, ns string, fc *chaos.FinalizerChecker) (stop func()) {
	t.Helper()
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inf, err := c.GetInformer(ctx, &webappv1.WebApp{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandler(fc.Handler()); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Start(ctx)
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !c.WaitForCacheSync(syncCtx) {
		t.Fatal("finalizer watch did not sync")
	}
	return stop
}

func panics(t *testing.T) float64 {
	t.Helper()
	n, err := chaos.ControllerPanics(crmetrics.Registry, controller.Name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// leakOptions ignores goroutines that outlive a manager by design: idle
// keep-alive connections of client-go's shared transports, klog's flusher,
// and the control plane's own process waiters.
func leakOptions() []goleak.Option {
	// The control plane outlives the test; a restarted API server has a new
	// waiter. controller-runtime wraps a metadata-only informer's watch (the
	// sharded operator's assigner uses them) in apimachinery's watch.Filter,
	// whose loop never returns when it was blocked sending an event nobody
	// reads any more (testenv's package-level check exempts it too).
	return append(testenv.LeakOptions(
		"sigs.k8s.io/controller-runtime/pkg/internal/testing/process.(*State).Start.func1",
		"k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop",
	), goleak.IgnoreCurrent())
}

// checkQuiet is the steady-state hot-loop check: it waits until nothing
// outside the operator still moves (waitWorldStill), then requires that no
// object in ns be reconciled more than maxQuiet times in window.
//
// Converged means the operator mirrors the world, not that the world
// stopped: after a fault the Deployment controller and kwok may still be
// bringing pods up, and every Deployment status change they write
// legitimately reconciles its WebApp (four in 2 s was seen on a loaded CI
// machine after a network cut). A real hot loop is not hidden by the wait:
// one that writes keeps the WebApps moving until the bound, one that only
// requeues leaves them still; the window then catches both.
func checkQuiet(t *testing.T, mon *chaos.ReconcileMonitor, ns string, window time.Duration, maxQuiet int) error {
	t.Helper()
	if took, still := waitWorldStill(ns, time.Second, 30*time.Second); !still {
		t.Logf("the WebApps and Deployments of %s still changed after %.0fs; checking for a hot loop anyway", ns, took.Seconds())
	}
	quiet := mon.Mark()
	time.Sleep(window)
	return mon.CheckNoHotLoop(quiet, maxQuiet)
}

// waitWorldStill polls the WebApps and Deployments of ns until their
// resource versions have not changed for still, or bound passed; it
// returns how long it waited and whether they came to rest.
func waitWorldStill(ns string, still, bound time.Duration) (time.Duration, bool) {
	start := time.Now()
	var last map[string]string
	lastChange := start
	for time.Since(start) < bound {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cur := map[string]string{}
		var apps webappv1.WebAppList
		var deps appsv1.DeploymentList
		err := env.Client.List(ctx, &apps, client.InNamespace(ns))
		if err == nil {
			err = env.Client.List(ctx, &deps, client.InNamespace(ns))
		}
		cancel()
		if err == nil {
			for i := range apps.Items {
				cur["WebApp/"+apps.Items[i].Name] = apps.Items[i].ResourceVersion
			}
			for i := range deps.Items {
				cur["Deployment/"+deps.Items[i].Name] = deps.Items[i].ResourceVersion
			}
			if last == nil || !maps.Equal(cur, last) {
				last, lastChange = cur, time.Now()
			} else if time.Since(lastChange) >= still {
				return time.Since(start), true
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return time.Since(start), false
}

// idempotentNow checks that a converged WebApp reconciles without a write.
func idempotentNow(ctx context.Context, op *operator, mon *chaos.ReconcileMonitor, ns, name string) error {
	// The check counts every request of the operator, so it starts from a
	// steady state: objects still converging after a fault (pods becoming
	// Ready after an API server restart) legitimately write their status.
	// Wait until a 2 s window passes with no write at all (a hot loop never
	// gets there: the error below, and CheckNoHotLoop, report it).
	quiet := false
	for !quiet && ctx.Err() == nil {
		op.requests.Reset()
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
			quiet = op.requests.Writes() == 0
		}
	}
	if !quiet {
		return fmt.Errorf("chaos: the operator never went quiet for 2s before the idempotence check:\n%s", op.requests)
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	n := 0
	touch := func(ctx context.Context) error {
		n++
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"chaos.opkit.dev/touch":"%d"}}}`, n)
		return env.Client.Patch(ctx, &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, client.RawPatch(types.MergePatchType, patch))
	}
	return chaos.Idempotent(ctx, op.requests, mon.Pass(key, touch))
}

// ---- the tests ----

// TestOperatorSurvivesFaults runs the operator behind a proxy and an error
// injector, under load, through: API errors, an API server restart in the
// middle of a reconcile, an API server pause longer than the client timeout,
// and a network cut.
func TestOperatorSurvivesFaults(t *testing.T) {
	p := currentProfile()
	leaks := leakOptions()
	ns := env.Namespace(t)
	panics0 := panics(t)

	proxy, cfg, err := chaos.ProxyConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = proxy.Close() }()
	cfg.Timeout = p.clientTO
	cfg.QPS, cfg.Burst = 200, 400
	cfg, inj, err := chaos.InjectErrors(cfg, 2026)
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New()
	mon := chaos.NewReconcileMonitor()
	fc := chaos.NewFinalizerChecker(controller.FinalizerName, chaos.WithCleanupProbe(func(k types.NamespacedName) bool {
		_, routed := reg.Lookup(k.String())
		return !routed
	}))
	stopWatch := watchFinalizers(t, ns, fc)
	op := startOperator(t, ns, opConfig{cfg: cfg, registry: reg, monitor: mon})
	ld := newLoad(ns, 7)

	apiWrites := []string{"webapps.apps.example.com", "webapps.apps.example.com/status", "configmaps", "deployments.apps", "services"}
	faults := []struct {
		name   string
		inject func(t *testing.T) string // returns what was injected; the fault is over when it returns
	}{
		{fmt.Sprintf("API errors %s (409/429/5xx/timeouts)", p.errorsFor), func(t *testing.T) string {
			err := inj.SetRules(
				chaos.Rule{Verbs: []string{"update", "patch"}, Resources: apiWrites, Probability: 0.2, Fault: chaos.Conflict()},
				chaos.Rule{Verbs: []string{"create"}, Probability: 0.2, Fault: chaos.TooManyRequests(time.Second)},
				chaos.Rule{Verbs: []string{"create", "patch"}, Resources: apiWrites, Probability: 0.1, Fault: chaos.LostResponse()},
				chaos.Rule{Verbs: []string{"get", "list"}, Probability: 0.1, Fault: chaos.ServerError(500)},
				chaos.Rule{Verbs: []string{"patch", "update", "delete"}, Probability: 0.1, Fault: chaos.ServerTimeout()},
				chaos.Rule{Verbs: []string{"get"}, Probability: 0.05, Fault: chaos.Hang(p.clientTO / 2)},
			)
			if err != nil {
				t.Fatal(err)
			}
			before := inj.Injected()
			time.Sleep(p.errorsFor)
			if err := inj.SetRules(); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("%d API errors", inj.Injected()-before)
		}},
		{"API server restart mid-reconcile", func(t *testing.T) string {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := mon.WaitInFlight(ctx); err != nil {
				t.Fatalf("no reconcile in flight to interrupt: %v", err)
			}
			inflight := mon.InFlight()
			if err := env.RestartAPIServer(); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("1 restart (%d reconciling)", inflight)
		}},
		{fmt.Sprintf("API server paused %s (client timeout %s)", p.pause, p.clientTO), func(t *testing.T) string {
			if err := env.Pause(testenv.APIServer); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = env.Resume(testenv.APIServer) }()
			time.Sleep(p.pause)
			if err := env.Resume(testenv.APIServer); err != nil {
				t.Fatal(err)
			}
			return "1 SIGSTOP/SIGCONT"
		}},
		{fmt.Sprintf("network cut %s", p.cut), func(t *testing.T) string {
			_, dropped0, _ := proxy.Stats()
			proxy.Cut()
			time.Sleep(p.cut)
			proxy.Restore()
			_, dropped, _ := proxy.Stats()
			return fmt.Sprintf("1 cut (%d conns dropped)", dropped-dropped0)
		}},
	}
	if p.rounds > 1 {
		faults = append(faults, struct {
			name   string
			inject func(t *testing.T) string
		}{fmt.Sprintf("etcd paused %s", p.pause), func(t *testing.T) string {
			if err := env.Pause(testenv.Etcd); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = env.Resume(testenv.Etcd) }()
			time.Sleep(p.pause)
			if err := env.Resume(testenv.Etcd); err != nil {
				t.Fatal(err)
			}
			return "1 SIGSTOP/SIGCONT"
		}})
	}

	var rows []row
	for round := range p.rounds {
		for _, f := range faults {
			mk := mon.Mark()
			ops0 := ld.ok.Load() + ld.fail.Load()
			ctx, stopLoad := context.WithCancel(context.Background())
			loadDone := make(chan struct{})
			t0 := time.Now()
			go func() { defer close(loadDone); ld.run(ctx, p) }()
			time.Sleep(p.loadBefore)
			injected := f.inject(t)
			stopLoad()
			<-loadDone
			loadTime := time.Since(t0)
			ops := ld.ok.Load() + ld.fail.Load() - ops0

			recovery, v := ld.waitConverged(t, reg, p.converge)
			r := row{
				test: "faults", fault: f.name, ops: ops, opsPerSec: float64(ops) / loadTime.Seconds(), injected: injected,
				lost: len(v.lost), duplicates: len(v.duplicates), recovery: recovery, ready: v.ready,
			}
			if p.rounds > 1 {
				r.fault = fmt.Sprintf("#%d %s", round+1, f.name)
			}
			ld.mu.Lock()
			r.objects = len(ld.live())
			ld.mu.Unlock()
			r.maxReconciles = maxOf(mon.Since(mk))
			rows = append(rows, r)
			if len(v.duplicates) > 0 || len(v.lost) > 0 {
				t.Errorf("%s: lost %v, duplicates %v", f.name, v.lost, v.duplicates)
			}
			// Steady state after recovery: no hot loop, and a reconcile writes nothing.
			if err := checkQuiet(t, mon, ns, p.quietWindow, p.maxQuiet); err != nil {
				t.Errorf("%s: %v", f.name, err)
			}
			if live := ld.live(); len(live) > 0 {
				ictx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				if err := idempotentNow(ictx, op, mon, ns, live[0]); err != nil {
					t.Errorf("%s: %v", f.name, err)
				}
				cancel()
			}
		}
	}
	logTable(t, rows)
	t.Logf("reconciles: %d; finalizers removed after cleanup: %d; load ops ok %d, failed %d", mon.Total(), fc.Finalized(), ld.ok.Load(), ld.fail.Load())
	if err := errors.Join(mon.Check(), fc.Check()); err != nil {
		t.Error(err)
	}
	if fc.Finalized() == 0 {
		t.Error("the load deleted nothing the finalizer checker saw: the check proved nothing")
	}
	if d := panics(t) - panics0; d != 0 {
		t.Errorf("controller-runtime recovered %v reconcile panics", d)
	}
	op.stop()
	stopWatch()
	_ = proxy.Close()
	goleak.VerifyNone(t, leaks...)
}

const (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

// TestLeaderFailover kills the leader of two replicas without releasing its
// lease; the standby must take over within the lease bound and reconcile
// what changed meanwhile, and no object may be reconciled by both at once.
func TestLeaderFailover(t *testing.T) {
	p := currentProfile()
	leaks := leakOptions()
	ns := env.Namespace(t)
	panics0 := panics(t)
	reg := registry.New() // the external system both replicas talk to
	mon := chaos.NewReconcileMonitor()
	id := "webapp-chaos-" + ns
	a := startOperator(t, ns, opConfig{cfg: env.Config, registry: reg, monitor: mon, leaderID: id})
	ctx := ctxFor(t, 3*time.Minute)
	select {
	case <-a.mgr.Elected():
	case <-ctx.Done():
		t.Fatal("the first replica never became leader")
	}
	b := startOperator(t, ns, opConfig{cfg: env.Config, registry: reg, monitor: mon, leaderID: id})

	ld := newLoad(ns, 11)
	t0 := time.Now()
	n := p.objects / 2
	for range n {
		ld.step(ctx, n)
	}
	if _, v := ld.waitConverged(t, reg, p.converge); !v.converged() {
		t.FailNow()
	}
	select {
	case <-b.mgr.Elected():
		t.Fatal("the standby is leader while the first replica holds the lease")
	default:
	}

	// Kill the leader: its context ends, its lease stays.
	killed := time.Now()
	a.stop()
	// The user keeps working while there is no leader.
	for range 6 {
		ld.step(ctx, n)
	}
	select {
	case <-b.mgr.Elected():
	case <-time.After(leaseDuration + 10*retryPeriod + 5*time.Second):
		t.Fatal("the standby never took over")
	}
	takeover := time.Since(killed)
	// client-go's bound: the standby sees the lease unrenewed for
	// LeaseDuration, checking every RetryPeriod (with up to 1.2 jitter).
	if limit := leaseDuration + 3*retryPeriod + time.Second; takeover > limit {
		t.Errorf("takeover took %s, more than the lease bound %s", takeover, limit)
	}
	recovery, v := ld.waitConverged(t, reg, p.converge)
	ld.mu.Lock()
	objects := len(ld.live())
	ld.mu.Unlock()
	logTable(t, []row{{
		test: "failover", fault: fmt.Sprintf("leader killed, lease %s (takeover %.1fs)", leaseDuration, takeover.Seconds()),
		objects: objects, ops: ld.ok.Load() + ld.fail.Load(), opsPerSec: float64(ld.ok.Load()+ld.fail.Load()) / time.Since(t0).Seconds(), injected: "1 leader kill",
		lost: len(v.lost), duplicates: len(v.duplicates), recovery: time.Since(killed), maxReconciles: maxOf(mon.Since(chaos.Mark{})), ready: v.ready,
	}})
	t.Logf("takeover %s after the kill (lease %s, retry %s); every object converged %s after the takeover", takeover, leaseDuration, retryPeriod, recovery)
	if err := mon.Check(); err != nil {
		t.Error(err)
	}
	if d := panics(t) - panics0; d != 0 {
		t.Errorf("controller-runtime recovered %v reconcile panics", d)
	}
	b.stop()
	goleak.VerifyNone(t, leaks...)
}

// TestConflictStorm has 16 writers edit labels of the same WebApps while the
// operator adds its finalizer and writes status: every acknowledged label and
// the user's own finalizer must survive, and deletion must keep the user's
// finalizer while removing only the operator's, after cleanup.
func TestConflictStorm(t *testing.T) {
	p := currentProfile()
	ns := env.Namespace(t)
	panics0 := panics(t)
	reg := registry.New()
	mon := chaos.NewReconcileMonitor()
	fc := chaos.NewFinalizerChecker(controller.FinalizerName, chaos.WithCleanupProbe(func(k types.NamespacedName) bool {
		_, routed := reg.Lookup(k.String())
		return !routed
	}))
	watchFinalizers(t, ns, fc)
	op := startOperator(t, ns, opConfig{cfg: env.Config, registry: reg, monitor: mon})
	ctx := ctxFor(t, 4*time.Minute)
	const userFinalizer = "example.com/user-hold"
	names := []string{"storm-a", "storm-b", "storm-c", "storm-d"}
	for _, name := range names {
		app := newApp(ns, name, "0")
		app.Finalizers = []string{userFinalizer}
		if err := env.Client.Create(ctx, app); err != nil {
			t.Fatal(err)
		}
	}

	// acked[app][writer] is the last label value the writer saw accepted.
	acked := make([][]int, len(names))
	for i := range acked {
		acked[i] = make([]int, p.stormWriters)
	}
	var conflicts atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range p.stormWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= p.stormEdits; i++ {
				a := (w + i) % len(names)
				err := setLabel(ctx, client.ObjectKey{Namespace: ns, Name: names[a]}, fmt.Sprintf("writer-%02d", w), strconv.Itoa(i), &conflicts)
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				acked[a][w] = i
			}
		}()
	}
	wg.Wait()
	edits := p.stormWriters * p.stormEdits
	elapsed := time.Since(t0)

	lost := 0
	var recovery time.Duration
	start := time.Now()
	waitFor(t, p.converge, "storm WebApps Ready", func() (bool, error) {
		for _, name := range names {
			var app webappv1.WebApp
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &app); err != nil {
				return false, err
			}
			if !conditions.IsTrue(&app, conditions.Ready) || app.Status.ObservedGeneration != app.Generation {
				return false, nil
			}
		}
		return true, nil
	})
	recovery = time.Since(start)
	for a, name := range names {
		var app webappv1.WebApp
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &app); err != nil {
			t.Fatal(err)
		}
		for w, want := range acked[a] {
			if want == 0 {
				continue
			}
			if got := app.Labels[fmt.Sprintf("writer-%02d", w)]; got != strconv.Itoa(want) {
				lost++
				t.Errorf("%s: writer %d label %q, want %d", name, w, got, want)
			}
		}
		for _, f := range []string{userFinalizer, controller.FinalizerName} {
			if !slices.Contains(app.Finalizers, f) {
				lost++
				t.Errorf("%s lost finalizer %s: %v", name, f, app.Finalizers)
			}
		}
	}
	if err := idempotentNow(ctx, op, mon, ns, names[0]); err != nil {
		t.Error(err)
	}

	// Deletion: the operator cleans up and removes its own finalizer only.
	for _, name := range names {
		if err := env.Client.Delete(ctx, &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		waitFor(t, 60*time.Second, name+" held by the user's finalizer only", func() (bool, error) {
			var app webappv1.WebApp
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &app); err != nil {
				return false, err
			}
			return slices.Equal(app.Finalizers, []string{userFinalizer}), nil
		})
		if _, routed := reg.Lookup(ns + "/" + name); routed {
			t.Errorf("%s: route not released", name)
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		if err := env.Client.Patch(ctx, &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, patch); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "storm WebApps gone", func() (bool, error) {
		var list webappv1.WebAppList
		err := env.Client.List(ctx, &list, client.InNamespace(ns))
		return err == nil && len(list.Items) == 0, err
	})
	logTable(t, []row{{
		test: "conflict", fault: fmt.Sprintf("%d writers × %d label edits on %d CRs", p.stormWriters, p.stormEdits, len(names)),
		objects: len(names), ops: int64(edits), opsPerSec: float64(edits) / elapsed.Seconds(), injected: fmt.Sprintf("%d 409s (organic)", conflicts.Load()),
		lost: lost, recovery: recovery, maxReconciles: maxOf(mon.Since(chaos.Mark{})),
	}})
	if err := errors.Join(mon.Check(), fc.Check()); err != nil {
		t.Error(err)
	}
	if fc.Finalized() != len(names) {
		t.Errorf("finalizer checker saw %d finalizations, want %d", fc.Finalized(), len(names))
	}
	if d := panics(t) - panics0; d != 0 {
		t.Errorf("controller-runtime recovered %v reconcile panics", d)
	}
}

// setLabel sets label k=v on WebApp key as a user would: read, change,
// update (with its resourceVersion), again on a conflict (stormBackoff),
// counting the conflicts it met in conflicts.
func setLabel(ctx context.Context, key client.ObjectKey, k, v string, conflicts *atomic.Int64) error {
	return retry.OnError(stormBackoff(), apierrors.IsConflict, func() error {
		var app webappv1.WebApp
		if err := env.Client.Get(ctx, key, &app); err != nil {
			return err
		}
		if app.Labels == nil {
			app.Labels = map[string]string{}
		}
		app.Labels[k] = v
		err := env.Client.Update(ctx, &app)
		if apierrors.IsConflict(err) {
			conflicts.Add(1)
		}
		return err
	})
}

// stormBackoff is the writers' conflict backoff: short, jittered, bounded
// (60 tries, about 15s at worst). No Cap: reaching it would end the retries.
func stormBackoff() wait.Backoff {
	return wait.Backoff{Steps: 60, Duration: 5 * time.Millisecond, Factor: 1.1, Jitter: 1}
}

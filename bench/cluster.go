package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/config"
	"github.com/opkit/opkit/testenv"
)

// namespace holds every benchmark object.
const namespace = "bench"

// harnessQPS is the rate limit of the harness's own clients (load generator,
// readiness watcher, Deployment stub): high enough never to be what limits a run.
const (
	harnessQPS   = 2000
	harnessBurst = 4000
)

func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := webappv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// cluster is one fresh control plane with the WebApp CRD, the benchmark
// namespace, a readiness tracker and a Deployment status stub.
type cluster struct {
	env     *testenv.Env
	scheme  *runtime.Scheme
	admin   client.Client // the load generator's client, never counted
	tracker *tracker
	stub    *deploymentStub
	version string
}

func startCluster(ctx context.Context) (*cluster, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	crds, err := config.CRDs()
	if err != nil {
		return nil, err
	}
	env, err := testenv.New(testenv.WithCRDs(crds...), testenv.WithScheme(scheme), testenv.WithStartTimeout(3*time.Minute))
	if err != nil {
		return nil, err
	}
	c := &cluster{env: env, scheme: scheme}
	cfg := harnessConfig(env.Config)
	if c.admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, c.stopWith(err)
	}
	if err := c.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return nil, c.stopWith(fmt.Errorf("create namespace: %w", err))
	}
	if v, err := serverVersion(cfg); err == nil {
		c.version = v
	}
	if err := c.startHelpers(ctx); err != nil {
		return nil, c.stopWith(err)
	}
	return c, nil
}

// startHelpers (re)starts the readiness tracker and the Deployment stub.
func (c *cluster) startHelpers(ctx context.Context) error {
	cfg := harnessConfig(c.env.Config)
	var err error
	if c.tracker == nil {
		if c.tracker, err = startTracker(ctx, cfg, c.scheme); err != nil {
			return err
		}
	}
	if c.stub == nil {
		if c.stub, err = startDeploymentStub(ctx, cfg, c.scheme); err != nil {
			return err
		}
	}
	return nil
}

// stopHelpers stops the tracker and the stub, so their caches are not part of
// a memory measurement.
func (c *cluster) stopHelpers() {
	if c.tracker != nil {
		c.tracker.stop()
		c.tracker = nil
	}
	if c.stub != nil {
		c.stub.stop()
		c.stub = nil
	}
}

func (c *cluster) stop() error {
	c.stopHelpers()
	return c.env.Stop()
}

func (c *cluster) stopWith(err error) error { return errors.Join(err, c.stop()) }

func harnessConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.QPS, out.Burst = harnessQPS, harnessBurst
	return out
}

func serverVersion(cfg *rest.Config) (string, error) {
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", err
	}
	v, err := d.ServerVersion()
	if err != nil {
		return "", err
	}
	return v.GitVersion, nil
}

// readyFor reports whether app's status says Ready=True for its current
// generation: status.observedGeneration and the Ready condition's
// observedGeneration both equal metadata.generation, and it is not still
// Reconciling. The example keeps an older Ready=True while it reconciles a new
// generation, so the condition's own observedGeneration matters.
func readyFor(app *webappv1.WebApp) bool {
	ready := conditions.Get(app, conditions.Ready)
	return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == app.Generation &&
		app.Status.ObservedGeneration == app.Generation && !conditions.IsTrue(app, conditions.Reconciling)
}

// tracker watches WebApps through its own informer and records, for each
// expected (name, generation), the time from the moment the load generator
// sent the change to the first event showing it Ready; and for each expected
// deletion, the time until the object is gone.
type tracker struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	pending  map[string]map[int64]time.Time
	gone     map[string]time.Time
	lat      []time.Duration
	lastDone time.Time
	changed  chan struct{}
}

func startTracker(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme) (*tracker, error) {
	ctx, cancel := context.WithCancel(ctx)
	t := &tracker{cancel: cancel, done: make(chan struct{}), pending: map[string]map[int64]time.Time{},
		gone: map[string]time.Time{}, changed: make(chan struct{}, 1)}
	ca, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{namespace: {}}})
	if err != nil {
		cancel()
		return nil, err
	}
	inf, err := ca.GetInformer(ctx, &webappv1.WebApp{})
	if err != nil {
		cancel()
		return nil, err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.observe(obj) },
		UpdateFunc: func(_, obj any) { t.observe(obj) },
		DeleteFunc: t.deleted,
	}); err != nil {
		cancel()
		return nil, err
	}
	go func() {
		defer close(t.done)
		_ = ca.Start(ctx)
	}()
	if !ca.WaitForCacheSync(ctx) {
		cancel()
		<-t.done
		return nil, errors.New("tracker: cache did not sync")
	}
	return t, nil
}

func (t *tracker) stop() { t.cancel(); <-t.done }

// expect registers that name should become Ready at generation gen; call it
// before sending the change.
func (t *tracker) expect(name string, gen int64, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending[name] == nil {
		t.pending[name] = map[int64]time.Time{}
	}
	t.pending[name][gen] = at
}

// expectGone registers that name should disappear; call it before deleting.
func (t *tracker) expectGone(name string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gone[name] = at
}

func (t *tracker) observe(obj any) {
	app, ok := obj.(*webappv1.WebApp)
	if !ok || !readyFor(app) {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	gens := t.pending[app.Name]
	for g, at := range gens {
		if g <= app.Generation {
			t.lat = append(t.lat, now.Sub(at))
			delete(gens, g)
			t.lastDone = now
		}
	}
	if len(gens) == 0 {
		delete(t.pending, app.Name)
	}
	t.signal()
}

func (t *tracker) deleted(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	app, ok := obj.(*webappv1.WebApp)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if at, ok := t.gone[app.Name]; ok {
		t.lat = append(t.lat, now.Sub(at))
		delete(t.gone, app.Name)
		t.lastDone = now
	}
	delete(t.pending, app.Name)
	t.signal()
}

func (t *tracker) signal() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// outstanding is how many expectations are not met yet.
func (t *tracker) outstanding() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.gone)
	for _, g := range t.pending {
		n += len(g)
	}
	return n
}

// forget drops every expectation for name (its change was not sent).
func (t *tracker) forget(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending, name)
	delete(t.gone, name)
}

// forgetGen drops the expectation for one generation of name.
func (t *tracker) forgetGen(name string, gen int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending[name], gen)
	if len(t.pending[name]) == 0 {
		delete(t.pending, name)
	}
}

// reset forgets the latencies recorded so far (not the expectations).
func (t *tracker) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lat = nil
	t.lastDone = time.Time{}
}

// results returns the latencies recorded since the last reset, sorted, and
// when the last expectation was met.
func (t *tracker) results() ([]time.Duration, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]time.Duration(nil), t.lat...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, t.lastDone
}

// wait blocks until every expectation is met, ctx ends, or timeout passes; it
// returns how many are still outstanding.
func (t *tracker) wait(ctx context.Context, timeout time.Duration) int {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		n := t.outstanding()
		if n == 0 {
			return 0
		}
		select {
		case <-ctx.Done():
			return n
		case <-deadline.C:
			return n
		case <-t.changed:
		case <-tick.C:
		}
	}
}

// deploymentStub stands in for kube-controller-manager's Deployment
// controller without running pods: whenever a Deployment's status does not
// describe its generation, it writes a status saying every replica is
// updated, ready and available. It runs in every throughput scenario, for
// every contender (the ceiling included), so Ready=True is reachable and the
// Deployment status update is part of every contender's environment.
type deploymentStub struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	queue  workqueue.TypedInterface[types.NamespacedName]
}

func startDeploymentStub(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme) (*deploymentStub, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &deploymentStub{cancel: cancel, queue: workqueue.NewTyped[types.NamespacedName]()}
	ca, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{namespace: {}}})
	if err != nil {
		cancel()
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		cancel()
		return nil, err
	}
	inf, err := ca.GetInformer(ctx, &appsv1.Deployment{})
	if err != nil {
		cancel()
		return nil, err
	}
	enqueue := func(obj any) {
		if d, ok := obj.(*appsv1.Deployment); ok && d.Status.ObservedGeneration < d.Generation {
			s.queue.Add(types.NamespacedName{Namespace: d.Namespace, Name: d.Name})
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		cancel()
		return nil, err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = ca.Start(ctx)
	}()
	if !ca.WaitForCacheSync(ctx) {
		s.stop()
		return nil, errors.New("deployment stub: cache did not sync")
	}
	const workers = 4
	for range workers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for {
				key, shutdown := s.queue.Get()
				if shutdown {
					return
				}
				s.sync(ctx, ca, c, key)
				s.queue.Done(key)
			}
		}()
	}
	return s, nil
}

func (s *deploymentStub) sync(ctx context.Context, r client.Reader, c client.Client, key types.NamespacedName) {
	dep := &appsv1.Deployment{}
	if err := r.Get(ctx, key, dep); err != nil || dep.Status.ObservedGeneration >= dep.Generation {
		return
	}
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	now := metav1.Now()
	patch := map[string]any{"status": map[string]any{
		"observedGeneration": dep.Generation,
		"replicas":           want, "updatedReplicas": want, "readyReplicas": want, "availableReplicas": want,
		"conditions": []map[string]any{
			{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability.",
				"lastUpdateTime": now, "lastTransitionTime": now},
			{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": "ReplicaSet has successfully progressed.",
				"lastUpdateTime": now, "lastTransitionTime": now},
		},
	}}
	data, err := json.Marshal(patch)
	if err != nil {
		return
	}
	if err := c.Status().Patch(ctx, dep, client.RawPatch(types.MergePatchType, data)); err != nil && ctx.Err() == nil {
		s.queue.Add(key) // a later event may also bring it back; once is enough
	}
}

func (s *deploymentStub) stop() {
	s.cancel()
	s.queue.ShutDown()
	s.wg.Wait()
}

// failureCounter counts responses with an HTTP status of 400 or more, by
// status code, for the requests sent through a config it wrapped; and the
// dry-run requests (dryRun=All), which persist nothing.
type failureCounter struct {
	mu      sync.Mutex
	counts  map[int]int
	dryRuns int
}

func countFailures(cfg *rest.Config) (*rest.Config, *failureCounter) {
	f := &failureCounter{counts: map[int]int{}}
	out := rest.CopyConfig(cfg)
	prev := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Has("dryRun") {
				f.mu.Lock()
				f.dryRuns++
				f.mu.Unlock()
			}
			resp, err := rt.RoundTrip(req)
			code := 0 // transport error
			if err == nil {
				code = resp.StatusCode
			}
			if err != nil || code >= 400 {
				f.mu.Lock()
				f.counts[code]++
				f.mu.Unlock()
			}
			return resp, err
		})
	}
	return out, f
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (f *failureCounter) snapshot() map[int]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[int]int, len(f.counts))
	for k, v := range f.counts {
		out[k] = v
	}
	return out
}

// dryRunCount is how many dry-run requests were sent.
func (f *failureCounter) dryRunCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dryRuns
}

func (f *failureCounter) reset() {
	f.mu.Lock()
	f.counts = map[int]int{}
	f.dryRuns = 0
	f.mu.Unlock()
}

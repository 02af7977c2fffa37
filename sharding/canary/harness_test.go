package canary_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/sharding"
	"github.com/opkit/opkit/sharding/canary"
	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := addWidgets(scheme); err != nil {
		panic(err)
	}
	os.Exit(testenv.RunMain(m, &env, testenv.WithCRDPaths("testdata"), testenv.WithScheme(scheme)))
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 50ms until it holds or timeout passes and
// returns how long it took.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	last := ""
	for time.Since(start) < timeout {
		ok, msg := cond()
		if ok {
			return time.Since(start)
		}
		last = msg
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not true after %s: %s", what, timeout, last)
	return 0
}

// behaviour is what one operator version does to a Widget.
type behaviour struct {
	// shape is written into the child ConfigMap's data["shape"].
	shape string
	// stall makes the version fail every Widget: Stalled=True, Ready=False.
	stall bool
}

var (
	v1     = behaviour{shape: "v1"}
	v2Good = behaviour{shape: "v2"}
	v2Bad  = behaviour{shape: "v2-broken", stall: true}
)

// overlap counts, per Widget, the versions inside its reconcile at once.
type overlap struct {
	mu    sync.Mutex
	cur   map[string]map[string]int
	max   int
	worst string
	total int
}

func (o *overlap) enter(key, version string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur == nil {
		o.cur = map[string]map[string]int{}
	}
	if o.cur[key] == nil {
		o.cur[key] = map[string]int{}
	}
	o.cur[key][version]++
	o.total++
	n := 0
	for _, c := range o.cur[key] {
		n += c
	}
	if n > o.max {
		o.max, o.worst = n, key
	}
}

func (o *overlap) exit(key, version string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur[key][version]--; o.cur[key][version] == 0 {
		delete(o.cur[key], version)
	}
}

// fleet is an operator's replicas of several versions, in this process.
type fleet struct {
	t        testing.TB
	ring, ns string
	overlap  overlap
	reg      *prometheus.Registry
	metrics  *canary.Metrics
	ropts    []canary.Option

	mu     sync.Mutex
	errors map[string]float64 // version → reconciles that stalled a Widget
}

// errorCounts is the fleet's canary.WithErrorCounts source: each reconcile
// a version made that stalled a Widget counts as one of its errors.
func (f *fleet) errorCounts(_ context.Context, version string) (float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.errors[version], nil
}

func (f *fleet) countError(version string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.errors == nil {
		f.errors = map[string]float64{}
	}
	f.errors[version]++
}

func newFleet(t testing.TB, ring string, ropts ...canary.Option) *fleet {
	reg := prometheus.NewRegistry()
	m, err := canary.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, ring: ring, ns: env.Namespace(t), reg: reg, metrics: m}
	f.ropts = append([]canary.Option{canary.WithErrorCounts(f.errorCounts)}, ropts...)
	return f
}

// start runs one replica: member of the ring announcing version, with
// weight (nil: the default), reconciling Widgets as b says, and the ring's
// assigner and rollout, which run on the replica elected among them.
func (f *fleet) start(member, version string, b behaviour, weight *int) {
	t := f.t
	opts := []sharding.ShardOption{sharding.WithLeaseDuration(2 * time.Second), sharding.WithVersion(version)}
	if weight != nil {
		opts = append(opts, sharding.WithWeight(*weight))
	}
	shard, err := sharding.NewShard(f.ring, member, f.ns, opts...)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := manager.New(env.Config, manager.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{f.ns: {}},
			ByObject:          shard.CacheByObject(&Widget{}, &corev1.ConfigMap{}),
		},
		LeaderElection:                true,
		LeaderElectionID:              f.ring + "-assigner",
		LeaderElectionNamespace:       f.ns,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr.To(2 * time.Second),
		RenewDeadline:                 ptr.To(1500 * time.Millisecond),
		RetryPeriod:                   ptr.To(200 * time.Millisecond),
		Controller:                    config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := sharding.NewAssigner(f.ring, f.ns, sharding.WithChildren(&Widget{}, &corev1.ConfigMap{}), sharding.WithNamespaces(f.ns))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ropts := append([]canary.Option{canary.WithNamespaces(f.ns), canary.WithObserver(f.metrics),
		canary.WithEventRecorder(mgr.GetEventRecorder("canary"))}, f.ropts...)
	ro, err := canary.New(f.ring, f.ns, &Widget{}, ropts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := ro.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := shard.SetupWithManager(mgr, &Widget{}); err != nil {
		t.Fatal(err)
	}
	cl := mgr.GetClient()
	inner := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		key := req.String()
		f.overlap.enter(key, version)
		defer f.overlap.exit(key, version)
		w := &Widget{}
		if err := cl.Get(ctx, req.NamespacedName, w); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name}}
		if _, err := controllerutil.CreateOrUpdate(ctx, cl, cm, func() error {
			shard.LabelChild(w, cm)
			cm.Data = map[string]string{"shape": b.shape}
			return controllerutil.SetControllerReference(w, cm, cl.Scheme())
		}); err != nil {
			return reconcile.Result{}, err
		}
		time.Sleep(5 * time.Millisecond) // widen the window in which an overlap would show
		before := w.DeepCopyObject().(*Widget)
		ready, stalled := metav1.ConditionTrue, metav1.ConditionFalse
		if b.stall {
			ready, stalled = metav1.ConditionFalse, metav1.ConditionTrue
		}
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: "Ready", Status: ready, Reason: "Reconciled", ObservedGeneration: w.Generation})
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: "Stalled", Status: stalled, Reason: "Reconciled", ObservedGeneration: w.Generation})
		w.Status.ObservedGeneration = w.Generation
		if err := cl.Status().Patch(ctx, w, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		if b.stall {
			f.countError(version)
		}
		return reconcile.Result{}, nil
	})
	if err := builder.ControllerManagedBy(mgr).Named("widgets-"+member).
		For(&Widget{}, builder.WithPredicates(shard.Predicate())).
		Owns(&corev1.ConfigMap{}).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), MaxConcurrentReconciles: 4}).
		Complete(sharding.Wrap[Widget](shard, inner)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("replica %s: %v", member, err)
		}
	})
}

func (f *fleet) createWidgets(n int) {
	ctx := testCtx(f.t, 5*time.Minute)
	for i := range n {
		w := &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("w-%04d", i)}}
		if err := env.Client.Create(ctx, w); err != nil {
			f.t.Fatal(err)
		}
	}
}

// snapshot is the Widgets and their children as the API server has them.
type snapshot struct {
	owner    map[string]string // Widget → member
	ready    map[string]bool
	shape    map[string]string // Widget → its child's data["shape"]
	childUID map[string]string // Widget → its child's UID
	children int               // child ConfigMaps (controlled by a Widget)
	draining int
}

func (f *fleet) read() (snapshot, error) {
	ctx := testCtx(f.t, 30*time.Second)
	var ws WidgetList
	if err := env.Client.List(ctx, &ws, client.InNamespace(f.ns)); err != nil {
		return snapshot{}, err
	}
	var cms corev1.ConfigMapList
	if err := env.Client.List(ctx, &cms, client.InNamespace(f.ns)); err != nil {
		return snapshot{}, err
	}
	s := snapshot{owner: map[string]string{}, ready: map[string]bool{}, shape: map[string]string{}, childUID: map[string]string{}}
	for _, w := range ws.Items {
		s.owner[w.Name] = w.Labels[sharding.ShardLabel(f.ring)]
		if _, ok := w.Labels[sharding.DrainLabel(f.ring)]; ok {
			s.draining++
		}
		s.ready[w.Name] = meta.IsStatusConditionTrue(w.Status.Conditions, "Ready") && w.Status.ObservedGeneration == w.Generation
	}
	for _, cm := range cms.Items {
		if ref := metav1.GetControllerOf(&cm); ref != nil && ref.Kind == "Widget" {
			s.children++
			s.shape[ref.Name] = cm.Data["shape"]
			s.childUID[ref.Name] = string(cm.UID)
		}
	}
	return s, nil
}

// all reports whether every Widget is on one of members, Ready, with a
// child of shape, none draining.
func (f *fleet) all(members []string, shape string) (bool, string) {
	s, err := f.read()
	if err != nil {
		return false, err.Error()
	}
	for name, m := range s.owner {
		switch {
		case !slices.Contains(members, m):
			return false, fmt.Sprintf("%s is on %q", name, m)
		case !s.ready[name]:
			return false, fmt.Sprintf("%s is not Ready", name)
		case s.shape[name] != shape:
			return false, fmt.Sprintf("%s's child has shape %q, want %q", name, s.shape[name], shape)
		}
	}
	if s.draining > 0 {
		return false, fmt.Sprintf("%d draining", s.draining)
	}
	return true, ""
}

func (f *fleet) state() canary.State {
	st, err := canary.Get(testCtx(f.t, 10*time.Second), env.Client, f.ring, f.ns)
	if err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatal(err)
	}
	return st
}

// waitPhase waits for the rollout to reach phase, recording every percent
// it passed through on the way.
func (f *fleet) waitPhase(timeout time.Duration, phase canary.Phase, seen map[int]bool) time.Duration {
	f.t.Helper()
	return eventually(f.t, timeout, "phase "+string(phase), func() (bool, string) {
		st := f.state()
		if seen != nil && st.Phase == canary.PhaseProgressing {
			seen[st.Percent] = true
		}
		return st.Phase == phase, fmt.Sprintf("phase %s at %d%%: %s", st.Phase, st.Percent, st.Message)
	})
}

// annotate sets the rollout's action annotation, as kubectl annotate does.
func (f *fleet) annotate(action string) {
	f.t.Helper()
	out, err := env.Kubectl(testCtx(f.t, 30*time.Second), "annotate", "--overwrite", "-n", f.ns, "configmap", canary.StateName(f.ring), canary.ActionAnnotation+"="+action)
	if err != nil {
		f.t.Fatalf("kubectl annotate: %v: %s", err, out)
	}
}

func gauge(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

func (f *fleet) kubectl(args ...string) (string, error) {
	return env.Kubectl(testCtx(f.t, 30*time.Second), append([]string{"-n", f.ns}, args...)...)
}

// Max returns the most reconciles of one Widget seen at once, and which.
func (o *overlap) Max() (int, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.max, o.worst
}

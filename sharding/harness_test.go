package sharding_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard())
	os.Exit(testenv.RunMain(m, &env))
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 50ms until it holds or timeout passes, and
// returns how long it took.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
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

// fixedNamespace creates a namespace with exactly this name (so that object
// keys, and therefore their hashes, are the same on every run) and deletes it
// at cleanup.
func fixedNamespace(t testing.TB, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(testCtx(t, 30*time.Second), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), ns)
	})
	return name
}

// overlapDetector counts concurrent reconciles per object across all shards.
type overlapDetector struct {
	mu    sync.Mutex
	cur   map[string]int
	max   int
	worst string
}

func (o *overlapDetector) enter(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur == nil {
		o.cur = map[string]int{}
	}
	o.cur[key]++
	if o.cur[key] > o.max {
		o.max, o.worst = o.cur[key], key
	}
}

func (o *overlapDetector) exit(key string) {
	o.mu.Lock()
	o.cur[key]--
	o.mu.Unlock()
}

func (o *overlapDetector) Max() (int, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.max, o.worst
}

type countingObserver struct {
	assigned, movedImmediate, movedDrained, drainRequested, drainAcked, recomputed atomic.Int64
	mu                                                                             sync.Mutex
	counts                                                                         map[string]int
}

func (c *countingObserver) ObjectAssigned(string, string) { c.assigned.Add(1) }
func (c *countingObserver) ObjectMoved(_, _, _ string, immediate bool) {
	if immediate {
		c.movedImmediate.Add(1)
	} else {
		c.movedDrained.Add(1)
	}
}
func (c *countingObserver) DrainRequested(string, string)    { c.drainRequested.Add(1) }
func (c *countingObserver) DrainAcknowledged(string, string) { c.drainAcked.Add(1) }
func (c *countingObserver) RingRecomputed(string, []string)  { c.recomputed.Add(1) }
func (c *countingObserver) MemberObjects(_ string, counts map[string]int) {
	c.mu.Lock()
	c.counts = counts
	c.mu.Unlock()
}

func (c *countingObserver) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts
}

func (c *countingObserver) String() string {
	return fmt.Sprintf("assigned=%d moved(immediate)=%d moved(after drain)=%d drains requested=%d acknowledged=%d ring recomputations=%d",
		c.assigned.Load(), c.movedImmediate.Load(), c.movedDrained.Load(), c.drainRequested.Load(), c.drainAcked.Load(), c.recomputed.Load())
}

// cluster is a set of in-process replicas of one sharded operator.
type cluster struct {
	t        testing.TB
	ring, ns string
	lease    time.Duration
	requeue  time.Duration
	overlap  overlapDetector
	obs      countingObserver
	work     time.Duration

	replicas []*replica

	mu     sync.Mutex
	lastBy map[string]string // ConfigMap name → member whose reconcile last finished
	total  atomic.Int64
}

type replica struct {
	member string
	shard  *sharding.Shard
	mgr    manager.Manager
	cancel context.CancelFunc
	done   chan error
}

func newCluster(t testing.TB, ring, ns string) *cluster {
	return &cluster{t: t, ring: ring, ns: ns, lease: 2 * time.Second, requeue: 2 * time.Second, work: 5 * time.Millisecond, lastBy: map[string]string{}}
}

// start runs a replica: its own manager and cache (restricted to its shard),
// a ConfigMap controller without leader election that creates one owned
// Secret per ConfigMap, and the ring's assigner, which runs only on the
// replica elected through the manager's leader-election Lease.
func (c *cluster) start(member string, opts ...sharding.ShardOption) *replica {
	return c.startReplica(member, true, opts...)
}

// startAssignerOnly runs a replica that is no member of the ring but may be
// elected to run its assigner.
func (c *cluster) startAssignerOnly() *replica { return c.startReplica("assigner-only", false) }

func (c *cluster) startReplica(member string, isMember bool, opts ...sharding.ShardOption) *replica {
	t := c.t
	t.Helper()
	opts = append([]sharding.ShardOption{
		sharding.WithLeaseDuration(c.lease),
		sharding.WithObserver(&c.obs),
	}, opts...)
	shard, err := sharding.NewShard(c.ring, member, c.ns, opts...)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := manager.New(env.Config, manager.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{c.ns: {}},
			ByObject:          shard.CacheByObject(&corev1.ConfigMap{}, &corev1.Secret{}),
		},
		LeaderElection:                true,
		LeaderElectionID:              c.ring + "-assigner",
		LeaderElectionNamespace:       c.ns,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr.To(2 * time.Second),
		RenewDeadline:                 ptr.To(1500 * time.Millisecond),
		RetryPeriod:                   ptr.To(200 * time.Millisecond),
		Controller:                    config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	assigner, err := sharding.NewAssigner(c.ring, c.ns,
		sharding.WithChildren(&corev1.ConfigMap{}, &corev1.Secret{}),
		sharding.WithNamespaces(c.ns),
		sharding.WithObserver(&c.obs),
		sharding.WithEventRecorder(mgr.GetEventRecorder("sharding-"+c.ring)))
	if err != nil {
		t.Fatal(err)
	}
	if err := assigner.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{member: member, shard: shard, mgr: mgr, cancel: cancel, done: make(chan error, 1)}
	if isMember {
		c.addController(r)
	}
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	c.replicas = append(c.replicas, r)
	return r
}

func (c *cluster) addController(r *replica) {
	t, shard, mgr, member := c.t, r.shard, r.mgr, r.member
	if err := shard.SetupWithManager(mgr, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	cl := mgr.GetClient()
	inner := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		key := req.String()
		c.overlap.enter(key)
		defer c.overlap.exit(key)
		c.total.Add(1)
		cm := &corev1.ConfigMap{}
		if err := cl.Get(ctx, req.NamespacedName, cm); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		secret := &corev1.Secret{}
		if err := cl.Get(ctx, req.NamespacedName, secret); apierrors.IsNotFound(err) {
			secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}}
			shard.LabelChild(cm, secret)
			if err := controllerutil.SetControllerReference(cm, secret, cl.Scheme()); err != nil {
				return reconcile.Result{}, err
			}
			// AlreadyExists: it exists but is not (yet) labelled for us.
			if err := cl.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
				return reconcile.Result{}, err
			}
		}
		time.Sleep(c.work) // widen the window in which an overlap would show
		c.mu.Lock()
		c.lastBy[req.Name] = member
		c.mu.Unlock()
		return reconcile.Result{RequeueAfter: c.requeue}, nil
	})
	err := builder.ControllerManagedBy(mgr).
		Named("configmaps-"+member).
		For(&corev1.ConfigMap{}, builder.WithPredicates(shard.Predicate())).
		Owns(&corev1.Secret{}).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), MaxConcurrentReconciles: 4}).
		Complete(sharding.Wrap[corev1.ConfigMap](shard, inner))
	if err != nil {
		t.Fatal(err)
	}
}

func (r *replica) stop(t testing.TB) {
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("replica %s: %v", r.member, err)
		}
		r.done <- nil // later stops return at once
	case <-time.After(60 * time.Second):
		t.Errorf("replica %s did not stop", r.member)
	}
}

func (c *cluster) createConfigMaps(n int) {
	ctx := testCtx(c.t, 5*time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: fmt.Sprintf("obj-%04d", i)}}
			if err := env.Client.Create(ctx, cm); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		c.t.Fatal(err)
	}
}

// settled reports whether every ConfigMap carries the label the ring of
// members assigns it and no drain label, was last reconciled by that member
// (so a moved object has been reconciled by its new member), and its Secret
// carries the same label.
func (c *cluster) settled(members []string) (bool, string) {
	return c.settledOn(sharding.NewRing(members))
}

// settledOn is settled for the objects' places on ring.
func (c *cluster) settledOn(ring *sharding.Ring) (bool, string) {
	ctx := testCtx(c.t, 30*time.Second)
	cms := &corev1.ConfigMapList{}
	if err := env.Client.List(ctx, cms, client.InNamespace(c.ns)); err != nil {
		return false, err.Error()
	}
	secrets := &corev1.SecretList{}
	if err := env.Client.List(ctx, secrets, client.InNamespace(c.ns)); err != nil {
		return false, err.Error()
	}
	secretLabel := map[string]string{}
	for _, s := range secrets.Items {
		secretLabel[s.Name] = s.Labels[sharding.ShardLabel(c.ring)]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	bad := 0
	first := ""
	for _, cm := range cms.Items {
		if cm.Name == "kube-root-ca.crt" {
			continue
		}
		want := ring.Lookup(sharding.ObjectKey(schema.GroupKind{Kind: "ConfigMap"}, cm.Namespace, cm.Name))
		got := cm.Labels[sharding.ShardLabel(c.ring)]
		_, drain := cm.Labels[sharding.DrainLabel(c.ring)]
		if got != want || drain || c.lastBy[cm.Name] != want || secretLabel[cm.Name] != want {
			bad++
			if first == "" {
				first = fmt.Sprintf("%s: label %q (want %q) drain=%v reconciled by %q, secret label %q",
					cm.Name, got, want, drain, c.lastBy[cm.Name], secretLabel[cm.Name])
			}
		}
	}
	return bad == 0, fmt.Sprintf("%d of %d objects not settled, e.g. %s", bad, len(cms.Items), first)
}

// spread returns how many ConfigMaps each member has.
func (c *cluster) spread() map[string]int {
	cms := &corev1.ConfigMapList{}
	if err := env.Client.List(testCtx(c.t, 30*time.Second), cms, client.InNamespace(c.ns)); err != nil {
		c.t.Fatal(err)
	}
	out := map[string]int{}
	for _, cm := range cms.Items {
		out[cm.Labels[sharding.ShardLabel(c.ring)]]++
	}
	return out
}

// ownedBy lists the ConfigMaps labelled for member.
func (c *cluster) ownedBy(member string) []string {
	cms := &corev1.ConfigMapList{}
	if err := env.Client.List(testCtx(c.t, 30*time.Second), cms, client.InNamespace(c.ns),
		client.MatchingLabels{sharding.ShardLabel(c.ring): member}); err != nil {
		c.t.Fatal(err)
	}
	out := make([]string, 0, len(cms.Items))
	for _, cm := range cms.Items {
		out = append(out, cm.Name)
	}
	return out
}

// checkChildrenLabelledFirst checks that the assigner labelled each moved
// ConfigMap's Secret before the ConfigMap itself, so the new member's first
// reconcile finds the Secret in its cache. Nothing but the assigner writes
// these objects after they settled, so their last writes are the label
// patches, and etcd's resourceVersions (opaque to clients, but a global
// revision on this real control plane) order them.
func (c *cluster) checkChildrenLabelledFirst(names []string) {
	c.t.Helper()
	ctx := testCtx(c.t, 30*time.Second)
	if len(names) == 0 {
		c.t.Fatal("no moved objects to check")
	}
	for _, name := range names {
		key := client.ObjectKey{Namespace: c.ns, Name: name}
		cm, secret := &corev1.ConfigMap{}, &corev1.Secret{}
		if err := env.Client.Get(ctx, key, cm); err != nil {
			c.t.Fatal(err)
		}
		if err := env.Client.Get(ctx, key, secret); err != nil {
			c.t.Fatal(err)
		}
		cmRV, err1 := strconv.ParseInt(cm.ResourceVersion, 10, 64)
		secretRV, err2 := strconv.ParseInt(secret.ResourceVersion, 10, 64)
		if err1 != nil || err2 != nil {
			c.t.Fatalf("resourceVersions %q, %q are not etcd revisions", cm.ResourceVersion, secret.ResourceVersion)
		}
		if secretRV > cmRV {
			c.t.Errorf("%s: its Secret was relabelled (rv %d) after it (rv %d): the new member could see the owner before its child", name, secretRV, cmRV)
		}
	}
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// reconciledNames records which object names each member reconciled.
type reconciledNames struct {
	mu    sync.Mutex
	names map[string][]string
}

func (r *reconciledNames) add(member, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names == nil {
		r.names = map[string][]string{}
	}
	if !slices.Contains(r.names[member], name) {
		r.names[member] = append(r.names[member], name)
	}
}

func (r *reconciledNames) sorted(member string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.names[member]))
}

// runManager starts mgr until the test ends and fails the test if Start errs.
func runManager(ctx context.Context, t testing.TB, mgr manager.Manager) {
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

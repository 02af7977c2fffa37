package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/examples/webapp/registry"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/reconciler"
	"github.com/opkit/opkit/sharding"
	"github.com/opkit/opkit/sharding/canary"
)

// DefaultRing names the demo's ring: WebApps carry the label
// shard.opkit.dev/webapp=<member>, member Leases ring.shard.opkit.dev/name=webapp.
const DefaultRing = "webapp"

// webAppGK is what the ring hashes WebApps under (sharding.ObjectKey).
var webAppGK = schema.GroupKind{Group: webappv1.GroupVersion.Group, Kind: "WebApp"}

// children are the WebApp's child types: they follow their owner's shard.
func children() []client.Object {
	return []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}}
}

// ReplicaOptions configure one replica of the sharded webapp operator.
type ReplicaOptions struct {
	// Ring and Member name the ring and this replica's place in it (DNS-1123 labels).
	Ring, Member string
	// Namespace holds the WebApps, the member Leases and the assigner's
	// leader-election Lease. The replica's caches and the assigner watch only it.
	Namespace string
	// LeaseDuration is the member Lease's duration: a replica that stops
	// renewing is dead, and its WebApps move, after twice this.
	LeaseDuration time.Duration
	// Scheme holds client-go's types and the WebApp API.
	Scheme *runtime.Scheme
	// Detector, when set, watches this replica's reconciles.
	Detector *OverlapDetector
	// Observer receives the assigner's metrics (moves, drains), when this
	// replica runs it.
	Observer sharding.Observer
	// ReleaseOnStop makes Stop graceful: the member Lease and the assigner's
	// leader-election Lease are released, so the WebApps move at once. Without
	// it, stopping the replica is a crash as far as the others can tell.
	ReleaseOnStop bool
	// Concurrency is the webapp controller's MaxConcurrentReconciles (0: the
	// controller's default).
	Concurrency int
	// Version is the operator version the member announces on its Lease
	// (sharding.WithVersion); empty announces none.
	Version string
	// Weight, when set, is the weight the member announces on a new Lease
	// (sharding.WithWeight): 0 for a canary, which joins owning nothing.
	Weight *int
	// MutateChildren is the webapp controller's option of that name: how
	// this version's children differ from the webapp operator's.
	MutateChildren func(app *webappv1.WebApp, children []client.Object)
	// Rollout, when not nil, adds a canary rollout of the ring
	// (sharding/canary) with these options to the replica; like the
	// assigner it runs only on the elected replica.
	Rollout []canary.Option
	// Clock, when set, is the replica's clock for its member Lease and its
	// assigner (sharding.WithClock): a test gives replicas skewed clocks.
	// Nil: the wall clock.
	Clock clock.WithTicker
	// Registry, when set, is the route registry the replica's webapp
	// controller registers and releases routes in: one external system
	// shared by the ring (a WebApp's route outlives its move to another
	// replica). Nil: a registry of the replica's own.
	Registry *registry.Registry
}

// Replica is one replica of the sharded webapp operator: what one pod of a
// real deployment runs. Its manager's cache holds only the WebApps labelled
// for it and their children; its webapp controller reconciles only those,
// without leader election; the ring's assigner runs in it only while it holds
// the assigner's leader-election Lease.
type Replica struct {
	Member string
	// Version is the operator version the replica announces ("" for none).
	Version  string
	Shard    *sharding.Shard
	Registry *registry.Registry
	reg      *prometheus.Registry

	mgr     manager.Manager
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
	stopped atomic.Bool
}

// NewReplica builds a replica against cfg; [Replica.Start] runs it.
func NewReplica(cfg *rest.Config, o ReplicaOptions) (*Replica, error) {
	sopts := []sharding.ShardOption{
		sharding.WithLeaseDuration(o.LeaseDuration),
		sharding.WithReleaseOnStop(o.ReleaseOnStop),
		sharding.WithVersion(o.Version),
		sharding.WithClock(o.Clock),
	}
	if o.Weight != nil {
		sopts = append(sopts, sharding.WithWeight(*o.Weight))
	}
	shard, err := sharding.NewShard(o.Ring, o.Member, o.Namespace, sopts...)
	if err != nil {
		return nil, err
	}
	// The assigner moves objects off a member only once it is dead, so a lost
	// election costs at most one leader lease before a survivor assigns again.
	leader := max(o.LeaseDuration, 2*time.Second)
	opts := manager.Options{
		Scheme:                 o.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{o.Namespace: {}},
			// Only this member's WebApps and their children. Nothing else in
			// this manager reads these types from the cache; whatever did would
			// see only this shard's objects (use the API reader for others).
			ByObject: shard.CacheByObject(append([]client.Object{&webappv1.WebApp{}}, children()...)...),
			// opkit's recommended cache options (reconciler.CacheOptions):
			// managedFields are not cached.
			DefaultTransform: reconciler.CompactMetadata,
		},
		LeaderElection:                true,
		LeaderElectionID:              o.Ring + "-assigner",
		LeaderElectionNamespace:       o.Namespace,
		LeaderElectionReleaseOnCancel: o.ReleaseOnStop,
		LeaseDuration:                 ptr.To(leader),
		RenewDeadline:                 ptr.To(leader * 3 / 4),
		RetryPeriod:                   ptr.To(leader / 8),
		Controller: config.Controller{
			// Every replica in this process registers a "webapp" controller.
			SkipNameValidation: ptr.To(true),
			// The one-reconciler-per-object guarantee holds for reconciles that
			// return within the dead grace (one lease duration); this bounds them.
			ReconciliationTimeout: o.LeaseDuration,
		},
	}
	opts.NewClient = newReplicaClient(o.Member, o.Detector)
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("replica %s: manager: %w", o.Member, err)
	}
	// Metrics of each replica on a registry of its own: three replicas share
	// this process.
	reg := prometheus.NewRegistry()
	obs, err := observability.Setup(mgr, observability.WithRegisterer(reg), observability.WithGatherer(reg))
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", o.Member, err)
	}
	aopts := []sharding.AssignerOption{
		sharding.WithChildren(&webappv1.WebApp{}, children()...),
		sharding.WithNamespaces(o.Namespace),
		sharding.WithEventRecorder(mgr.GetEventRecorder("sharding-" + o.Ring)),
		sharding.WithClock(o.Clock),
	}
	if o.Observer != nil {
		aopts = append(aopts, sharding.WithObserver(o.Observer))
	}
	assigner, err := sharding.NewAssigner(o.Ring, o.Namespace, aopts...)
	if err != nil {
		return nil, err
	}
	if err := assigner.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("replica %s: %w", o.Member, err)
	}
	if o.Rollout != nil {
		cm, err := canary.NewMetrics(reg)
		if err != nil {
			return nil, fmt.Errorf("replica %s: %w", o.Member, err)
		}
		ropts := append([]canary.Option{
			canary.WithNamespaces(o.Namespace),
			canary.WithObserver(cm),
			canary.WithEventRecorder(mgr.GetEventRecorder("canary-" + o.Ring)),
		}, o.Rollout...)
		ro, err := canary.New(o.Ring, o.Namespace, &webappv1.WebApp{}, ropts...)
		if err != nil {
			return nil, fmt.Errorf("replica %s: %w", o.Member, err)
		}
		if err := ro.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("replica %s: %w", o.Member, err)
		}
	}
	r := &Replica{Member: o.Member, Version: o.Version, Shard: shard, Registry: o.Registry, mgr: mgr, reg: reg}
	if r.Registry == nil {
		r.Registry = registry.New()
	}
	// The builder's Shard option guards every reconcile with shard.Begin,
	// labels the children, and registers the shard (Lease, drain
	// acknowledgement) with the manager.
	if err := controller.Setup(mgr, controller.Options{Registry: r.Registry, Observability: obs, Shard: shard,
		Concurrency: o.Concurrency, MutateChildren: o.MutateChildren}); err != nil {
		return nil, fmt.Errorf("replica %s: %w", o.Member, err)
	}
	return r, nil
}

// Gatherer returns the replica's own Prometheus registry: its webapp
// controller's and sharding's metrics, and the canary rollout's
// (opkit_canary_*) when it was built with Rollout.
func (r *Replica) Gatherer() prometheus.Gatherer { return r.reg }

// Start runs the replica until ctx ends or [Replica.Stop].
func (r *Replica) Start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		r.err = r.mgr.Start(ctx)
	}()
}

// Stop stops the replica's manager and waits for it. Unless the replica was
// built with ReleaseOnStop, its Leases are left to expire: to the rest of the
// ring it crashed. It returns the manager's error, if any.
func (r *Replica) Stop() error {
	if r.done == nil {
		return nil
	}
	r.stopped.Store(true)
	r.cancel()
	<-r.done
	return r.err
}

// Running reports whether the replica was started and not stopped.
func (r *Replica) Running() bool { return r.done != nil && !r.stopped.Load() }

// Elected reports whether this running replica holds the assigner's
// leader-election Lease, i.e. runs the assigner.
func (r *Replica) Elected() bool {
	if !r.Running() {
		return false
	}
	select {
	case <-r.mgr.Elected():
		return true
	default:
		return false
	}
}

// Options configure [NewFleet].
type Options struct {
	Ring, Namespace string
	// Replicas is how many replicas run (members "replica-0", "replica-1", …).
	Replicas      int
	LeaseDuration time.Duration
	Scheme        *runtime.Scheme
	// Hold is passed to the overlap detector (see [NewOverlapDetector]).
	Hold time.Duration
	// Version is the operator version the replicas announce.
	Version string
	// Rollout is given to every replica (see [ReplicaOptions]).
	Rollout []canary.Option
	// Clocks, when set, holds replica i's clock at index i (see
	// [ReplicaOptions].Clock); replicas past its end, and nil entries, use
	// the wall clock.
	Clocks []clock.WithTicker
	// Registry and Concurrency are given to every replica (see
	// [ReplicaOptions]).
	Registry    *registry.Registry
	Concurrency int
}

// Fleet is the sharded operator's replicas, run in one process, with one
// overlap detector and one assigner observer shared by all of them.
type Fleet struct {
	Ring, Namespace string
	LeaseDuration   time.Duration
	Replicas        []*Replica
	Detector        *OverlapDetector
	Moves           *MoveCounter
}

// NewFleet builds the replicas; [Fleet.Start] runs them.
func NewFleet(cfg *rest.Config, o Options) (*Fleet, error) {
	f := &Fleet{Ring: o.Ring, Namespace: o.Namespace, LeaseDuration: o.LeaseDuration,
		Detector: NewOverlapDetector(o.Hold), Moves: &MoveCounter{}}
	for i := range o.Replicas {
		var clk clock.WithTicker
		if i < len(o.Clocks) {
			clk = o.Clocks[i]
		}
		r, err := NewReplica(cfg, ReplicaOptions{
			Clock: clk,
			Ring:  o.Ring, Member: fmt.Sprintf("replica-%d", i), Namespace: o.Namespace,
			LeaseDuration: o.LeaseDuration, Scheme: o.Scheme, Detector: f.Detector, Observer: f.Moves,
			Version: o.Version, Rollout: o.Rollout,
			Registry: o.Registry, Concurrency: o.Concurrency,
		})
		if err != nil {
			return nil, err
		}
		f.Replicas = append(f.Replicas, r)
	}
	return f, nil
}

// Start starts every replica.
func (f *Fleet) Start(ctx context.Context) {
	for _, r := range f.Replicas {
		r.Start(ctx)
	}
}

// Add builds one more replica into the fleet, sharing its ring, namespace,
// lease duration, scheme, overlap detector and move counter (o's values for
// those are ignored), and starts it: a new version of the operator joining
// the running ones.
func (f *Fleet) Add(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, o ReplicaOptions) (*Replica, error) {
	o.Ring, o.Namespace, o.LeaseDuration, o.Scheme = f.Ring, f.Namespace, f.LeaseDuration, scheme
	o.Detector, o.Observer = f.Detector, f.Moves
	r, err := NewReplica(cfg, o)
	if err != nil {
		return nil, err
	}
	f.Replicas = append(f.Replicas, r)
	r.Start(ctx)
	return r, nil
}

// Stop stops every running replica, concurrently, and returns their errors.
func (f *Fleet) Stop() error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, r := range f.Replicas {
		if !r.Running() {
			continue
		}
		wg.Go(func() {
			if err := r.Stop(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("replica %s: %w", r.Member, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Running returns the members of the running replicas, sorted.
func (f *Fleet) Running() []string {
	var out []string
	for _, r := range f.Replicas {
		if r.Running() {
			out = append(out, r.Member)
		}
	}
	slices.Sort(out)
	return out
}

// Replica returns the replica named member, or nil.
func (f *Fleet) Replica(member string) *Replica {
	for _, r := range f.Replicas {
		if r.Member == member {
			return r
		}
	}
	return nil
}

// Leader returns the running replica that runs the assigner, or nil.
func (f *Fleet) Leader() *Replica {
	for _, r := range f.Replicas {
		if r.Elected() {
			return r
		}
	}
	return nil
}

// Err returns the first error of a replica whose manager ended by itself
// (e.g. a lost leader election), or the detector's error.
func (f *Fleet) Err() error {
	for _, r := range f.Replicas {
		if r.done == nil || r.stopped.Load() {
			continue
		}
		select {
		case <-r.done:
			return fmt.Errorf("replica %s stopped: %w", r.Member, r.err)
		default:
		}
	}
	return f.Detector.Err()
}

// MoveCounter is a sharding.Observer that counts what the assigner did.
type MoveCounter struct {
	assigned, movedFromDead, movedAfterDrain, drains atomic.Int64
}

// ObjectAssigned implements sharding.Observer.
func (m *MoveCounter) ObjectAssigned(string, string) { m.assigned.Add(1) }

// ObjectMoved implements sharding.Observer.
func (m *MoveCounter) ObjectMoved(_, _, _ string, immediate bool) {
	if immediate {
		m.movedFromDead.Add(1)
	} else {
		m.movedAfterDrain.Add(1)
	}
}

// DrainRequested implements sharding.Observer.
func (m *MoveCounter) DrainRequested(string, string) { m.drains.Add(1) }

// DrainAcknowledged implements sharding.Observer.
func (m *MoveCounter) DrainAcknowledged(string, string) {}

// RingRecomputed implements sharding.Observer.
func (m *MoveCounter) RingRecomputed(string, []string) {}

// MemberObjects implements sharding.Observer.
func (m *MoveCounter) MemberObjects(string, map[string]int) {}

// MovedFromDead is how many objects the assigner moved off a member it
// judged dead (without a drain).
func (m *MoveCounter) MovedFromDead() int64 { return m.movedFromDead.Load() }

// Drains is how many drains the assigner requested.
func (m *MoveCounter) Drains() int64 { return m.drains.Load() }

// String summarises the counts.
func (m *MoveCounter) String() string {
	return fmt.Sprintf("assigned %d, moved off dead members %d, moved after a drain %d, drains requested %d",
		m.assigned.Load(), m.movedFromDead.Load(), m.movedAfterDrain.Load(), m.drains.Load())
}

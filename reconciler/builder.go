package reconciler

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/phase"
	"github.com/opkit/opkit/sharding"
)

// Builder wires a [Reconciler] into a manager. Start with [For]; every method
// returns the builder; errors surface from [Builder.Build] or [Builder.Complete].
type Builder[T client.Object] struct {
	mgr         manager.Manager
	name        string
	newObject   func() T
	owns        []client.Object
	finName     string
	finOpts     []finalizer.Option
	machine     *phase.Builder[T]
	desired     DesiredFunc[T]
	ensureOpts  []ensure.Option
	status      StatusFunc[T]
	obs         *observability.Observability
	concurrency int
	predicates  []predicate.Predicate
	shard       *sharding.Shard
	steps       Steps[T]
	shardWired  bool
	errs        []error
}

// For starts a builder for the custom resource T, reconciled by a controller
// called name. newObject returns an empty T (e.g. func() *v1.WebApp { return &v1.WebApp{} }).
func For[T client.Object](mgr manager.Manager, name string, newObject func() T) *Builder[T] {
	b := &Builder[T]{mgr: mgr, name: name, newObject: newObject, concurrency: 1}
	if mgr == nil || name == "" || newObject == nil {
		b.errs = append(b.errs, errors.New("reconciler: For needs a manager, a name and a constructor"))
	}
	return b
}

// Owns declares child types: a change to a child that carries a controller
// ownerReference to a T reconciles that T; pruning covers these types, and
// Build registers ensure.OwnerIndex for them on the manager's cache, so an
// owner's children are found by an index lookup. Children linked to their
// owner only by ensure's owner label (cluster-scoped children of a
// namespaced owner, children in another namespace) are pruned and deleted
// with the owner, but their changes do not trigger it yet: such an owner
// sees them again on its next event or resync.
func (b *Builder[T]) Owns(objs ...client.Object) *Builder[T] {
	b.owns = append(b.owns, objs...)
	return b
}

// Finalizer adds a finalizer with the given name and steps (finalizer.WithStep …).
// The builder supplies the manager's client and API reader, and wires events
// and metrics when [Builder.Observability] is set. The finalizer writes its
// conditions (FinalizerCleanup with reasons CleanupFailed, DeletionBlocked
// and CleanupInProgress; Stalled with reason StuckDeleting) into T's status
// through conditions.Status, with no per-type code.
func (b *Builder[T]) Finalizer(name string, opts ...finalizer.Option) *Builder[T] {
	b.finName, b.finOpts = name, opts
	return b
}

// Phases drives the object through the phase machine m declares instead of
// the Children step: on a live object each reconcile runs one
// [phase.Machine.Step] (after the finalizer was added) and persists the
// status; the machine owns Ready, Reconciling, Stalled and Degraded. On a
// deleting object the machine's deletion phase runs first, and finalizer
// cleanup only once it is handled. Handlers that create children can use
// [Reconciler.Ensurer] — declare Children too (it is not called in phase
// mode) to get an Ensurer with pruning wired. [Builder.Build] builds the
// machine; with Observability set it first adds the controller's
// deduplicating event recorder (replacing one given to phase.New) and
// phase.Metrics as an observer, so transitions reach events and metrics.
func (b *Builder[T]) Phases(m *phase.Builder[T]) *Builder[T] {
	b.machine = m
	return b
}

// Children sets the function that declares the desired children; they are
// ensured with field owner = the controller name. opts configure the
// [ensure.Ensurer] (strategy, adoption, …); pruning of the Owns types is on by default.
func (b *Builder[T]) Children(desired DesiredFunc[T], opts ...ensure.Option) *Builder[T] {
	b.desired, b.ensureOpts = desired, opts
	return b
}

// Status sets the function that computes status after the children were ensured.
func (b *Builder[T]) Status(fn StatusFunc[T]) *Builder[T] {
	b.status = fn
	return b
}

// Observability wires metrics, traces, logs and events from o into the
// controller and every pattern it composes: the reconcile metrics and spans
// (observability), the deduplicating event recorder (finalizer, phase and the
// reconciler's own events), and each package's own metrics registered on
// o.Registerer() — finalizer.Metrics, phase.Metrics, ensure.Metrics and, for
// [Builder.Shard], sharding.Metrics.
func (b *Builder[T]) Observability(o *observability.Observability) *Builder[T] {
	b.obs = o
	return b
}

// Concurrency sets MaxConcurrentReconciles (default 1). Two workers never
// reconcile the same object at once.
func (b *Builder[T]) Concurrency(n int) *Builder[T] {
	b.concurrency = n
	return b
}

// WithPredicates adds predicates for events of T, on top of the defaults.
func (b *Builder[T]) WithPredicates(p ...predicate.Predicate) *Builder[T] {
	b.predicates = append(b.predicates, p...)
	return b
}

// Shard makes this controller one member of a sharded operator: it reconciles
// only the objects s assigns to this replica (each reconcile runs inside
// [sharding.Shard.Begin], so an object is never reconciled by two replicas at
// once), filters events with s's predicate, runs without leader election, labels
// every desired child with its owner's shard (so children land in this member's
// cache at once), and registers s (drain acknowledgement, Lease) with the
// manager. The manager's cache must be restricted with s.CacheByObject for the
// memory savings; see the sharding package.
func (b *Builder[T]) Shard(s *sharding.Shard) *Builder[T] {
	b.shard = s
	return b
}

// WithSteps replaces individual steps of the skeleton.
func (b *Builder[T]) WithSteps(s Steps[T]) *Builder[T] {
	b.steps = s
	return b
}

// Build returns the reconciler without registering a controller.
func (b *Builder[T]) Build() (*Reconciler[T], error) {
	if err := errors.Join(b.errs...); err != nil {
		return nil, err
	}
	c := b.mgr.GetClient()
	if b.obs != nil {
		c = b.obs.Client(c)
	}
	r := &Reconciler[T]{name: b.name, client: c, newObject: b.newObject, desired: b.desired, status: b.status}
	if b.shard != nil && b.desired != nil {
		shard, desired := b.shard, b.desired
		r.desired = func(ctx context.Context, obj T) ([]client.Object, error) {
			children, err := desired(ctx, obj)
			for _, c := range children {
				shard.LabelChild(obj, c)
			}
			return children, err
		}
	}
	var reg prometheus.Registerer
	if b.obs != nil {
		r.metrics = b.obs.Metrics()
		r.recorder = b.obs.Recorder(b.name)
		reg = b.obs.Registerer()
	}
	if b.finName != "" {
		opts := []finalizer.Option{finalizer.WithAPIReader(b.mgr.GetAPIReader())}
		if r.recorder != nil {
			opts = append(opts, finalizer.WithEventRecorder(r.recorder))
		}
		if reg != nil {
			fm, err := finalizer.NewMetrics(reg, b.name)
			if err != nil {
				return nil, fmt.Errorf("reconciler %s: %w", b.name, err)
			}
			opts = append(opts, finalizer.WithObserver(fm))
			r.finMetrics = fm
		}
		f, err := finalizer.New[T](c, b.finName, append(opts, b.finOpts...)...)
		if err != nil {
			return nil, fmt.Errorf("reconciler %s: %w", b.name, err)
		}
		r.finalizer = f
	}
	if b.machine != nil {
		if r.recorder != nil {
			b.machine.With(phase.WithEventRecorder(r.recorder))
		}
		if reg != nil {
			pm, err := phase.NewMetrics(reg, b.name)
			if err != nil {
				return nil, fmt.Errorf("reconciler %s: %w", b.name, err)
			}
			b.machine.With(phase.WithObserver(pm))
		}
		m, err := b.machine.Build()
		if err != nil {
			return nil, fmt.Errorf("reconciler %s: %w", b.name, err)
		}
		r.machine = m
	}
	if b.shard != nil && reg != nil && !b.shardWired {
		sm, err := sharding.NewMetrics(reg)
		if err != nil {
			return nil, fmt.Errorf("reconciler %s: %w", b.name, err)
		}
		b.shard.AddObserver(sm)
		b.shardWired = true
	}
	if b.desired != nil || b.machine != nil {
		// Custom-resource children merge lists by their CRD schema, read once
		// per group-version from /openapi/v3 (open to every authenticated
		// user through system:discovery).
		dc, err := discovery.NewDiscoveryClientForConfigAndClient(b.mgr.GetConfig(), b.mgr.GetHTTPClient())
		if err != nil {
			return nil, fmt.Errorf("reconciler %s: %w", b.name, err)
		}
		opts := []ensure.Option{ensure.WithAPIReader(b.mgr.GetAPIReader()), ensure.WithOpenAPI(dc.OpenAPIV3())}
		if len(b.owns) > 0 {
			// Prune looks children up in the cache's owner index, not by a
			// label scan over every cached object of the kind.
			if err := ensure.IndexOwner(context.Background(), b.mgr.GetFieldIndexer(), b.owns...); err != nil {
				return nil, fmt.Errorf("reconciler %s: %w", b.name, err)
			}
			opts = append(opts, ensure.WithPrune(b.owns...), ensure.WithOwnerIndex())
		}
		if reg != nil {
			em, err := ensure.NewMetrics(reg, b.name)
			if err != nil {
				return nil, fmt.Errorf("reconciler %s: %w", b.name, err)
			}
			opts = append(opts, ensure.WithObserver(em))
		}
		e, err := ensure.New(c, b.name, append(opts, b.ensureOpts...)...)
		if err != nil {
			return nil, fmt.Errorf("reconciler %s: %w", b.name, err)
		}
		r.ensurer = e
	}
	r.steps = b.steps
	if r.steps.Get == nil {
		r.steps.Get = r.get
	}
	if r.steps.Sync == nil {
		r.steps.Sync = r.sync
	}
	if r.steps.WriteStatus == nil {
		r.steps.WriteStatus = r.writeStatus
	}
	return r, nil
}

// Complete builds the reconciler and registers its controller with the manager.
func (b *Builder[T]) Complete() error {
	r, err := b.Build()
	if err != nil {
		return err
	}
	preds := append([]predicate.Predicate{DefaultPredicate()}, b.predicates...)
	opts := controller.Options{MaxConcurrentReconciles: b.concurrency}
	var rec reconcile.Reconciler = r
	if b.shard != nil {
		if err := b.shard.SetupWithManager(b.mgr, b.newObject()); err != nil {
			return fmt.Errorf("reconciler %s: %w", b.name, err)
		}
		preds = append(preds, b.shard.Predicate())
		opts.NeedLeaderElection = ptr.To(false)
		rec = guarded(b.shard, b.newObject, rec)
	}
	if b.obs != nil {
		rec = b.obs.Wrap(b.name, rec)
	}
	bld := builder.ControllerManagedBy(b.mgr).
		Named(b.name).
		WithOptions(opts)
	if b.obs != nil {
		bld = bld.Watches(b.newObject(), b.obs.TriggerHandler(b.name, &handler.EnqueueRequestForObject{}), builder.WithPredicates(preds...))
	} else {
		bld = bld.For(b.newObject(), builder.WithPredicates(preds...))
	}
	for _, o := range b.owns {
		h := handler.EnqueueRequestForOwner(b.mgr.GetScheme(), b.mgr.GetRESTMapper(), b.newObject(), handler.OnlyControllerOwner())
		if b.obs != nil {
			h = b.obs.TriggerHandler(b.name, h)
		}
		bld = bld.Watches(o, h)
	}
	return bld.Complete(rec)
}

// DefaultPredicate passes create, delete and generic events, and update events
// that change the generation, labels, annotations, finalizers or the deletion
// timestamp: not status-only updates, which the controller itself writes.
func DefaultPredicate() predicate.Predicate {
	return predicate.Or(
		predicate.GenerationChangedPredicate{},
		predicate.LabelChangedPredicate{},
		predicate.AnnotationChangedPredicate{},
		predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return !equalStrings(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers()) ||
				e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
		}},
	)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// guarded runs inner inside shard.Begin for the requested object.
func guarded[T client.Object](shard *sharding.Shard, newObject func() T, inner reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		obj := newObject()
		obj.SetNamespace(req.Namespace)
		obj.SetName(req.Name)
		end, mine, err := shard.Begin(ctx, obj)
		if err != nil || !mine {
			return reconcile.Result{}, err
		}
		defer end()
		return inner.Reconcile(ctx, req)
	})
}

// CacheOptions returns the manager cache options opkit recommends: every
// cached object has its metadata.managedFields stripped, which saves about a
// tenth of the informer memory of a typical operator (more for objects
// written by several managers). ensure keeps what it needs on the objects
// themselves (ensure.AnnotationDeclared, the record of what the operator last
// declared), so both of its strategies work with these options. Merge the
// result into your manager.Options.Cache when you set other cache fields.
func CacheOptions() cache.Options {
	return cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
}

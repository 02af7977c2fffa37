package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/opkit/opkit/ansible"
	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/external"
	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/phase"
	"github.com/opkit/opkit/sharding"
	"github.com/opkit/opkit/workflow"
)

// Builder wires a [Reconciler] together. Start with [For] (a manager: the
// usual case) or [ForClient] (a client alone: unit tests, tools); every
// method returns the builder; errors surface from [Builder.Build],
// [Builder.Ensurer] or [Builder.Complete].
type Builder[T client.Object] struct {
	mgr        manager.Manager // nil with ForClient
	client     client.Client
	apiReader  client.Reader
	cache      cache.Cache // nil: no informer cache, no field indexes
	name       string
	newObject  func() T
	owns       []*owned
	watches    []watch
	refs       []*reference
	finName    string
	finOpts    []finalizer.Option
	machine    *phase.Builder[T]
	desired    DesiredFunc[T]
	workflow   WorkflowFunc[T]
	wfOpts     []workflow.Option
	wfCondOpts []workflow.ConditionOption
	ensureOpts []ensure.Option
	status     StatusFunc[T]
	obs        *observability.Observability
	ctrlOpts   controller.Options
	predicates []predicate.Predicate
	shard      *sharding.Shard
	steps      Steps[T]
	share      *StatusShare
	shardWired bool
	extConn    external.Connector[T]
	extOpts    []external.Option
	playbook   *ansible.Runner
	errs       []error

	ensurer    *ensure.Ensurer
	ensurerErr error
	writes     *childWrites // the WithoutOwnWriteEvents record; nil without one
	indexed    bool
	built      *Reconciler[T]
}

// For starts a builder for the kind T, reconciled by a controller called
// name in mgr. newObject returns an empty T (e.g. func() *v1.WebApp { return
// &v1.WebApp{} }). T may be any kind: a custom resource with status
// conditions, or a kind without status (a ConfigMap, a Secret), whose
// reconciles then write no status.
func For[T client.Object](mgr manager.Manager, name string, newObject func() T) *Builder[T] {
	b := &Builder[T]{mgr: mgr, name: name, newObject: newObject}
	if mgr == nil || name == "" || newObject == nil {
		b.errs = append(b.errs, errors.New("reconciler: For needs a manager, a name and a constructor"))
		return b
	}
	b.client, b.apiReader, b.cache = mgr.GetClient(), mgr.GetAPIReader(), mgr.GetCache()
	return b
}

// ForClient starts a builder for T whose reconciler reads and writes through
// c alone — typically a direct (uncached) client, as in a kubebuilder-style
// unit test that calls Reconcile by hand. Nothing is watched: use
// [Builder.Build] and call [Reconciler.Reconcile]; [Builder.Complete] needs a
// manager. Without [Builder.WithCache], children are pruned and listed with
// label selectors (which any client serves), and the capabilities that need
// an informer cache's field indexes ([Builder.References]) are refused by
// Build with an error naming them, not discovered later as a Stalled object.
func ForClient[T client.Object](c client.Client, name string, newObject func() T) *Builder[T] {
	b := &Builder[T]{client: c, apiReader: c, name: name, newObject: newObject}
	if c == nil || name == "" || newObject == nil {
		b.errs = append(b.errs, errors.New("reconciler: ForClient needs a client, a name and a constructor"))
	}
	return b
}

// WithCache gives a [ForClient] builder the informer cache c reads from
// (a client built with client.Options.Cache.Reader = c): the builder
// registers its field indexes on c, so c must not have started yet. With a
// manager ([For]) the manager's cache is used and this is not needed.
func (b *Builder[T]) WithCache(c cache.Cache) *Builder[T] {
	b.cache = c
	return b
}

// owned is one Owns declaration.
type owned struct {
	obj                  client.Object
	gvk                  schema.GroupVersionKind
	noWatch, noPrune     bool
	noIndex              bool
	createOnly, recreate []string
	predicates           []predicate.Predicate
	mappedGVK            bool
	noOwnWriteEvents     bool
}

// OwnsOption configures one [Builder.Owns] declaration.
type OwnsOption interface{ applyToOwns(*owned) }

type ownsOptionFunc func(*owned)

func (f ownsOptionFunc) applyToOwns(o *owned) { f(o) }

// WithoutWatch makes changes to children of this kind not reconcile their owner.
func WithoutWatch() OwnsOption { return ownsOptionFunc(func(o *owned) { o.noWatch = true }) }

// WithoutPrune leaves in place children of this kind that the DesiredFunc
// stops declaring — for children that are history rather than a declared
// set (the Jobs a schedule created), removed by the operator's own policy
// through [Observed.Delete], or by the garbage collector with their owner.
func WithoutPrune() OwnsOption { return ownsOptionFunc(func(o *owned) { o.noPrune = true }) }

// WithoutIndex keeps children of this kind out of the cache's owner index
// (ensure.OwnerIndex). Prune and [Observed.Children] then select them by
// ensure's owner label (children linked only by an ownerReference are found
// by a scan of the owner's namespace). An index costs one cache entry per
// child; without it each lookup scans the matching objects.
func WithoutIndex() OwnsOption { return ownsOptionFunc(func(o *owned) { o.noIndex = true }) }

// WithCreateOnly makes the fields at paths (dot-separated, e.g.
// "spec.selector") of children of this kind create-only: written at create,
// never patched (see ensure.WithCreateOnly).
func WithCreateOnly(paths ...string) OwnsOption {
	return ownsOptionFunc(func(o *owned) { o.createOnly = append(o.createOnly, paths...) })
}

// WithRecreateOnChange makes a change to a declared value at one of paths
// replace the child (delete, create) instead of patching it (see
// ensure.WithRecreateOnChange).
func WithRecreateOnChange(paths ...string) OwnsOption {
	return ownsOptionFunc(func(o *owned) { o.recreate = append(o.recreate, paths...) })
}

// WithoutOwnWriteEvents drops, for children of this kind, the create or
// update event that carries exactly the version the default Children step's
// own write of that child returned (the resourceVersion the create, patch or
// apply returned): that reconcile already judged the child as the event
// shows it, so the event would only queue a reconcile that finds nothing to
// do. Every other event still reconciles the owner: a later version of the
// child (its controller reporting status), a change by anybody else, a
// delete, and the event of a write that failed or whose response had not
// arrived a second after its event. Without it, the create events of the
// children a reconcile just created queue one more reconcile of the owner
// that finds nothing to do.
//
// Use it only when the status step judges children written in this
// reconcile through [Observed.Reader]'s Get or [Observed.Changes] (which
// return the written copy): a List, or a read through another client, may
// not show the write yet, and no event would then correct the status. Writes
// by [Builder.Workflow], phase handlers and a custom [Steps] Sync are not
// recorded, so their events always reconcile the owner.
func WithoutOwnWriteEvents() OwnsOption {
	return ownsOptionFunc(func(o *owned) { o.noOwnWriteEvents = true })
}

// WithOwnsPredicates filters the events of children of this kind before they
// reconcile their owner.
func WithOwnsPredicates(p ...predicate.Predicate) OwnsOption {
	return ownsOptionFunc(func(o *owned) { o.predicates = append(o.predicates, p...) })
}

// Owns declares one child kind (call it once per kind), by default with all
// three of:
//
//   - watch: a change to a child reconciles its owner — found through the
//     child's controller ownerReference (queued under the owner's own key:
//     no namespace for a cluster-scoped owner), or, for children linked only by
//     ensure's owner label (cluster-scoped children of a namespaced owner,
//     children in another namespace), through the owner its ensure.AnnotationOwner names, checked by UID in the cache (no index);
//   - prune: children of the kind that the DesiredFunc no longer declares
//     are deleted;
//   - index: the cache indexes children of the kind by owner
//     (ensure.OwnerIndex), so prune and [Observed.Children] are lookups, not
//     scans.
//
// [WithoutWatch], [WithoutPrune] and [WithoutIndex] turn each off;
// [WithoutOwnWriteEvents] keeps the watch but drops the events of the
// reconciler's own writes;
// [WithCreateOnly] and [WithRecreateOnChange] set per-field write policies
// for the kind. An *unstructured.Unstructured obj of a kind the client's
// scheme knows (apps/v1 Deployment) is watched, indexed and pruned as the
// typed kind: the owner index must be on the informer prune lists, and
// ensure lists a kind the scheme knows typed.
func (b *Builder[T]) Owns(obj client.Object, opts ...OwnsOption) *Builder[T] {
	b.afterEnsurer("Owns")
	o := &owned{obj: obj}
	for _, opt := range opts {
		opt.applyToOwns(o)
	}
	b.owns = append(b.owns, o)
	return b
}

// watch is one Watches declaration.
type watch struct {
	obj     client.Object
	handler handler.EventHandler
	opts    []builder.WatchesOption
}

// Watches reconciles what h maps events of obj's kind to — any object,
// owned or not (controller-runtime's builder.Watches; opts are its
// WatchesOption values: builder.WithPredicates, builder.OnlyMetadata).
// Prefer [Builder.References] for "every T that references this object".
func (b *Builder[T]) Watches(obj client.Object, h handler.EventHandler, opts ...builder.WatchesOption) *Builder[T] {
	b.watches = append(b.watches, watch{obj: obj, handler: h, opts: opts})
	return b
}

// Finalizer adds a finalizer with the given name and steps (finalizer.WithStep …).
// The builder supplies the client and API reader, and wires events and
// metrics when [Builder.Observability] is set. The finalizer writes its
// conditions (FinalizerCleanup with reasons CleanupFailed, DeletionBlocked
// and CleanupInProgress; Stalled with reason StuckDeleting) into T's status
// through conditions.Status, with no per-type code; conditions a step sets
// on the object go out in the same status write.
func (b *Builder[T]) Finalizer(name string, opts ...finalizer.Option) *Builder[T] {
	b.finName, b.finOpts = name, opts
	return b
}

// External makes each T the owner of one resource in an external system
// (a cloud API) that connector reaches, managed by an external.Reconciler
// built with opts on top of what the builder wires (client, event
// recorder, external.Metrics with [Builder.Observability]):
//
//   - Sync: the external resource is observed and created or updated
//     (crash-safe, see package external) before the children; its
//     connection details become a Secret child (external.WithConnectionSecret;
//     Owns(&corev1.Secret{}) is declared for you if missing). A successful
//     sync asks to be looked at again after the drift poll interval.
//   - [AnnotationObserveOnly]: the external resource is only observed and
//     reported in status (external.Reconciler.Observe); nothing is written
//     to it, no child either, and deleting the object leaves it (the
//     finalizer step is done at once). [AnnotationPaused]: nothing at all.
//   - Deletion: a finalizer step (after the [Builder.Finalizer] steps; the
//     finalizer is external.FinalizerName when none is declared) deletes the
//     external resource and lets the finalizer go only once it is verified
//     gone, or left by its external.Policy.
//   - The default predicate ignores changes to the annotations the external
//     package writes (external.AnnotationPrefix): its bookkeeping does not
//     reconcile the object again.
func (b *Builder[T]) External(connector external.Connector[T], opts ...external.Option) *Builder[T] {
	b.extConn, b.extOpts = connector, opts
	if !slices.ContainsFunc(b.owns, func(o *owned) bool { _, ok := o.obj.(*corev1.Secret); return ok }) {
		b.Owns(&corev1.Secret{})
	}
	return b
}

// Playbook delegates the reconcile of T to an Ansible playbook, as
// operator-sdk's Ansible operator does (package ansible):
//
//   - Sync: runner's playbook (or role) runs for every reconcile of a live
//     T, before the [Builder.Children] if any (a failed run ensures no
//     child and prunes nothing). Running=True is written to T's status
//     before the run; after it Running, Successful and Failed say how it
//     ended (Failed names the failing task), and the run's error is
//     classified by ansible.Runner.Reconcile's rule: a user error (fail or
//     assert task, 400/422 from the API server, an unparsable playbook) is
//     Stalled, anything else backs off.
//   - Deletion: when the runner's watch has a finalizer, its name is the
//     finalizer (unless [Builder.Finalizer] names one) and its playbook runs
//     as a cleanup step (named [PlaybookStep], after the Finalizer steps);
//     the finalizer is removed only after a run succeeds.
//   - With [Builder.Observability], each failed task is a Warning event
//     through the controller's deduplicating recorder.
//
// Playbook does not combine with Phases, Workflow or External.
func (b *Builder[T]) Playbook(runner *ansible.Runner) *Builder[T] {
	b.playbook = runner
	if runner == nil {
		b.errs = append(b.errs, fmt.Errorf("reconciler %s: Playbook needs a runner", b.name))
	}
	return b
}

// Phases drives the object through the phase machine m declares instead of
// the Children step: on a live object each reconcile runs one
// [phase.Machine.Step] (after the finalizer was added) and persists the
// status; the machine owns Ready, Reconciling, Stalled and Degraded. On a
// deleting object the machine's deletion phase runs first, and finalizer
// cleanup only once it is handled. Handlers that write children use the
// builder's [Builder.Ensurer] (pruning and indexes of the Owns kinds
// wired). [Builder.Build] builds the machine; with Observability set it
// first adds the controller's deduplicating event recorder (replacing one
// given to phase.New) and phase.Metrics as an observer, so transitions reach
// events and metrics.
func (b *Builder[T]) Phases(m *phase.Builder[T]) *Builder[T] {
	b.machine = m
	return b
}

// Children sets the function that declares the desired children; they are
// ensured with field owner = the controller name. opts configure the
// [ensure.Ensurer] (strategy, adoption, …) on top of what the Owns
// declarations imply (prune, index, field policies).
func (b *Builder[T]) Children(desired DesiredFunc[T], opts ...ensure.Option) *Builder[T] {
	if len(opts) > 0 {
		b.afterEnsurer("Children options")
	}
	b.desired, b.ensureOpts = desired, append(b.ensureOpts, opts...)
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

// WithOptions sets controller-runtime's controller options, passed through
// as given: MaxConcurrentReconciles (controller-runtime's default is 1; two
// workers never reconcile the same object at once), RateLimiter,
// UsePriorityQueue, EnableWarmup, RecoverPanic, NeedLeaderElection,
// ReconciliationTimeout, CacheSyncTimeout, … Two exceptions: a
// [Builder.Shard] controller never needs leader election, and a nil
// RateLimiter means [DefaultRateLimiter], not controller-runtime's.
func (b *Builder[T]) WithOptions(o controller.Options) *Builder[T] {
	b.ctrlOpts = o
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

// registerIndexes registers, once, the cache field indexes the declarations
// need: ensure.OwnerIndex on indexed Owns kinds and T by each
// [Builder.References] key. (Label-linked children find their owner by
// ensure.AnnotationOwner, without an index: ownerByLabel.)
func (b *Builder[T]) registerIndexes() error {
	if b.indexed {
		return nil
	}
	var need []string
	for _, r := range b.refs {
		need = append(need, fmt.Sprintf("References(%T)", r.obj))
	}
	if b.cache == nil {
		if len(need) > 0 {
			return fmt.Errorf("reconciler %s: %v need a cache's field indexes, and this builder has none (use For with a manager, or ForClient(...).WithCache)", b.name, need)
		}
		b.indexed = true
		return nil
	}
	ctx := context.Background()
	for _, o := range b.owns {
		if !o.noIndex {
			if err := ensure.IndexOwner(ctx, b.cache, o.obj); err != nil {
				return fmt.Errorf("reconciler %s: %w", b.name, err)
			}
		}
	}
	for _, r := range b.refs {
		if err := indexField(ctx, b.cache, b.newObject(), r.index, r.extract); err != nil {
			return fmt.Errorf("reconciler %s: %w", b.name, err)
		}
	}
	b.indexed = true
	return nil
}

// afterEnsurer records an error when what declares the Ensurer's
// configuration comes after the Ensurer was made: it would be ignored.
func (b *Builder[T]) afterEnsurer(what string) {
	if b.ensurer != nil || b.ensurerErr != nil {
		b.errs = append(b.errs, fmt.Errorf("reconciler %s: %s after Ensurer(): declare it before, or it would not reach the Ensurer", b.name, what))
	}
}

// Ensurer returns the [ensure.Ensurer] the reconciler uses — field owner the
// controller name, prune, owner indexes and field policies as the Owns
// declarations say, metrics with [Builder.Observability], the Children
// options — creating it on the first call. Call it after the Owns,
// Children and Observability declarations (an Owns, or Children options,
// after it make Build fail rather than be ignored), to hand it to phase
// handlers or a custom [Steps] Sync that write children; [Builder.Build]
// uses the same one.
func (b *Builder[T]) Ensurer() (*ensure.Ensurer, error) {
	if b.ensurer != nil || b.ensurerErr != nil {
		return b.ensurer, b.ensurerErr
	}
	b.ensurer, b.ensurerErr = b.newEnsurer()
	return b.ensurer, b.ensurerErr
}

func (b *Builder[T]) newEnsurer() (*ensure.Ensurer, error) {
	if err := errors.Join(b.errs...); err != nil {
		return nil, err
	}
	if err := b.resolveOwns(); err != nil {
		return nil, err
	}
	if err := b.registerIndexes(); err != nil {
		return nil, err
	}
	opts := []ensure.Option{ensure.WithAPIReader(b.apiReader)}
	if b.cache != nil {
		// A child created and deleted before the next reconcile is created
		// again at once, not served from ensure's record of its create.
		opts = append(opts, ensure.WithInformers(b.cache))
	}
	if b.mgr != nil {
		// Custom-resource children merge lists by their CRD schema, read once
		// per group-version from /openapi/v3 (open to every authenticated
		// user through system:discovery).
		dc, err := discovery.NewDiscoveryClientForConfigAndClient(b.mgr.GetConfig(), b.mgr.GetHTTPClient())
		if err != nil {
			return nil, fmt.Errorf("reconciler %s: %w", b.name, err)
		}
		opts = append(opts, ensure.WithOpenAPI(dc.OpenAPIV3()))
	}
	var prune, indexed []client.Object
	for _, o := range b.owns {
		if !o.noPrune {
			prune = append(prune, o.obj)
			if !o.noIndex && b.cache != nil {
				// Prune looks children up in the cache's owner index, not by
				// a label scan over every cached object of the kind.
				indexed = append(indexed, o.obj)
			}
		}
		if len(o.createOnly) > 0 {
			opts = append(opts, ensure.WithCreateOnly(o.obj, o.createOnly...))
		}
		if len(o.recreate) > 0 {
			opts = append(opts, ensure.WithRecreateOnChange(o.obj, o.recreate...))
		}
	}
	if len(prune) > 0 {
		opts = append(opts, ensure.WithPrune(prune...))
	}
	if len(indexed) > 0 {
		opts = append(opts, ensure.WithOwnerIndex(indexed...))
	}
	if b.obs != nil {
		em, err := ensure.NewMetrics(b.obs.Registerer(), b.name)
		if err != nil {
			return nil, fmt.Errorf("reconciler %s: %w", b.name, err)
		}
		opts = append(opts, ensure.WithObserver(em))
	}
	c := b.client
	if b.obs != nil {
		c = b.obs.Client(c)
	}
	var recorded []schema.GroupKind
	for _, o := range b.owns {
		if o.noOwnWriteEvents && !o.noWatch {
			recorded = append(recorded, o.gvk.GroupKind())
		}
	}
	if len(recorded) > 0 {
		b.writes = newChildWrites(recorded)
		c = b.writes.client(c)
	}
	e, err := ensure.New(c, b.name, append(opts, b.ensureOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("reconciler %s: %w", b.name, err)
	}
	return e, nil
}

// resolveOwns finds each Owns kind's GVK and scope once.
func (b *Builder[T]) resolveOwns() error {
	for _, o := range b.owns {
		if o.mappedGVK {
			continue
		}
		gvk, err := apiutil.GVKForObject(o.obj, b.client.Scheme())
		if err != nil {
			return fmt.Errorf("reconciler %s: Owns(%T): %w", b.name, o.obj, err)
		}
		o.gvk, o.mappedGVK = gvk, true
		// An unstructured prototype of a kind the scheme knows is watched,
		// indexed and pruned through the typed informer: the index must be
		// on the informer prune lists, and ensure lists a kind the scheme
		// knows typed (the informer the manager's client reads by default).
		if _, ok := o.obj.(*unstructured.Unstructured); ok {
			if typed, err := b.client.Scheme().New(gvk); err == nil {
				if t, ok := typed.(client.Object); ok {
					if _, still := t.(runtime.Unstructured); !still {
						o.obj = t
					}
				}
			}
		}
	}
	return nil
}

// Build returns the reconciler without registering a controller. Calling it
// again returns the same reconciler.
func (b *Builder[T]) Build() (*Reconciler[T], error) {
	if b.built != nil {
		return b.built, nil
	}
	if err := errors.Join(b.errs...); err != nil {
		return nil, err
	}
	c := b.client
	if b.obs != nil {
		c = b.obs.Client(c)
	}
	r := &Reconciler[T]{
		name: b.name, client: c, reader: c, newObject: b.newObject, desired: b.desired, status: b.status,
		indexedKinds: map[schema.GroupVersionKind]bool{},
		workflow:     b.workflow, wfOpts: b.wfOpts, wfCondOpts: b.wfCondOpts,
	}
	if b.workflow != nil && (b.desired != nil || b.machine != nil) {
		return nil, fmt.Errorf("reconciler %s: Workflow does not combine with Children or Phases (the workflow declares the children)", b.name)
	}
	if b.cache != nil {
		r.reader, r.informers = b.cache, b.cache
	}
	if b.share != nil {
		if b.machine != nil {
			return nil, fmt.Errorf("reconciler %s: ShareStatus and Phases do not combine (the phase machine owns Ready, Reconciling, Stalled and Degraded)", b.name)
		}
		r.share = newShared(*b.share)
	}
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
	if b.extConn != nil {
		if b.machine != nil || b.workflow != nil {
			return nil, fmt.Errorf("reconciler %s: External does not combine with Phases or Workflow", b.name)
		}
		opts := []external.Option{}
		if r.recorder != nil {
			opts = append(opts, external.WithEventRecorder(r.recorder))
		}
		if reg != nil {
			em, err := external.NewMetrics(reg, b.name)
			if err != nil {
				return nil, fmt.Errorf("reconciler %s: %w", b.name, err)
			}
			opts = append(opts, external.WithObserver(em))
		}
		ext, err := external.New[T](c, b.name, b.extConn, append(opts, b.extOpts...)...)
		if err != nil {
			return nil, fmt.Errorf("reconciler %s: %w", b.name, err)
		}
		r.external = ext
		if b.finName == "" {
			b.finName = external.FinalizerName
		}
	}
	if b.playbook != nil {
		if b.machine != nil || b.workflow != nil || b.extConn != nil {
			return nil, fmt.Errorf("reconciler %s: Playbook does not combine with Phases, Workflow or External", b.name)
		}
		opts := []ansible.Option{ansible.WithClient(c)}
		if r.recorder != nil {
			opts = append(opts, ansible.WithEventRecorder(r.recorder))
		}
		r.playbook = b.playbook.With(opts...)
		if b.finName == "" {
			b.finName = r.playbook.FinalizerName()
		}
	}
	if b.finName != "" {
		opts := []finalizer.Option{finalizer.WithAPIReader(b.apiReader)}
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
		opts = append(opts, b.finOpts...)
		if r.external != nil {
			opts = append(opts, finalizer.WithStep(ExternalStep, r.externalStep))
		}
		if r.playbook != nil && r.playbook.FinalizerName() != "" {
			opts = append(opts, finalizer.WithStep(PlaybookStep, r.playbookStep))
		}
		if b.workflow != nil {
			// Last: the caller's steps may still need the children.
			opts = append(opts, finalizer.WithStep(TeardownStep, r.teardownStep))
		}
		f, err := finalizer.New[T](c, b.finName, opts...)
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
	if err := b.resolveOwns(); err != nil {
		return nil, err
	}
	if err := b.registerIndexes(); err != nil {
		return nil, err
	}
	if b.desired != nil || b.workflow != nil || b.machine != nil || len(b.owns) > 0 || b.ensurer != nil {
		e, err := b.Ensurer()
		if err != nil {
			return nil, err
		}
		r.ensurer = e
	}
	for _, o := range b.owns {
		if !o.noIndex && b.cache != nil {
			r.indexedKinds[o.gvk] = true
		}
	}
	r.steps = b.steps
	if r.steps.Get == nil {
		r.steps.Get = r.get
	}
	if r.steps.Sync == nil {
		r.steps.Sync = r.sync
		if r.workflow != nil {
			r.steps.Sync = r.syncWorkflow
		}
	}
	if r.steps.WriteStatus == nil {
		r.steps.WriteStatus = r.writeStatus
	}
	b.built = r
	return r, nil
}

// Complete builds the reconciler and registers its controller with the
// manager: T's events (default predicates plus [Builder.WithPredicates]),
// the Owns kinds that are watched (their events enqueue the owner with
// [ChildEventPriority] when they change or go, ahead of new objects), [Builder.Watches] and
// [Builder.References].
func (b *Builder[T]) Complete() error {
	if b.mgr == nil && len(b.errs) == 0 {
		return fmt.Errorf("reconciler %s: Complete needs a manager (For); with ForClient, use Build and call Reconcile", b.name)
	}
	r, err := b.Build()
	if err != nil {
		return err
	}
	first := DefaultPredicate()
	if r.external != nil {
		first = defaultPredicate(func(key string) bool { return strings.HasPrefix(key, external.AnnotationPrefix) })
	}
	if r.share != nil && r.share.summary() {
		first = predicate.Or(first, foreignConditionsChanged(r.share))
	}
	preds := append([]predicate.Predicate{first}, b.predicates...)
	opts := b.ctrlOpts
	if opts.RateLimiter == nil {
		opts.RateLimiter = DefaultRateLimiter()
	}
	var rec reconcile.Reconciler = r
	if b.shard != nil {
		if err := b.shard.SetupWithManager(b.mgr, b.newObject()); err != nil {
			return fmt.Errorf("reconciler %s: %w", b.name, err)
		}
		preds = append(preds, b.shard.Predicate())
		opts.NeedLeaderElection = ptr.To(false)
		rec = guarded(b.shard, b.newObject, rec)
	}
	trigger := func(h handler.EventHandler) handler.EventHandler { return h }
	if b.obs != nil {
		rec = b.obs.Wrap(b.name, rec)
		trigger = func(h handler.EventHandler) handler.EventHandler { return b.obs.TriggerHandler(b.name, h) }
	}
	// Watches and References sources are made by controller-runtime's
	// builder from the manager's cache: through syncWaitManager, that is
	// syncWaitCache too, so every watch of the controller waits for its
	// handler's initial events without polling.
	bld := builder.ControllerManagedBy(syncWaitManager{b.mgr}).
		Named(b.name).
		WithOptions(opts).
		WatchesRawSource(source.Kind[client.Object](syncWaitCache{b.mgr.GetCache()}, b.newObject(), trigger(&handler.EnqueueRequestForObject{}), preds...))
	ownerGVK, err := apiutil.GVKForObject(b.newObject(), b.mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("reconciler %s: %w", b.name, err)
	}
	// Resolved at the first child event, not here: T's CRD may not be
	// served yet when the controller is set up.
	ownerNamespaced := scopeOf(b.client, b.newObject())
	for _, o := range b.owns {
		if o.noWatch {
			continue
		}
		h := handler.EnqueueRequestsFromMapFunc(ownerMapper(b.mgr.GetScheme(), b.cache, ownerGVK.GroupKind(), ownerNamespaced, b.newObject))
		// An update that carries the resourceVersion the informer already
		// had (a relist after a watch broke or the API server restarted, a
		// resync) is no news about the child: dropped before it wakes the
		// owner, so a relist of thousands of children is not a reconcile
		// storm.
		preds := append([]predicate.Predicate{predicate.ResourceVersionChangedPredicate{}}, o.predicates...)
		h = followUp(h)
		if o.noOwnWriteEvents && b.writes != nil {
			h = b.writes.handler(o.gvk.GroupKind(), h)
		}
		bld = bld.WatchesRawSource(source.Kind[client.Object](syncWaitCache{b.mgr.GetCache()}, o.obj, trigger(h), preds...))
	}
	for _, w := range b.watches {
		bld = bld.Watches(w.obj, trigger(w.handler), w.opts...)
	}
	for _, ref := range b.refs {
		bld = bld.Watches(ref.obj, trigger(handler.EnqueueRequestsFromMapFunc(refMapper(ref, b.mgr.GetScheme(), b.cache, b.newObject))), ref.opts...)
	}
	return bld.Complete(rec)
}

// DefaultMaxRetryDelay is the longest [DefaultRateLimiter] waits before
// retrying an object whose reconciles keep failing with transient errors.
const DefaultMaxRetryDelay = 30 * time.Second

// DefaultRateLimiter is the workqueue rate limiter of every controller the
// builder registers, unless [Builder.WithOptions] sets another: per object,
// an exponential backoff from 5ms doubling up to [DefaultMaxRetryDelay]
// (controller-runtime's default goes up to 1000s), and overall at most 10
// retries per second with bursts of 100 (as controller-runtime's default).
// It applies only to transient errors (outcome.Transient and errors outcome
// does not recognise); the other classes requeue after a fixed wait or not
// at all. The cap bounds the time an object takes to recover after an
// outage: failures during an API-server outage or a network cut are counted
// per object and only a success resets them, so with a 1000s cap an object
// whose reconciles failed throughout a minute of outages would wait minutes
// after the API server is back.
func DefaultRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, DefaultMaxRetryDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// DefaultPredicate passes create, delete and generic events, and update
// events that change the generation, labels, annotations, finalizers or the
// deletion timestamp: not status-only updates, which the controller itself
// writes. For kinds without metadata.generation (ConfigMap, Secret,
// Namespace, …: generation stays 0) every update that changes the
// resourceVersion passes, since their data changes bump no generation.
func DefaultPredicate() predicate.Predicate {
	return defaultPredicate(nil)
}

// defaultPredicate is DefaultPredicate with changes to the annotations
// ignore selects not counted as changes.
func defaultPredicate(ignore func(key string) bool) predicate.Predicate {
	annotations := predicate.Predicate(predicate.AnnotationChangedPredicate{})
	if ignore != nil {
		annotations = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return false
			}
			return !annotationsEqual(e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations(), ignore)
		}}
	}
	return predicate.Or(
		predicate.GenerationChangedPredicate{},
		predicate.LabelChangedPredicate{},
		annotations,
		predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return false
			}
			return !slices.Equal(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers()) ||
				e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() ||
				e.ObjectNew.GetGeneration() == 0 && e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion()
		}},
	)
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

// CacheOptions returns the manager cache options opkit recommends, whose
// DefaultTransform is [CompactMetadata]: every cached object has its
// metadata.managedFields stripped, which saves about a tenth of the
// informer memory of a typical operator (more for objects written by several
// managers), and its label and annotation strings shared with equal ones of
// other cached objects. ensure keeps what it needs on the objects themselves
// (ensure.AnnotationDeclared, the record of what the operator last
// declared), so both of its strategies work with these options. Merge the
// result into your manager.Options.Cache when you set other cache fields.
func CacheOptions() cache.Options {
	return cache.Options{DefaultTransform: CompactMetadata}
}

// annotationsEqual compares a and b without the keys ignore selects.
func annotationsEqual(a, b map[string]string, ignore func(string) bool) bool {
	count := func(m map[string]string) int {
		n := 0
		for k := range m {
			if !ignore(k) {
				n++
			}
		}
		return n
	}
	if count(a) != count(b) {
		return false
	}
	for k, v := range a {
		if ignore(k) {
			continue
		}
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

package sharding

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Assigner labels the objects of one ring with the member that owns them and
// runs the drain handshake when membership changes. Exactly one replica runs it
// at a time: it is a manager.Runnable that needs leader election, so add it to
// a manager with leader election enabled (the member's own controllers do not
// need it). It watches, in a private metadata-only cache started only while it
// leads, the member Leases of its ring and the configured objects, so the
// replica's main cache stays restricted to its own shard.
//
// For each object it computes the owner as Ring.Lookup(ObjectKey(...)) over the
// ready members, weighted by the [WeightAnnotation] of their Leases (a ready
// member of weight 0 is off the ring: it gets nothing and its objects are
// drained to the others), and then:
//   - no ready member: changes nothing (objects stay as they are; unassigned
//     ones wait, nothing is lost);
//   - unassigned: sets ShardLabel to the owner;
//   - assigned to the owner: nothing (removes a stale DrainLabel);
//   - assigned to a dead member: sets ShardLabel to the owner at once;
//   - assigned to another live (ready or expired) member: sets DrainLabel and
//     waits until that member acknowledges by removing both labels (then the
//     object is unassigned and is assigned as above), or dies.
//
// Children (WithChildren) get their controller owner's current ShardLabel, or
// lose it while the owner has none; they are never drained themselves.
// Every write is a merge patch with an optimistic lock on resourceVersion.
type Assigner struct {
	ring, leaseNamespace string
	protos               []client.Object
	childProtos          map[int][]client.Object // index into protos → child prototypes
	observer             Observer
	recorder             events.EventRecorder
	clock                clock.WithTicker
	vnodes               int
	workers              int
	grace                func(time.Duration) time.Duration
	namespaces           []string

	mgr      manager.Manager
	mains    map[schema.GroupKind]schema.GroupVersionKind
	children map[schema.GroupKind][]schema.GroupVersionKind // owner GK → child GVKs

	membership *Membership
	cache      cache.Cache
	queue      workqueue.TypedRateLimitingInterface[assignKey]

	mu           sync.Mutex
	current      *Ring
	ready        []string       // ready members the current ring was built from
	readyWeights map[string]int // their weights
	states       map[string]MemberState
	weights      map[string]int
	drained      map[assignKey]string // object → member it was drained from
}

type assignKey struct {
	gk              schema.GroupKind
	namespace, name string
}

const ownerIndex = "sharding.opkit.dev/controller-owner"

// AssignerOption configures [NewAssigner]. Options shared with other
// constructors ([WithClock], [WithObserver], [WithVirtualNodes],
// [WithDeadGrace]) are values that implement several option interfaces.
type AssignerOption interface{ applyToAssigner(*Assigner) }

type assignerOptionFunc func(*Assigner)

func (f assignerOptionFunc) applyToAssigner(a *Assigner) { f(a) }

// WithObjects sets the types whose objects the assigner distributes
// (prototypes such as &corev1.ConfigMap{}; they must be in the manager's scheme).
func WithObjects(objs ...client.Object) AssignerOption {
	return assignerOptionFunc(func(a *Assigner) { a.protos = append(a.protos, objs...) })
}

// WithChildren makes children of the given types, controlled by an object of
// owner's type (owner must also be passed to WithObjects), carry their
// owner's shard label, so that the member watching the owner also caches them.
func WithChildren(owner client.Object, children ...client.Object) AssignerOption {
	return assignerOptionFunc(func(a *Assigner) {
		if a.childProtos == nil {
			a.childProtos = map[int][]client.Object{}
		}
		a.protos = append(a.protos, owner)
		i := len(a.protos) - 1
		a.childProtos[i] = append(a.childProtos[i], children...)
	})
}

// WithNamespaces restricts the assigner to objects in these namespaces
// (default: all namespaces).
func WithNamespaces(ns ...string) AssignerOption {
	return assignerOptionFunc(func(a *Assigner) { a.namespaces = append(a.namespaces, ns...) })
}

// WithEventRecorder makes the assigner emit a Normal event "ShardMoved" on
// every object it moves to another member, and "ShardDrain" when it asks a
// member to give one up.
func WithEventRecorder(r events.EventRecorder) AssignerOption {
	return assignerOptionFunc(func(a *Assigner) { a.recorder = r })
}

// WithWorkers sets how many objects are assigned concurrently (default 4).
func WithWorkers(n int) AssignerOption {
	return assignerOptionFunc(func(a *Assigner) { a.workers = max(n, 1) })
}

// NewAssigner returns the assigner of ring, whose member Leases live in
// leaseNamespace. The objects it distributes are set with [WithObjects].
func NewAssigner(ring, leaseNamespace string, opts ...AssignerOption) (*Assigner, error) {
	if err := validateName("ring", ring); err != nil {
		return nil, err
	}
	if leaseNamespace == "" {
		return nil, errors.New("sharding: NewAssigner needs a lease namespace")
	}
	a := &Assigner{
		ring: ring, leaseNamespace: leaseNamespace,
		observer: NopObserver{},
		clock:    clock.RealClock{},
		vnodes:   DefaultVirtualNodes,
		workers:  4,
	}
	for _, o := range opts {
		o.applyToAssigner(a)
	}
	if len(a.protos) == 0 {
		return nil, errors.New("sharding: NewAssigner needs WithObjects")
	}
	return a, nil
}

// SetupWithManager resolves the configured types with mgr's scheme and adds
// the assigner to mgr.
func (a *Assigner) SetupWithManager(mgr manager.Manager) error {
	a.mgr = mgr
	a.mains = map[schema.GroupKind]schema.GroupVersionKind{}
	a.children = map[schema.GroupKind][]schema.GroupVersionKind{}
	for i, p := range a.protos {
		gvk, err := apiutil.GVKForObject(p, mgr.GetScheme())
		if err != nil {
			return fmt.Errorf("sharding: assigner: %w", err)
		}
		a.mains[gvk.GroupKind()] = gvk
		for _, c := range a.childProtos[i] {
			cgvk, err := apiutil.GVKForObject(c, mgr.GetScheme())
			if err != nil {
				return fmt.Errorf("sharding: assigner: %w", err)
			}
			if !slices.Contains(a.children[gvk.GroupKind()], cgvk) {
				a.children[gvk.GroupKind()] = append(a.children[gvk.GroupKind()], cgvk)
			}
		}
	}
	return mgr.Add(a)
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the
// elected replica assigns.
func (a *Assigner) NeedLeaderElection() bool { return true }

func metaObject(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(gvk)
	return o
}

// Start runs the assigner until ctx ends.
func (a *Assigner) Start(ctx context.Context) error {
	if a.mgr == nil {
		return errors.New("sharding: Assigner.Start before SetupWithManager")
	}
	logger := log.FromContext(ctx).WithValues("ring", a.ring, "component", "sharding-assigner")
	ctx = log.IntoContext(ctx, logger)
	mopts := []MembershipOption{WithClock(a.clock)}
	if a.grace != nil {
		mopts = append(mopts, WithDeadGrace(a.grace))
	}
	a.membership = NewMembership(mopts...)
	a.states = map[string]MemberState{}
	a.drained = map[assignKey]string{}
	a.current = NewRing(nil)
	a.ready, a.readyWeights = nil, nil
	var defaultNS map[string]cache.Config
	for _, ns := range a.namespaces {
		if defaultNS == nil {
			defaultNS = map[string]cache.Config{}
		}
		defaultNS[ns] = cache.Config{}
	}
	c, err := cache.New(a.mgr.GetConfig(), cache.Options{
		DefaultNamespaces: defaultNS,
		Scheme:            a.mgr.GetScheme(),
		Mapper:            a.mgr.GetRESTMapper(),
		// The assigner reads labels and owner references only; managedFields
		// are most of a metadata-only object's size.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&coordinationv1.Lease{}: {
				Namespaces: map[string]cache.Config{a.leaseNamespace: {}},
				Label:      labels.SelectorFromSet(labels.Set{RingLabel: a.ring}),
			},
		},
	})
	if err != nil {
		return fmt.Errorf("sharding: assigner cache: %w", err)
	}
	a.cache = c
	a.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[assignKey](),
		workqueue.TypedRateLimitingQueueConfig[assignKey]{})
	defer a.queue.ShutDown()

	if err := a.watch(ctx); err != nil {
		return err
	}
	cacheDone := make(chan error, 1)
	go func() { cacheDone <- c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("sharding: assigner cache did not sync: %w", <-cacheDone)
	}
	// Event handlers deliver the Leases after the sync; read them now so the
	// first recompute knows every member (one not yet seen would count as
	// dead and lose its objects without a drain).
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace(a.leaseNamespace), client.MatchingLabels{RingLabel: a.ring}); err != nil {
		return fmt.Errorf("sharding: assigner: list member Leases: %w", err)
	}
	for i := range leases.Items {
		a.membership.Observe(&leases.Items[i])
	}
	a.recompute(ctx, true)

	var wg sync.WaitGroup
	for range a.workers {
		wg.Go(func() {
			for a.processNext(ctx) {
			}
		})
	}
	wg.Go(func() { a.tick(ctx) })
	<-ctx.Done()
	a.queue.ShutDown()
	wg.Wait()
	return nil
}

func (a *Assigner) watch(ctx context.Context) error {
	leaseInf, err := a.cache.GetInformer(ctx, &coordinationv1.Lease{})
	if err != nil {
		return fmt.Errorf("sharding: assigner lease informer: %w", err)
	}
	onLease := func(obj any) {
		if l, ok := obj.(*coordinationv1.Lease); ok {
			a.membership.Observe(l)
			a.recompute(ctx, false)
		}
	}
	if _, err := leaseInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    onLease,
		UpdateFunc: func(_, n any) { onLease(n) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if l, ok := obj.(*coordinationv1.Lease); ok {
				a.membership.Forget(l.Labels[MemberLabel])
				a.recompute(ctx, false)
			}
		},
	}); err != nil {
		return err
	}
	for gk, gvk := range a.mains {
		inf, err := a.cache.GetInformer(ctx, metaObject(gvk))
		if err != nil {
			return fmt.Errorf("sharding: assigner informer for %s: %w", gk, err)
		}
		enqueue := func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if m, err := meta.Accessor(obj); err == nil {
				a.queue.Add(assignKey{gk: gk, namespace: m.GetNamespace(), name: m.GetName()})
			}
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue,
		}); err != nil {
			return err
		}
	}
	for ownerGK, childGVKs := range a.children {
		for _, cgvk := range childGVKs {
			owner := ownerGK
			if err := a.cache.IndexField(ctx, metaObject(cgvk), ownerIndex, func(o client.Object) []string {
				if k, ok := controllerOwner(o, owner); ok {
					return []string{k.namespace + "/" + k.name}
				}
				return nil
			}); err != nil {
				return fmt.Errorf("sharding: assigner index for %s: %w", cgvk.Kind, err)
			}
			inf, err := a.cache.GetInformer(ctx, metaObject(cgvk))
			if err != nil {
				return fmt.Errorf("sharding: assigner informer for %s: %w", cgvk.Kind, err)
			}
			enqueue := func(obj any) {
				if o, ok := obj.(client.Object); ok {
					if k, ok := controllerOwner(o, owner); ok {
						a.queue.Add(k)
					}
				}
			}
			if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
				AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) },
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

func controllerOwner(o client.Object, ownerGK schema.GroupKind) (assignKey, bool) {
	ref := metav1.GetControllerOfNoCopy(o)
	if ref == nil {
		return assignKey{}, false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != ownerGK.Group || ref.Kind != ownerGK.Kind {
		return assignKey{}, false
	}
	return assignKey{gk: ownerGK, namespace: o.GetNamespace(), name: ref.Name}, true
}

// recompute re-derives member states; when any state changed (or force) it
// rebuilds the ring and re-examines every object.
func (a *Assigner) recompute(ctx context.Context, force bool) {
	states := a.membership.States()
	weights := a.membership.Weights()
	a.mu.Lock()
	changed := force || len(states) != len(a.states)
	for m, s := range states {
		if a.states[m] != s || a.weights[m] != weights[m] {
			changed = true
		}
	}
	if !changed {
		a.mu.Unlock()
		return
	}
	a.states, a.weights = states, weights
	ready := a.membership.Ready()
	readyWeights := make(map[string]int, len(ready))
	for _, m := range ready {
		readyWeights[m] = weights[m]
	}
	ringChanged := !slices.Equal(ready, a.ready) || !maps.Equal(readyWeights, a.readyWeights)
	if ringChanged {
		a.ready, a.readyWeights = ready, readyWeights
		a.current = NewRing(ready, WithVirtualNodes(a.vnodes), WithWeights(readyWeights))
	}
	a.mu.Unlock()
	if ringChanged {
		log.FromContext(ctx).Info("ring recomputed", "ready", ready, "weights", readyWeights, "states", states)
		a.observer.RingRecomputed(a.ring, a.current.Members())
	}
	a.enqueueAll(ctx)
}

func (a *Assigner) enqueueAll(ctx context.Context) {
	for gk, gvk := range a.mains {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := a.cache.List(ctx, list); err != nil {
			log.FromContext(ctx).Error(err, "listing objects", "kind", gk)
			continue
		}
		for i := range list.Items {
			a.queue.Add(assignKey{gk: gk, namespace: list.Items[i].Namespace, name: list.Items[i].Name})
		}
	}
}

// tick notices state changes caused by time alone (expiry, death) and reports
// per-member object counts.
func (a *Assigner) tick(ctx context.Context) {
	lastReport := time.Time{}
	for {
		d := a.membership.NextTransition()
		if d <= 0 || d > time.Second {
			d = time.Second
		}
		t := a.clock.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		a.recompute(ctx, false)
		if a.clock.Since(lastReport) >= time.Second {
			lastReport = a.clock.Now()
			a.observer.MemberObjects(a.ring, a.counts(ctx))
		}
	}
}

func (a *Assigner) counts(ctx context.Context) map[string]int {
	out := map[string]int{}
	key := ShardLabel(a.ring)
	for _, gvk := range a.mains {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := a.cache.List(ctx, list); err != nil {
			continue
		}
		for i := range list.Items {
			out[list.Items[i].Labels[key]]++
		}
	}
	return out
}

func (a *Assigner) processNext(ctx context.Context) bool {
	k, shutdown := a.queue.Get()
	if shutdown {
		return false
	}
	defer a.queue.Done(k)
	if err := a.assign(ctx, k); err != nil {
		if !apierrors.IsConflict(err) && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "assigning", "kind", k.gk, "namespace", k.namespace, "name", k.name)
		}
		a.queue.AddRateLimited(k)
		return true
	}
	a.queue.Forget(k)
	return true
}

func (a *Assigner) assign(ctx context.Context, k assignKey) error {
	gvk := a.mains[k.gk]
	obj := metaObject(gvk)
	if err := a.cache.Get(ctx, client.ObjectKey{Namespace: k.namespace, Name: k.name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			a.mu.Lock()
			delete(a.drained, k)
			a.mu.Unlock()
			return nil
		}
		return err
	}
	shardKey, drainKey := ShardLabel(a.ring), DrainLabel(a.ring)
	a.mu.Lock()
	ring := a.current
	a.mu.Unlock()
	desired := ring.Lookup(ObjectKey(k.gk, k.namespace, k.name))
	cur := obj.Labels[shardKey]
	_, draining := obj.Labels[drainKey]
	logger := log.FromContext(ctx).WithValues("kind", k.gk, "namespace", k.namespace, "name", k.name)

	childrenSynced := false
	switch {
	case desired == "":
		// No ready member: leave everything as it is.
	case cur == desired:
		if draining {
			if err := a.patchLabels(ctx, obj, map[string]*string{drainKey: nil}); err != nil {
				return err
			}
		}
	case cur == "":
		// Children first: when the new member's cache learns of the owner,
		// its children are (almost always) already there, so its first
		// reconcile updates them instead of trying to create them again.
		if err := a.syncChildren(ctx, k, desired); err != nil {
			return err
		}
		childrenSynced = true
		if err := a.patchLabels(ctx, obj, map[string]*string{shardKey: &desired, drainKey: nil}); err != nil {
			return err
		}
		a.mu.Lock()
		from, moved := a.drained[k]
		delete(a.drained, k)
		a.mu.Unlock()
		if moved {
			a.observer.ObjectMoved(a.ring, from, desired, false)
			a.event(obj, "ShardMoved", "moved from member %s to %s after drain", from, desired)
			logger.V(1).Info("moved after drain", "from", from, "to", desired)
		} else {
			a.observer.ObjectAssigned(a.ring, desired)
		}
	case a.membership.State(cur) == StateDead:
		// Children first, as above; the dead member reconciles nothing.
		if err := a.syncChildren(ctx, k, desired); err != nil {
			return err
		}
		childrenSynced = true
		if err := a.patchLabels(ctx, obj, map[string]*string{shardKey: &desired, drainKey: nil}); err != nil {
			return err
		}
		a.mu.Lock()
		delete(a.drained, k)
		a.mu.Unlock()
		a.observer.ObjectMoved(a.ring, cur, desired, true)
		a.event(obj, "ShardMoved", "moved from dead member %s to %s", cur, desired)
		logger.V(1).Info("moved from dead member", "from", cur, "to", desired)
	case !draining:
		if err := a.patchLabels(ctx, obj, map[string]*string{drainKey: ptrTo("true")}); err != nil {
			return err
		}
		a.mu.Lock()
		a.drained[k] = cur
		a.mu.Unlock()
		a.observer.DrainRequested(a.ring, cur)
		a.event(obj, "ShardDrain", "asked member %s to give the object up for %s", cur, desired)
	default:
		// Waiting for cur to acknowledge, or to die: its Lease changes and
		// time-based state changes re-enqueue the object.
	}
	if childrenSynced {
		// The cache may not show those label patches yet; patching again
		// from it would only conflict.
		return nil
	}
	return a.syncChildren(ctx, k, obj.Labels[shardKey])
}

func ptrTo(s string) *string { return &s }

// patchLabels applies set (nil value: remove) to obj's labels with an
// optimistic lock, updating obj.
func (a *Assigner) patchLabels(ctx context.Context, obj *metav1.PartialObjectMetadata, set map[string]*string) error {
	before := obj.DeepCopy()
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	for k, v := range set {
		if v == nil {
			delete(l, k)
		} else {
			l[k] = *v
		}
	}
	obj.SetLabels(l)
	if err := a.mgr.GetClient().Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("sharding: label %s/%s: %w", obj.Namespace, obj.Name, err)
	}
	return nil
}

func (a *Assigner) syncChildren(ctx context.Context, owner assignKey, shard string) error {
	shardKey := ShardLabel(a.ring)
	var errs []error
	for _, cgvk := range a.children[owner.gk] {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(cgvk.GroupVersion().WithKind(cgvk.Kind + "List"))
		if err := a.cache.List(ctx, list, client.InNamespace(owner.namespace),
			client.MatchingFields{ownerIndex: owner.namespace + "/" + owner.name}); err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range list.Items {
			child := &list.Items[i]
			child.SetGroupVersionKind(cgvk)
			if cur, ok := child.Labels[shardKey]; (shard == "" && !ok) || (shard != "" && cur == shard) {
				continue
			}
			var v *string
			if shard != "" {
				v = &shard
			}
			if err := a.patchLabels(ctx, child, map[string]*string{shardKey: v}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (a *Assigner) event(obj runtime.Object, reason, format string, args ...any) {
	if a.recorder != nil {
		a.recorder.Eventf(obj, nil, corev1.EventTypeNormal, reason, "Shard", format, args...)
	}
}

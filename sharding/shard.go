package sharding

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Shard is one replica's membership in a ring: it decides which objects this
// replica may reconcile right now. Create it with [NewShard] (dynamic: the
// replica announces itself with a Lease and an [Assigner] labels objects for
// it) or [NewStaticShard] (objects are labelled by someone else and no Lease
// is held), then call [Shard.SetupWithManager].
//
// An object is this shard's right now when all of these hold, checked by
// [Shard.Begin] after it registered the reconcile as in flight:
//   - the shard is active: static, or holding its Lease, last renewed less
//     than the lease duration ago by this replica's clock, and not stopping;
//   - the object, read from the manager's cache, carries ShardLabel(ring) =
//     member and no DrainLabel(ring).
//
// A Shard is safe for concurrent use.
type Shard struct {
	ring, member string
	static       bool

	instance       string
	leaseNamespace string
	leaseDuration  time.Duration
	renewInterval  time.Duration
	retryInterval  time.Duration
	releaseOnStop  bool
	weight         int
	version        string
	clock          clock.WithTicker
	observers      observers

	scheme    *runtime.Scheme
	client    client.Client
	apiReader client.Reader
	reader    client.Reader

	serverSide bool
	ranges     []HashRange
	vnodes     int

	mu        sync.Mutex
	inflight  map[string]int
	total     int
	holding   bool
	lastRenew time.Time
	stopping  bool
	waiting   string // holder we wait for, logged once
	watch     *holderWatch
}

// ShardOption configures [NewShard], [NewStaticShard] and
// [NewServerSideShard]. Options shared with other constructors ([WithClock],
// [WithObserver], [WithVirtualNodes]) are values that implement several
// option interfaces.
type ShardOption interface{ applyToShard(*Shard) }

type shardOptionFunc func(*Shard)

func (f shardOptionFunc) applyToShard(s *Shard) { f(s) }

// WithLeaseDuration sets the lease duration the member announces (whole
// seconds, at least 1s; default [DefaultLeaseDuration]). The member renews
// every third of it. Observers consider it expired after one duration without
// a renewal and dead after two: an ungraceful member's objects move after
// about twice this.
func WithLeaseDuration(d time.Duration) ShardOption {
	return shardOptionFunc(func(s *Shard) { s.leaseDuration = max(d.Truncate(time.Second), time.Second) })
}

// WithInstanceID sets the Lease holderIdentity this process uses (default: the
// member name plus a random suffix). Two processes started with the same
// member name must have different instance IDs: that is how the second one
// notices the first and waits.
func WithInstanceID(id string) ShardOption {
	return shardOptionFunc(func(s *Shard) { s.instance = id })
}

// WithReleaseOnStop controls whether a stopping member releases its Lease
// (default true): its objects then move at once. With false the Lease is left
// to expire, so a process restarted with the same member name (e.g. a
// StatefulSet pod) takes it over after two lease durations and keeps the
// objects; tests use it to simulate a crash.
func WithReleaseOnStop(release bool) ShardOption {
	return shardOptionFunc(func(s *Shard) { s.releaseOnStop = release })
}

// WithWeight sets the weight the member announces on its Lease
// ([WeightAnnotation]) when the Lease has none: when it is created, or was
// written before weights existed. Default [DefaultWeight]; negative counts
// as 0, more than [MaxWeight] as MaxWeight. A member of weight 0 is on no ring: it holds its Lease and may be
// given objects only once someone raises its weight, which is how a canary
// version joins (see the sharding/canary package). A weight already on the
// Lease is kept, across renewals and restarts: once set, whoever steers the
// ring owns it.
func WithWeight(w int) ShardOption {
	return shardOptionFunc(func(s *Shard) { s.weight = min(max(w, 0), MaxWeight) })
}

// WithVersion sets the operator version the member announces on its Lease
// ([VersionAnnotation]), rewritten whenever it acquires the Lease (default:
// none, and an existing annotation is left as it is).
func WithVersion(v string) ShardOption {
	return shardOptionFunc(func(s *Shard) { s.version = v })
}

// AddObserver adds o to the member's observers (see [WithObserver]); call it
// before the manager starts. The reconciler package adds sharding.Metrics to
// a member it is given.
func (s *Shard) AddObserver(o Observer) {
	if o != nil {
		s.observers = append(s.observers, o)
	}
}

// NewShard returns a dynamic member of ring named member, whose member Lease
// lives in leaseNamespace (the [Assigner] of the ring watches the same
// namespace). Ring and member must be DNS-1123 labels, leaseNamespace a
// namespace name.
func NewShard(ring, member, leaseNamespace string, opts ...ShardOption) (*Shard, error) {
	if errs := validation.IsDNS1123Label(leaseNamespace); len(errs) > 0 {
		return nil, fmt.Errorf("sharding: lease namespace %q: %s", leaseNamespace, strings.Join(errs, "; "))
	}
	s, err := newShard(ring, member, opts)
	if err != nil {
		return nil, err
	}
	s.leaseNamespace = leaseNamespace
	return s, nil
}

// NewStaticShard returns a member that owns exactly the objects labelled
// ShardLabel(ring)=member. It holds no Lease and is always active until its
// manager stops; nothing moves objects between static members except whoever
// writes the labels.
func NewStaticShard(ring, member string, opts ...ShardOption) (*Shard, error) {
	s, err := newShard(ring, member, opts)
	if err != nil {
		return nil, err
	}
	s.static = true
	return s, nil
}

func newShard(ring, member string, opts []ShardOption) (*Shard, error) {
	if err := validateName("ring", ring); err != nil {
		return nil, err
	}
	if err := validateName("member", member); err != nil {
		return nil, err
	}
	s := &Shard{
		ring: ring, member: member,
		leaseDuration: DefaultLeaseDuration,
		releaseOnStop: true,
		weight:        DefaultWeight,
		clock:         clock.RealClock{},
		inflight:      map[string]int{},
		vnodes:        DefaultVirtualNodes,
	}
	for _, o := range opts {
		o.applyToShard(s)
	}
	if s.instance == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		s.instance = member + "_" + hex.EncodeToString(b)
	}
	s.renewInterval = s.leaseDuration / 3
	s.retryInterval = max(s.leaseDuration/6, 100*time.Millisecond)
	return s, nil
}

// Ring returns the ring's name.
func (s *Shard) Ring() string { return s.ring }

// Member returns the member's name.
func (s *Shard) Member() string { return s.member }

// InstanceID returns the Lease holderIdentity this process uses.
func (s *Shard) InstanceID() string { return s.instance }

// LabelSelector selects the objects labelled for this member. Use it as the
// cache's DefaultLabelSelector, or per type with [Shard.CacheByObject], so the
// replica caches only its own objects (and their children, which the
// [Assigner] labels like their owner).
func (s *Shard) LabelSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{ShardLabel(s.ring): s.member})
}

// CacheByObject returns cache.Options.ByObject entries restricting each of
// objs to [Shard.LabelSelector].
func (s *Shard) CacheByObject(objs ...client.Object) map[client.Object]cache.ByObject {
	out := make(map[client.Object]cache.ByObject, len(objs))
	for _, o := range objs {
		out[o] = cache.ByObject{Label: s.LabelSelector()}
	}
	return out
}

// Predicate passes events only for objects labelled for this member. It is an
// optimisation; [Shard.Begin] is the guard.
func (s *Shard) Predicate() predicate.Predicate {
	if s.serverSide {
		return predicate.NewPredicateFuncs(func(o client.Object) bool { return s.ownsUID(string(o.GetUID())) })
	}
	key := ShardLabel(s.ring)
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[key] == s.member })
}

// Owns reports whether obj is this member's by its labels, or for a
// server-side shard by the hash of its UID (ignoring whether the shard is
// active and whether a reconcile is in flight).
func (s *Shard) Owns(obj client.Object) bool {
	if s.serverSide {
		return s.ownsUID(string(obj.GetUID()))
	}
	l := obj.GetLabels()
	_, draining := l[DrainLabel(s.ring)]
	return l[ShardLabel(s.ring)] == s.member && !draining
}

// Active reports whether this replica may start reconciles: see [Shard].
func (s *Shard) Active() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.activeLocked()
}

func (s *Shard) activeLocked() bool {
	if s.stopping {
		return false
	}
	if s.static {
		return true
	}
	return s.holding && s.clock.Since(s.lastRenew) < s.leaseDuration
}

// LabelChild copies owner's shard label onto child (or removes it from child
// when owner has none). Reconcilers call it on children they create so the
// children are in the member's cache at once instead of after the [Assigner]
// labelled them.
//
// The child gets a new labels map: callers often share one map between a
// child's labels and its selectors, which must never carry the shard label.
func (s *Shard) LabelChild(owner, child client.Object) {
	key := ShardLabel(s.ring)
	l := make(map[string]string, len(child.GetLabels())+1)
	for k, v := range child.GetLabels() {
		l[k] = v
	}
	if v, ok := owner.GetLabels()[key]; ok {
		l[key] = v
	} else {
		delete(l, key)
	}
	child.SetLabels(l)
}

func (s *Shard) key(obj client.Object) (string, error) {
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		return "", fmt.Errorf("sharding: %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return ObjectKey(gvk.GroupKind(), obj.GetNamespace(), obj.GetName()), nil
}

// Begin registers a reconcile of obj (only its namespace and name are used on
// entry) as in flight, then reads obj from the manager's cache and reports
// whether it is this member's right now. When mine is true the caller must
// call end exactly once when the reconcile returns; otherwise end is a no-op
// and the caller must not touch the object. An object missing from the cache
// is not mine (err is nil). err is set only when the cache read fails.
//
// Registration comes before the read on purpose: the drain acknowledgement
// first sees the drain label in the same cache and then checks that nothing
// is in flight, so any Begin it does not see reads the drain label too.
func (s *Shard) Begin(ctx context.Context, obj client.Object) (end func(), mine bool, err error) {
	nop := func() {}
	if s.reader == nil {
		return nop, false, errors.New("sharding: Shard.Begin before SetupWithManager")
	}
	key, err := s.key(obj)
	if err != nil {
		return nop, false, err
	}
	s.mu.Lock()
	if !s.activeLocked() {
		s.mu.Unlock()
		return nop, false, nil
	}
	s.inflight[key]++
	s.total++
	s.mu.Unlock()
	var once sync.Once
	end = func() {
		once.Do(func() {
			s.mu.Lock()
			if s.inflight[key]--; s.inflight[key] <= 0 {
				delete(s.inflight, key)
			}
			s.total--
			s.mu.Unlock()
		})
	}
	if err := s.reader.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		end()
		if apierrors.IsNotFound(err) {
			return nop, false, nil
		}
		return nop, false, fmt.Errorf("sharding: get %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	if !s.Owns(obj) {
		end()
		return nop, false, nil
	}
	return end, true, nil
}

// Wrap guards inner with [Shard.Begin]: a request for an object that is not
// this member's right now returns an empty Result without calling inner.
// T is the reconciled type, e.g. Wrap[corev1.ConfigMap](shard, r).
func Wrap[T any, PT interface {
	*T
	client.Object
}](s *Shard, inner reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		obj := PT(new(T))
		obj.SetNamespace(req.Namespace)
		obj.SetName(req.Name)
		end, mine, err := s.Begin(ctx, obj)
		if err != nil || !mine {
			return reconcile.Result{}, err
		}
		defer end()
		return inner.Reconcile(ctx, req)
	})
}

// SetupWithManager wires the shard into mgr: for each of objs (the types this
// member reconciles; not their children) a small controller that acknowledges
// drains, and, for a dynamic shard, the Lease runnable. Neither needs leader
// election. The manager's cache must contain objs (it normally does, since
// the member's own controllers watch them).
func (s *Shard) SetupWithManager(mgr manager.Manager, objs ...client.Object) error {
	s.scheme = mgr.GetScheme()
	s.client = mgr.GetClient()
	s.apiReader = mgr.GetAPIReader()
	s.reader = mgr.GetCache()
	for _, obj := range objs {
		gvk, err := apiutil.GVKForObject(obj, s.scheme)
		if err != nil {
			return fmt.Errorf("sharding: %w", err)
		}
		proto := obj.DeepCopyObject().(client.Object)
		ack := &drainAcknowledger{s: s, newObj: func() client.Object { return proto.DeepCopyObject().(client.Object) }}
		drainKey, shardKey := DrainLabel(s.ring), ShardLabel(s.ring)
		err = builder.ControllerManagedBy(mgr).
			Named(fmt.Sprintf("shard-drain-%s-%s-%s", s.ring, s.member, gvk.Kind)).
			// Every replica acknowledges its own drains, elected or not. Names
			// repeat across managers in one process (tests, several rings).
			WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), SkipNameValidation: ptr.To(true)}).
			For(obj, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
				_, ok := o.GetLabels()[drainKey]
				return ok && o.GetLabels()[shardKey] == s.member
			}))).
			Complete(ack)
		if err != nil {
			return fmt.Errorf("sharding: drain controller for %s: %w", gvk.Kind, err)
		}
	}
	if s.static {
		return nil
	}
	return mgr.Add(s)
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica
// holds its own member Lease.
func (s *Shard) NeedLeaderElection() bool { return false }

type drainAcknowledger struct {
	s      *Shard
	newObj func() client.Object
}

func (a *drainAcknowledger) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s := a.s
	obj := a.newObj()
	if err := s.reader.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	l := obj.GetLabels()
	if _, ok := l[DrainLabel(s.ring)]; !ok || l[ShardLabel(s.ring)] != s.member {
		return reconcile.Result{}, nil
	}
	key, err := s.key(obj)
	if err != nil {
		return reconcile.Result{}, err
	}
	s.mu.Lock()
	busy := s.inflight[key] > 0
	s.mu.Unlock()
	if busy {
		// A reconcile that started before the drain label reached the cache is
		// still running; acknowledge only once it has returned.
		return reconcile.Result{RequeueAfter: 25 * time.Millisecond}, nil
	}
	before := obj.DeepCopyObject().(client.Object)
	delete(l, DrainLabel(s.ring))
	delete(l, ShardLabel(s.ring))
	obj.SetLabels(l)
	// The optimistic lock makes the acknowledgement apply only to the version
	// that asked for it; if the assigner changed its mind meanwhile, we look again.
	if err := s.client.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return reconcile.Result{RequeueAfter: 25 * time.Millisecond}, nil
		}
		return reconcile.Result{}, fmt.Errorf("sharding: acknowledge drain of %s/%s: %w", req.Namespace, req.Name, err)
	}
	s.observers.DrainAcknowledged(s.ring, s.member)
	return reconcile.Result{}, nil
}

// Start holds the member Lease until ctx ends: it acquires the Lease (waiting
// while another live instance holds the same member name), renews it every
// third of the lease duration, re-acquires it if lost, and on stop refuses new
// reconciles, waits up to one lease duration for in-flight ones and then
// releases the Lease (unless WithReleaseOnStop(false), or in-flight
// reconciles did not finish: then the Lease is left to expire, which is safe).
func (s *Shard) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithValues("ring", s.ring, "member", s.member, "instance", s.instance)
	var lease *coordinationv1.Lease
	for ctx.Err() == nil {
		if lease == nil {
			lease = s.tryAcquire(ctx, logger)
			if lease == nil {
				s.sleep(ctx, s.retryInterval)
				continue
			}
			logger.Info("acquired member lease")
		}
		s.sleep(ctx, s.renewInterval)
		if ctx.Err() != nil {
			break
		}
		lease = s.renew(ctx, lease, logger)
	}
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	if lease == nil {
		return nil
	}
	if !s.waitIdle(s.leaseDuration) {
		logger.Info("in-flight reconciles did not finish; leaving the member lease to expire")
		return nil
	}
	if !s.releaseOnStop {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	lease.Spec.HolderIdentity = nil
	lease.Spec.AcquireTime = nil
	if err := s.client.Update(rctx, lease); err != nil {
		logger.Error(err, "releasing member lease; it will expire instead")
		return nil
	}
	s.mu.Lock()
	s.holding = false
	s.mu.Unlock()
	logger.Info("released member lease")
	return nil
}

func (s *Shard) sleep(ctx context.Context, d time.Duration) {
	t := s.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C():
	}
}

func (s *Shard) waitIdle(timeout time.Duration) bool {
	deadline := s.clock.Now().Add(timeout)
	for {
		s.mu.Lock()
		idle := s.total == 0
		s.mu.Unlock()
		if idle {
			return true
		}
		if s.clock.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// holderWatch judges, by this process's clock only, whether another instance
// holding our member Lease is dead: the same rule an assigner applies.
type holderWatch struct{ m *Membership }

func (s *Shard) tryAcquire(ctx context.Context, logger logr.Logger) *coordinationv1.Lease {
	name := LeaseName(s.ring, s.member)
	// The Lease's times come from the member's clock (WithClock), like its
	// self-fencing: what others read is what this machine believes.
	sent := s.clock.Now()
	now := metav1.NewMicroTime(sent)
	lease := &coordinationv1.Lease{}
	err := s.apiReader.Get(ctx, client.ObjectKey{Namespace: s.leaseNamespace, Name: name}, lease)
	switch {
	case apierrors.IsNotFound(err):
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: s.leaseNamespace, Name: name,
				Labels:      map[string]string{RingLabel: s.ring, MemberLabel: s.member},
				Annotations: s.announce(nil),
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(s.instance),
				LeaseDurationSeconds: ptr.To(s.leaseSeconds()),
				AcquireTime:          &now,
				RenewTime:            &now,
			},
		}
		if err := s.client.Create(ctx, lease); err != nil {
			if !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
				logger.Error(err, "creating member lease")
			}
			return nil
		}
		s.markHeld(sent)
		return lease
	case err != nil:
		if ctx.Err() == nil {
			logger.Error(err, "reading member lease")
		}
		return nil
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder != "" && holder != s.instance {
		if s.watch == nil {
			s.watch = &holderWatch{m: NewMembership(WithClock(s.clock))}
		}
		s.watch.m.Observe(lease)
		if s.watch.m.State(s.member) != StateDead {
			if s.waiting != holder {
				s.waiting = holder
				logger.Info("member name is held by another live instance; waiting for its lease to be released or to die", "holder", holder)
			}
			return nil
		}
	}
	if holder != s.instance {
		lease.Spec.AcquireTime = &now
		lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
	}
	lease.Spec.HolderIdentity = ptr.To(s.instance)
	lease.Spec.LeaseDurationSeconds = ptr.To(s.leaseSeconds())
	lease.Spec.RenewTime = &now
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	lease.Labels[RingLabel], lease.Labels[MemberLabel] = s.ring, s.member
	lease.Annotations = s.announce(lease.Annotations)
	if err := s.client.Update(ctx, lease); err != nil {
		if !apierrors.IsConflict(err) && ctx.Err() == nil {
			logger.Error(err, "taking member lease")
		}
		return nil
	}
	s.watch = nil
	s.waiting = ""
	s.markHeld(sent)
	return lease
}

// announce returns annotations with the member's weight (unless one is
// there) and version (when it has one).
func (s *Shard) announce(annotations map[string]string) map[string]string {
	if annotations == nil {
		annotations = map[string]string{}
	}
	if _, ok := annotations[WeightAnnotation]; !ok {
		annotations[WeightAnnotation] = strconv.Itoa(s.weight)
	}
	if s.version != "" {
		annotations[VersionAnnotation] = s.version
	}
	return annotations
}

// leaseSeconds is the announced duration, clamped to what the field holds.
func (s *Shard) leaseSeconds() int32 {
	return int32(min(s.leaseDuration/time.Second, math.MaxInt32)) //nolint:gosec // clamped above
}

func (s *Shard) markHeld(sent time.Time) {
	s.mu.Lock()
	s.holding, s.lastRenew = true, sent
	s.mu.Unlock()
}

// renew returns the renewed Lease, or nil when it was lost to another instance.
func (s *Shard) renew(ctx context.Context, lease *coordinationv1.Lease, logger logr.Logger) *coordinationv1.Lease {
	sent := s.clock.Now()
	now := metav1.NewMicroTime(sent)
	next := lease.DeepCopy()
	next.Spec.RenewTime = &now
	err := s.client.Update(ctx, next)
	if err == nil {
		s.markHeld(sent)
		return next
	}
	if ctx.Err() != nil {
		return lease
	}
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		current := &coordinationv1.Lease{}
		if gerr := s.apiReader.Get(ctx, client.ObjectKeyFromObject(lease), current); gerr == nil &&
			ptr.Deref(current.Spec.HolderIdentity, "") == s.instance {
			// Someone changed labels or annotations (a weight): still ours,
			// so renew on top of their change at once rather than a third
			// of a lease duration later.
			sent = s.clock.Now()
			next = current.DeepCopy()
			now = metav1.NewMicroTime(sent)
			next.Spec.RenewTime = &now
			if err := s.client.Update(ctx, next); err == nil {
				s.markHeld(sent)
				return next
			}
			return current
		}
		s.mu.Lock()
		s.holding = false
		s.mu.Unlock()
		logger.Info("lost member lease")
		return nil
	}
	// Transient error: keep trying; Active turns false by itself once the
	// last successful renewal is a lease duration old.
	logger.Error(err, "renewing member lease")
	return lease
}

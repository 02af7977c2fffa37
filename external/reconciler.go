package external

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/outcome"
)

// Annotations the Reconciler writes on an object to make its external
// create crash-safe (see the package documentation). They are bookkeeping:
// the reconciler package's default predicate ignores changes to them.
const (
	// AnnotationPrefix is the prefix of every annotation this package writes.
	AnnotationPrefix = "external.opkit.dev/"
	// AnnotationExternalName is the external resource's name, recorded
	// before the first create and never changed by the Reconciler.
	AnnotationExternalName = AnnotationPrefix + "name"
	// AnnotationCreatePending holds the RFC 3339 time a create was about to
	// be sent. Present, it means the create's outcome is not known yet: the
	// next Sync observes before anything else.
	AnnotationCreatePending = AnnotationPrefix + "create-pending"
	// AnnotationCreateSucceeded holds the time the Reconciler knew the
	// resource existed (its create returned, or Observe found the resource
	// of an interrupted create). It replaces AnnotationCreatePending.
	AnnotationCreateSucceeded = AnnotationPrefix + "create-succeeded"
	// AnnotationCreateFailed holds the time a create was refused (a
	// Terminal or Throttled answer: nothing was made). It replaces
	// AnnotationCreatePending.
	AnnotationCreateFailed = AnnotationPrefix + "create-failed"
)

// FinalizerName is the finalizer the reconciler package uses for the
// external resource's deletion when the builder declares none.
const FinalizerName = "external.opkit.dev/delete"

// Condition reasons and event reasons.
const (
	// ReasonAvailable is the Ready=True reason of an object whose external
	// resource exists and matches its spec.
	ReasonAvailable = "Available"
	// ReasonThrottled is the Reconciling reason while the endpoint's rate
	// limit or Retry-After holds the object's calls back.
	ReasonThrottled = "Throttled"
	// ReasonExternalNameTaken (Stalled) is a resource of the external name
	// that was not made for this object ([Observation.Foreign]).
	ReasonExternalNameTaken = "ExternalNameTaken"
	// ReasonCreateOutcomeUnknown (Stalled) is a create whose outcome is
	// unknown, for an API without idempotent creates
	// ([WithNonIdempotentCreate]).
	ReasonCreateOutcomeUnknown = "CreateOutcomeUnknown"
	// ReasonNotFound is the Reconciling reason of an observe-only object
	// whose external resource does not exist.
	ReasonNotFound = "ExternalNotFound"
	// ReasonNotReady is the Reconciling reason of an external resource
	// that exists but is not usable yet, or is being deleted.
	ReasonNotReady = "ExternalNotReady"

	// ReasonCreated (Normal event): the external resource was created.
	ReasonCreated = "Created"
	// ReasonCreateRecovered (Normal event): a create whose result was never
	// recorded had succeeded; its resource was found and not created again.
	ReasonCreateRecovered = "CreateRecovered"
	// ReasonUpdated (Normal event): the external resource was changed to a
	// new spec.
	ReasonUpdated = "Updated"
	// ReasonDriftCorrected (Warning event): the external resource had been
	// changed or deleted outside Kubernetes and was set back.
	ReasonDriftCorrected = "DriftCorrected"
	// ReasonDeleting (Normal event): the external resource's deletion was
	// requested.
	ReasonDeleting = "Deleting"
	// ReasonOrphaned (Normal event): the policy left the external resource
	// in place when the object was deleted.
	ReasonOrphaned = "Orphaned"
)

// Event actions (events.k8s.io/v1).
const (
	ActionCreate  = "Create"
	ActionUpdate  = "Update"
	ActionDelete  = "Delete"
	ActionObserve = "Observe"
)

// NameOf returns obj's recorded external name ("" before the first Sync).
func NameOf(obj client.Object) string { return obj.GetAnnotations()[AnnotationExternalName] }

// Token returns obj's idempotency token: its UID.
func Token(obj client.Object) string { return string(obj.GetUID()) }

// Reconciler turns a [Connector] into the lifecycle of one external resource
// per object. Build it with [New]; the reconciler package's
// Builder.External does, and calls it. It is safe for concurrent use (on
// different objects).
type Reconciler[T client.Object] struct {
	client    client.Client
	name      string
	connector Connector[T]
	s         settings

	mu     sync.Mutex
	synced map[types.NamespacedName]syncMark
}

type syncMark struct {
	uid        types.UID
	generation int64
}

// New returns a Reconciler for T whose bookkeeping writes (annotations, late
// initialisation) go through c; name is the controller's name (metrics,
// logs).
func New[T client.Object](c client.Client, name string, connector Connector[T], opts ...Option) (*Reconciler[T], error) {
	if c == nil || connector == nil {
		return nil, errors.New("external: New needs a client and a Connector")
	}
	r := &Reconciler[T]{client: c, name: name, connector: connector, synced: map[types.NamespacedName]syncMark{}, s: settings{
		maxWait: time.Second, poll: time.Minute, progress: 2 * time.Second,
		observer: NopObserver{}, clock: clock.RealClock{},
	}}
	t := reflect.TypeFor[T]()
	for _, o := range opts {
		if err := o.apply(&r.s, t); err != nil {
			return nil, err
		}
	}
	if r.s.limiter == nil {
		r.s.limiter = NewLimiter(0, 1, WithClock(r.s.clock))
	}
	return r, nil
}

func keyOf(obj client.Object) string { return obj.GetNamespace() + "/" + obj.GetName() }

func (r *Reconciler[T]) policy(obj T) Policy {
	if r.s.policy == nil {
		return Policy{}
	}
	return r.s.policy(obj)
}

func (r *Reconciler[T]) endpoint(obj T) string {
	if r.s.endpoint == nil {
		return ""
	}
	return r.s.endpoint(obj)
}

func (r *Reconciler[T]) event(obj T, typ, reason, action, note string, args ...any) {
	if r.s.recorder != nil {
		r.s.recorder.Eventf(obj, nil, typ, reason, action, note, args...)
	}
}

// admit takes a slot for one call to obj's endpoint from the Limiter,
// waiting up to the maximum wait; a longer wait is a Throttled outcome.
func (r *Reconciler[T]) admit(ctx context.Context, obj T, op string) error {
	ep := r.endpoint(obj)
	wait, ok := r.s.limiter.Reserve(ep, r.s.maxWait)
	if !ok {
		r.s.observer.Throttled(obj, ep, wait)
		return outcome.DependencyNotReady(ReasonThrottled,
			fmt.Sprintf("%s %s: calls to the external API are held back for %s (rate limit or Retry-After)", op, keyOf(obj), wait.Round(time.Millisecond)), wait)
	}
	if wait > 0 {
		select {
		case <-r.s.clock.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// send runs one admitted external call, timing it and classifying its
// error; a Throttled answer closes the endpoint for its Retry-After.
func (r *Reconciler[T]) send(obj T, op string, fn func() error) (Failure, error) {
	start := r.s.clock.Now()
	err := fn()
	took := r.s.clock.Since(start)
	if err == nil {
		r.s.observer.Call(obj, op, took, "")
		return Failure{}, nil
	}
	f, cerr := r.classified(op, keyOf(obj), err)
	if f.Kind == Throttled {
		r.s.limiter.Throttle(r.endpoint(obj), max(f.RetryAfter, time.Second))
	}
	r.s.observer.Call(obj, op, took, f.Code)
	return f, cerr
}

// call is admit, then send.
func (r *Reconciler[T]) call(ctx context.Context, obj T, op string, fn func() error) error {
	if err := r.admit(ctx, obj, op); err != nil {
		return err
	}
	_, err := r.send(obj, op, fn)
	return err
}

func (r *Reconciler[T]) connect(ctx context.Context, obj T) (Client[T], error) {
	start := r.s.clock.Now()
	cl, err := r.connector.Connect(ctx, obj)
	if err != nil {
		f, cerr := r.classified(OpConnect, keyOf(obj), err)
		r.s.observer.Call(obj, OpConnect, r.s.clock.Since(start), f.Code)
		return nil, cerr
	}
	return cl, nil
}

func (r *Reconciler[T]) observe(ctx context.Context, cl Client[T], obj T, name string) (Observation, error) {
	var obs Observation
	err := r.call(ctx, obj, OpObserve, func() error {
		var err error
		obs, err = cl.Observe(ctx, obj, name)
		return err
	})
	if err == nil && obs.Exists && obs.Foreign {
		return obs, outcome.Terminal(ReasonExternalNameTaken,
			fmt.Errorf("%s: an external resource named %q exists but was not created for this object (uid %s)", keyOf(obj), name, obj.GetUID()))
	}
	return obs, err
}

// Sync makes obj's external resource exist and match obj's spec, in this
// order: record the external name (once), observe, then create (crash-safe,
// see the package documentation), or record an interrupted create's
// success, late-initialise, update; mark obj Ready (reason
// [ReasonAvailable]) in memory. On success it returns
// outcome.RequeueAfter(poll interval): a success that asks to be looked at
// again for drift. The caller writes obj's status and publishes
// [Result.ConnectionDetails] ([Reconciler.ConnectionSecret]).
//
// With [Policy.ObserveOnly] it is [Reconciler.Observe]. An update of a
// resource found different although obj was already in sync for its
// generation is drift: event [ReasonDriftCorrected] (Warning) and the
// drift counter; so is re-creating a resource whose create had succeeded.
func (r *Reconciler[T]) Sync(ctx context.Context, obj T) (Result, error) {
	if r.policy(obj).ObserveOnly {
		return r.Observe(ctx, obj)
	}
	cl, err := r.connect(ctx, obj)
	if err != nil {
		return Result{}, err
	}
	name := NameOf(obj)
	if name == "" {
		name = r.newName(obj)
		if name == "" {
			return Result{}, outcome.Terminal("NoExternalName", fmt.Errorf("%s: the external name function returned nothing", keyOf(obj)))
		}
		if err := r.annotate(ctx, obj, map[string]string{AnnotationExternalName: name}); err != nil {
			return Result{}, err
		}
	}
	res := Result{Name: name}
	before := obj.DeepCopyObject().(T)
	obs, err := r.observe(ctx, cl, obj, name)
	res.Observation = obs
	if err != nil {
		return res, err
	}
	if !obs.Exists {
		return r.create(ctx, cl, obj, res)
	}
	if obj.GetAnnotations()[AnnotationCreatePending] != "" {
		if err := r.annotate(ctx, obj, map[string]string{AnnotationCreateSucceeded: r.now()}, AnnotationCreatePending, AnnotationCreateFailed); err != nil {
			return res, err
		}
		log.FromContext(ctx).Info("found the external resource of an interrupted create; not creating another", "external", name)
		r.event(obj, corev1.EventTypeNormal, ReasonCreateRecovered, ActionCreate,
			"found external resource %s made by an interrupted create (same idempotency token); not creating another", name)
	}
	if obs.Deleting {
		return res, outcome.DependencyNotReady(ReasonNotReady, fmt.Sprintf("external resource %s is being deleted outside Kubernetes; it is created again once gone", name), r.s.progress)
	}
	// Judged before late initialisation bumps the generation.
	drift := !obs.UpToDate && r.wasSynced(obj)
	if obs.LateInitialized {
		if err := r.lateInit(ctx, before, obj); err != nil {
			return res, err
		}
	}
	res.ConnectionDetails = maps.Clone(obs.ConnectionDetails)
	if !obs.UpToDate {
		var upd Update
		if err := r.call(ctx, obj, OpUpdate, func() error {
			var err error
			upd, err = cl.Update(ctx, obj, name)
			return err
		}); err != nil {
			return res, err
		}
		res.Updated = true
		res.ConnectionDetails = merge(res.ConnectionDetails, upd.ConnectionDetails)
		if drift {
			r.s.observer.DriftCorrected(obj)
			log.FromContext(ctx).Info("corrected drift made outside Kubernetes", "external", name, "changes", obs.Diff)
			r.event(obj, corev1.EventTypeWarning, ReasonDriftCorrected, ActionUpdate, "external resource %s was changed outside Kubernetes; set back: %s", name, obs.Diff)
		} else {
			r.event(obj, corev1.EventTypeNormal, ReasonUpdated, ActionUpdate, "updated external resource %s: %s", name, obs.Diff)
		}
	}
	return r.ready(obj, res, obs)
}

// Observe reads obj's external resource and reports it in obj's status,
// without writing anything else: no annotation, no create, update or
// delete. A missing resource is Reconciling with reason [ReasonNotFound],
// looked at again after the poll interval; a present one is Ready, its
// differences from the spec in the Ready message.
func (r *Reconciler[T]) Observe(ctx context.Context, obj T) (Result, error) {
	cl, err := r.connect(ctx, obj)
	if err != nil {
		return Result{}, err
	}
	name := NameOf(obj)
	if name == "" {
		name = r.newName(obj)
	}
	res := Result{Name: name}
	obs, err := r.observe(ctx, cl, obj, name)
	res.Observation = obs
	if err != nil {
		return res, err
	}
	if !obs.Exists {
		return res, outcome.DependencyNotReady(ReasonNotFound, fmt.Sprintf("external resource %s does not exist (observe-only: it is not created)", name), r.poll(obs))
	}
	res.ConnectionDetails = maps.Clone(obs.ConnectionDetails)
	return r.ready(obj, res, obs)
}

// ready marks obj Ready unless the resource is not usable yet, and asks for
// the next drift poll.
func (r *Reconciler[T]) ready(obj T, res Result, obs Observation) (Result, error) {
	if obs.NotReady != "" {
		return res, outcome.DependencyNotReady(ReasonNotReady, fmt.Sprintf("external resource %s is not ready: %s", res.Name, obs.NotReady), r.s.progress)
	}
	msg := fmt.Sprintf("external resource %s exists and matches the spec", res.Name)
	if !obs.UpToDate && !res.Updated {
		msg = fmt.Sprintf("external resource %s exists (observed only; differs from the spec: %s)", res.Name, obs.Diff)
	}
	if st, err := conditions.StatusOf(obj); err == nil && st.Writable() {
		was := conditions.IsTrue(obj, conditions.Ready)
		if err := st.MarkReady(ReasonAvailable, msg); err != nil {
			return res, err
		}
		if r.markSynced(obj) && !was {
			r.s.observer.FirstReady(obj, r.s.clock.Since(obj.GetCreationTimestamp().Time))
		}
	} else {
		r.markSynced(obj)
	}
	return res, outcome.RequeueAfter(r.poll(obs))
}

func (r *Reconciler[T]) poll(obs Observation) time.Duration {
	if obs.PollAfter > 0 {
		return obs.PollAfter
	}
	return r.s.poll
}

// create creates the resource: the pending marker is on the object before
// the call, the succeeded (or failed) marker replaces it after.
func (r *Reconciler[T]) create(ctx context.Context, cl Client[T], obj T, res Result) (Result, error) {
	anns := obj.GetAnnotations()
	recreate := anns[AnnotationCreateSucceeded] != ""
	if anns[AnnotationCreatePending] != "" {
		// The last create's outcome is unknown and Observe does not find
		// its resource.
		if r.s.nonIdempotent {
			return res, outcome.Terminal(ReasonCreateOutcomeUnknown, fmt.Errorf(
				"%s: a create of external resource %s was sent at %s and its outcome is unknown; the resource is not found, and this API's creates are not idempotent, so it is not sent again: remove the annotation %s once it is safe to create",
				keyOf(obj), res.Name, anns[AnnotationCreatePending], AnnotationCreatePending))
		}
	}
	// A slot first: a create held back by the Limiter writes nothing.
	if err := r.admit(ctx, obj, OpCreate); err != nil {
		return res, err
	}
	if anns[AnnotationCreatePending] == "" {
		if err := r.annotate(ctx, obj, map[string]string{AnnotationCreatePending: r.now()}, AnnotationCreateSucceeded, AnnotationCreateFailed); err != nil {
			return res, err
		}
	}
	var c Creation
	f, err := r.send(obj, OpCreate, func() error {
		var err error
		c, err = cl.Create(ctx, obj, CreateRequest{Name: res.Name, Token: Token(obj)})
		return err
	})
	if err != nil {
		if f.Kind == Terminal || f.Kind == Throttled || outcome.Classify(err).Class == outcome.ClassTerminal {
			// Refused: nothing was made. Record it, so the next attempt is
			// known to start afresh.
			if aerr := r.annotate(ctx, obj, map[string]string{AnnotationCreateFailed: r.now()}, AnnotationCreatePending); aerr != nil {
				return res, errors.Join(err, aerr)
			}
		}
		return res, err // otherwise the outcome is unknown: pending stays
	}
	if err := r.annotate(ctx, obj, map[string]string{AnnotationCreateSucceeded: r.now()}, AnnotationCreatePending, AnnotationCreateFailed); err != nil {
		return res, err
	}
	res.Created = true
	res.ConnectionDetails = maps.Clone(c.ConnectionDetails)
	if recreate {
		r.s.observer.DriftCorrected(obj)
		r.event(obj, corev1.EventTypeWarning, ReasonDriftCorrected, ActionCreate, "external resource %s was deleted outside Kubernetes; created it again", res.Name)
	} else {
		r.event(obj, corev1.EventTypeNormal, ReasonCreated, ActionCreate, "created external resource %s", res.Name)
	}
	// Observe what was made on the next poll; the create's answer is
	// authoritative for now.
	res.Observation = Observation{Exists: true, UpToDate: true}
	return r.ready(obj, res, Observation{Exists: true, UpToDate: true, PollAfter: r.s.progress})
}

// Delete deletes obj's external resource and reports Gone only once
// Observe says it does not exist. It never deletes a resource that was
// never created for obj (no recorded name, or [Observation.Foreign]), nor
// one the [Policy] keeps (Orphan, ObserveOnly).
func (r *Reconciler[T]) Delete(ctx context.Context, obj T) (Deletion, error) {
	name := NameOf(obj)
	if name == "" {
		r.Forget(client.ObjectKeyFromObject(obj))
		return Deletion{Gone: true}, nil // no create was ever attempted
	}
	if p := r.policy(obj); p.Orphan || p.ObserveOnly {
		r.event(obj, corev1.EventTypeNormal, ReasonOrphaned, ActionDelete, "the deletion policy leaves external resource %s in place", name)
		r.Forget(client.ObjectKeyFromObject(obj))
		return Deletion{Gone: true}, nil
	}
	cl, err := r.connect(ctx, obj)
	if err != nil {
		return Deletion{}, err
	}
	var obs Observation
	if err := r.call(ctx, obj, OpObserve, func() error {
		var err error
		obs, err = cl.Observe(ctx, obj, name)
		return err
	}); err != nil {
		return Deletion{}, err
	}
	switch {
	case !obs.Exists:
		r.Forget(client.ObjectKeyFromObject(obj))
		return Deletion{Gone: true}, nil // verified gone
	case obs.Foreign:
		log.FromContext(ctx).Info("external resource was not created for this object; leaving it", "external", name)
		r.Forget(client.ObjectKeyFromObject(obj))
		return Deletion{Gone: true}, nil
	case obs.Deleting:
		return Deletion{RequeueAfter: r.s.progress}, nil
	}
	if err := r.call(ctx, obj, OpDelete, func() error { return cl.Delete(ctx, obj, name) }); err != nil {
		return Deletion{}, err
	}
	r.event(obj, corev1.EventTypeNormal, ReasonDeleting, ActionDelete, "deleting external resource %s", name)
	return Deletion{RequeueAfter: r.s.progress}, nil // gone only once Observe says so
}

// ConnectionSecret returns the connection Secret of obj ([WithConnectionSecret])
// holding res's connection details, controlled by obj, for the caller to
// create or patch (the reconciler package ensures it as a child); nil when
// no Secret is configured for obj or there are no details.
func (r *Reconciler[T]) ConnectionSecret(obj T, res Result) *corev1.Secret {
	if r.s.secretName == nil || len(res.ConnectionDetails) == 0 {
		return nil
	}
	name := r.s.secretName(obj)
	if name == "" {
		return nil
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: name},
		Type:       corev1.SecretTypeOpaque,
		Data:       maps.Clone(res.ConnectionDetails),
	}
}

// Forget drops what the Reconciler remembers about an object (whether it
// was in sync), for an object that is gone.
func (r *Reconciler[T]) Forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.synced, key)
}

// markSynced remembers that obj was found in sync for its generation (a
// cache that has not caught up with the Ready status write must not make
// drift look like an ordinary update). It reports whether this process had
// not seen obj in sync before.
func (r *Reconciler[T]) markSynced(obj T) (first bool) {
	key := client.ObjectKeyFromObject(obj)
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.synced[key]
	first = !ok || m.uid != obj.GetUID()
	r.synced[key] = syncMark{uid: obj.GetUID(), generation: obj.GetGeneration()}
	return first
}

// wasSynced reports whether obj was already in sync for its generation: its
// status says Ready for it, or this process found it so.
func (r *Reconciler[T]) wasSynced(obj T) bool {
	if conditions.IsTrue(obj, conditions.Ready) && !conditions.IsStale(obj) {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.synced[client.ObjectKeyFromObject(obj)]
	return ok && m.uid == obj.GetUID() && m.generation == obj.GetGeneration()
}

func (r *Reconciler[T]) newName(obj T) string {
	if r.s.externalName != nil {
		return r.s.externalName(obj)
	}
	return obj.GetName()
}

func (r *Reconciler[T]) now() string { return r.s.clock.Now().UTC().Format(time.RFC3339) }

// annotate sets and removes annotations on obj with an optimistic-lock
// merge patch, so a marker is never written over a newer object (a stale
// read ends as a conflict, retried at once); obj is updated from the answer.
func (r *Reconciler[T]) annotate(ctx context.Context, obj T, set map[string]string, remove ...string) error {
	orig := obj.DeepCopyObject().(T)
	anns := maps.Clone(obj.GetAnnotations())
	if anns == nil {
		anns = map[string]string{}
	}
	maps.Copy(anns, set)
	for _, k := range remove {
		delete(anns, k)
	}
	obj.SetAnnotations(anns)
	if err := r.patchMeta(ctx, orig, obj); err != nil {
		obj.SetAnnotations(orig.GetAnnotations())
		return fmt.Errorf("external: record annotations on %s: %w", keyOf(obj), err)
	}
	return nil
}

// lateInit writes the spec fields Observe filled: the difference between
// obj as it was before Observe (before) and obj now.
func (r *Reconciler[T]) lateInit(ctx context.Context, before, obj T) error {
	if err := r.patchMeta(ctx, before, obj); err != nil {
		return fmt.Errorf("external: write late-initialised fields of %s: %w", keyOf(obj), err)
	}
	return nil
}

// patchMeta sends the difference between orig and obj (metadata, spec)
// with an optimistic lock, and copies the new resourceVersion and
// generation into obj, keeping obj's in-memory status.
func (r *Reconciler[T]) patchMeta(ctx context.Context, orig, obj T) error {
	sent := obj.DeepCopyObject().(T)
	if err := r.client.Patch(ctx, sent, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	obj.SetResourceVersion(sent.GetResourceVersion())
	obj.SetGeneration(sent.GetGeneration())
	obj.SetAnnotations(sent.GetAnnotations())
	return nil
}

func merge(a, b ConnectionDetails) ConnectionDetails {
	if len(b) == 0 {
		return a
	}
	if a == nil {
		a = ConnectionDetails{}
	}
	maps.Copy(a, b)
	return a
}

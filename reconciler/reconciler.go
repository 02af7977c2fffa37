package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/ansible"
	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/external"
	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/phase"
	"github.com/opkit/opkit/workflow"
)

// DesiredFunc returns the children obj should have. It is called on every
// reconcile of a live object and must not call the API to write; reading from
// the cache is fine. Returning an [outcome] error (e.g. outcome.Terminal for an
// invalid spec) classifies it.
type DesiredFunc[T client.Object] func(ctx context.Context, obj T) ([]client.Object, error)

// Observed is what a [StatusFunc] can look at besides the object.
type Observed struct {
	// Changes is what ensure did to the children in this reconcile (nil in
	// observe-only mode, where nothing is written).
	Changes ensure.ChangeSet
	// Reader reads from the manager's cache (children included), or from the
	// client of a [ForClient] builder without a cache. A Get of a child
	// written in this reconcile (an entry of Changes with an Object) returns
	// that write's result unless the cache's copy is that write or — for a
	// kind with metadata.generation — of the written generation or later, so
	// a child just changed is never judged by its copy from before the
	// change (a Deployment patched to a new spec does not pass for rolled
	// out); List is the cache's as it is. Get and List options reach the
	// cache: a step that only reads may pass client.UnsafeDisableDeepCopy to
	// share the cache's object instead of copying it, and must then not
	// change it (a copy of a Deployment is about an eighth of a no-op
	// reconcile's CPU in examples/webapp).
	Reader client.Reader

	owner    client.Object
	children childAccess
}

// childAccess lists and deletes an owner's children (the Reconciler).
type childAccess interface {
	listChildren(ctx context.Context, owner client.Object, list client.ObjectList) error
	deleteChild(ctx context.Context, owner, child client.Object) error
}

// Children lists into list the object's children of list's kind: objects
// whose controller ownerReference is the object, or that carry ensure's
// owner label for it (cluster-scoped and cross-namespace children) — made by
// this controller or by anyone else. They are read from the cache, through
// the owner index for kinds declared with Owns (without [WithoutIndex]);
// otherwise by a label selector plus a scan of the owner's namespace. An
// *unstructured.UnstructuredList of a kind the scheme knows is listed from
// the typed informer (the one Owns watches and indexes) and filled with
// unstructured copies carrying apiVersion and kind.
func (o Observed) Children(ctx context.Context, list client.ObjectList) error {
	if o.children == nil {
		return errors.New("reconciler: Observed has no owner")
	}
	return o.children.listChildren(ctx, o.owner, list)
}

// Delete deletes child (background propagation, with a UID precondition
// when child's UID is set, so a newer object of the same name is never
// deleted) if it is a child of the object; a child already gone is not an
// error. Use it for children kept outside the declared set ([WithoutPrune]):
// history beyond a limit, finished Jobs.
func (o Observed) Delete(ctx context.Context, child client.Object) error {
	if o.children == nil {
		return errors.New("reconciler: Observed has no owner")
	}
	return o.children.deleteChild(ctx, o.owner, child)
}

// StatusFunc computes obj's status (conditions, observed fields) in memory
// after the children were ensured; the reconciler writes it. It is called only
// when every earlier step succeeded. Return outcome.DependencyNotReady to say
// "not there yet, look again in d" (Reconciling stays True), and
// outcome.RequeueAfter to say "healthy; look again in d" (a schedule, a poll
// of something that sends no events): Reconciling and Ready are untouched by
// it, so kstatus still reads Current.
type StatusFunc[T client.Object] func(ctx context.Context, obj T, observed Observed) error

// Reconciler runs the skeleton for T. Build it with [For].
type Reconciler[T client.Object] struct {
	name         string
	client       client.Client
	reader       client.Reader   // the cache, or client without one
	informers    cache.Informers // the cache's informers; nil without one
	indexedKinds map[schema.GroupVersionKind]bool
	newObject    func() T
	playbook     *ansible.Runner
	finalizer    *finalizer.Finalizer[T]
	machine      *phase.Machine[T]
	ensurer      *ensure.Ensurer
	desired      DesiredFunc[T]
	workflow     WorkflowFunc[T]
	wfOpts       []workflow.Option
	wfCondOpts   []workflow.ConditionOption
	status       StatusFunc[T]
	metrics      *observability.Metrics
	finMetrics   *finalizer.Metrics
	recorder     *observability.Recorder
	steps        Steps[T]
	share        *shared
	external     *external.Reconciler[T]
	ownWrites    ownWrites
}

// Steps are the parts of a reconcile that can be replaced one by one. A nil
// field keeps the default.
type Steps[T client.Object] struct {
	// Get reads the object; return a NotFound error when it is gone.
	Get func(ctx context.Context, key types.NamespacedName, obj T) error
	// Sync makes the world match obj's spec and reports what changed; the
	// default calls the DesiredFunc and ensures the result. A custom Sync
	// that writes children uses the builder's [Builder.Ensurer]. Returning
	// outcome.RequeueAfter is success (the status step still runs).
	Sync func(ctx context.Context, obj T) (ensure.ChangeSet, error)
	// WriteStatus persists the status the reconcile computed; the default
	// sends a minimal status merge patch, or nothing.
	WriteStatus func(ctx context.Context, patcher *conditions.StatusPatcher[T], obj T) error
}

// Name is the controller name: metrics, events, traces and the field owner use it.
func (r *Reconciler[T]) Name() string { return r.name }

// Reconcile runs one pass of the skeleton. See the package documentation for
// the guarantees.
func (r *Reconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.newObject()
	if err := r.steps.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return outcome.Result(fmt.Errorf("get %s: %w", req.NamespacedName, err))
	}
	// A cache that has not seen this reconciler's last status write yet
	// shows the status from before it: reconcile what was written instead.
	r.ownWrites.overlay(obj, func() client.Object { return r.newObject() })
	if isSet(obj, AnnotationPaused) {
		return outcome.Result(r.pause(ctx, obj))
	}
	observeOnly := isSet(obj, AnnotationObserveOnly) && obj.GetDeletionTimestamp().IsZero()
	if r.machine != nil && !observeOnly {
		if res, done, err := r.stepMachine(ctx, req, obj); done {
			return res, err
		}
	}
	if r.finalizer != nil && !observeOnly {
		fr, err := r.finalizer.Reconcile(ctx, obj)
		if fr.Deleting || err != nil {
			if fr.Gone {
				r.forget(req.NamespacedName)
			}
			res, err := outcome.Result(err)
			return merge(res, fr.Result), err
		}
	} else if !obj.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, nil // nothing of ours to clean up; the GC does the rest
	}

	patcher := conditions.NewStatusPatcher(obj)
	st, serr := conditions.StatusOf(obj) // resolved once for this reconcile
	if serr != nil {
		return outcome.Result(serr)
	}
	var sharedBefore map[string]any
	if r.share != nil {
		if sharedBefore, serr = r.share.part(obj); serr != nil {
			return outcome.Result(serr)
		}
	}
	var changes ensure.ChangeSet
	var err error
	var requeue time.Duration
	if !observeOnly {
		changes, err = r.steps.Sync(ctx, obj)
		requeue, err = successWait(requeue, err)
	} else if r.external != nil {
		_, err = r.external.Observe(ctx, obj)
		requeue, err = successWait(requeue, err)
	}
	if err == nil && r.status != nil {
		err = r.status(ctx, obj, Observed{Changes: changes, Reader: fresh(r.reader, r.client.Scheme(), changes), owner: obj, children: r})
		requeue, err = successWait(requeue, err)
	}
	if err == nil && requeue > 0 {
		err = outcome.RequeueAfter(requeue)
	}
	r.report(ctx, obj, changes, err)
	secondary := r.share != nil && !r.share.summary()
	if st.Writable() { // a kind without conditions (a ConfigMap) gets none
		apply := st.ApplyOutcome
		if secondary {
			apply = func(err error, _ ...conditions.MarkOption) error { return r.share.applyOutcome(st, err) }
		}
		if cerr := apply(err); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if st.Get(ConditionPaused) != nil && !secondary {
			if cerr := st.Remove(ConditionPaused); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	}
	if outcome.Classify(err).Class != outcome.ClassConflict && !secondary {
		handled(st, obj)
	}
	write := func() error { return r.steps.WriteStatus(ctx, patcher, obj) }
	if r.share != nil {
		write = func() error { return r.writeShared(ctx, obj, sharedBefore) }
	}
	if werr := write(); werr != nil {
		// The status write's own class decides the retry: a terminal sync error
		// whose Stalled condition never reached the server must be retried.
		if err != nil {
			werr = fmt.Errorf("%w (after: %s)", werr, err.Error())
		}
		err = werr
	}
	if r.metrics != nil && outcome.Classify(err).Class != outcome.ClassConflict {
		if cs, lerr := st.List(); lerr == nil {
			r.metrics.SetConditions(r.name, req.NamespacedName, cs)
		}
	}
	return outcome.Result(err)
}

// successWait folds an outcome.RequeueAfter (a success) into the sooner of
// the waits asked for so far, and returns any other error as it is.
func successWait(sooner time.Duration, err error) (time.Duration, error) {
	if err == nil {
		return sooner, nil
	}
	c := outcome.Classify(err)
	if c.Class != outcome.ClassSuccess {
		return sooner, err
	}
	if c.RequeueAfter > 0 && (sooner == 0 || c.RequeueAfter < sooner) {
		sooner = c.RequeueAfter
	}
	return sooner, nil
}

// forget drops what the metrics remember about an object that is gone.
func (r *Reconciler[T]) forget(key types.NamespacedName) {
	r.ownWrites.forget(key)
	r.metrics.ForgetObject(r.name, key)
	if r.external != nil {
		r.external.Forget(key)
	}
	if r.finMetrics != nil {
		r.finMetrics.Forget(key)
	}
}

// stepMachine runs one step of the phase machine and persists the status. It
// reports done=false only for a deleting object whose deletion phase has
// finished, so that finalizer cleanup runs next. On a live object the
// finalizer is added first (before any handler creates something), and the
// machine owns the conditions: ApplyOutcome is not applied on top.
func (r *Reconciler[T]) stepMachine(ctx context.Context, req reconcile.Request, obj T) (reconcile.Result, bool, error) {
	var addRes reconcile.Result
	if r.finalizer != nil && obj.GetDeletionTimestamp().IsZero() {
		fr, err := r.finalizer.Reconcile(ctx, obj)
		if err != nil || fr.Deleting {
			res, err := outcome.Result(err)
			return merge(res, fr.Result), true, err
		}
		addRes = fr.Result
	}
	patcher := conditions.NewStatusPatcher(obj)
	pr, err := r.machine.Step(ctx, obj)
	if pr.Deleting && pr.DeletionHandled && err == nil {
		if werr := r.steps.WriteStatus(ctx, patcher, obj); werr != nil {
			res, werr := outcome.Result(werr)
			return res, true, werr
		}
		return reconcile.Result{}, false, nil
	}
	var requeue time.Duration
	if err == nil && !pr.Deleting && r.status != nil {
		err = r.status(ctx, obj, Observed{Reader: r.reader, owner: obj, children: r})
		if requeue, err = successWait(0, err); err == nil && requeue > 0 {
			err = outcome.RequeueAfter(requeue)
		}
	}
	if outcome.Classify(err).Class != outcome.ClassConflict {
		if st, serr := conditions.StatusOf(obj); serr == nil {
			if st.Get(ConditionPaused) != nil {
				_ = st.Remove(ConditionPaused)
			}
			handled(st, obj)
		}
	}
	if werr := r.steps.WriteStatus(ctx, patcher, obj); werr != nil {
		if err != nil {
			werr = fmt.Errorf("%w (after: %s)", werr, err.Error())
		}
		err = werr
	}
	if r.metrics != nil && outcome.Classify(err).Class != outcome.ClassConflict {
		if cs, lerr := conditions.List(obj); lerr == nil {
			r.metrics.SetConditions(r.name, req.NamespacedName, cs)
		}
	}
	r.report(ctx, obj, nil, err)
	res, err := outcome.Result(err)
	return merge(merge(res, pr.Result), addRes), true, err
}

func (r *Reconciler[T]) sync(ctx context.Context, obj T) (ensure.ChangeSet, error) {
	var extra []client.Object
	var wait error // the external resource's outcome.RequeueAfter
	if r.playbook != nil {
		if _, err := r.playbook.Reconcile(ctx, obj); err != nil {
			return nil, err // children wait: nothing is pruned on a failed run
		}
	}
	if r.external != nil {
		res, err := r.external.Sync(ctx, obj)
		if c := outcome.Classify(err); c.Class != outcome.ClassSuccess {
			return nil, err // children wait: nothing is pruned on a failed sync
		}
		wait = err
		if s := r.external.ConnectionSecret(obj, res); s != nil {
			extra = append(extra, s)
		}
	}
	if r.desired == nil && r.external == nil {
		return nil, nil
	}
	var desired []client.Object
	if r.desired != nil {
		var err error
		if desired, err = r.desired(ctx, obj); err != nil {
			return nil, err
		}
	}
	// Owns kinds declared WithoutOwnWriteEvents record this call's writes.
	cs, err := r.ensurer.Ensure(recording(ctx), obj, append(desired, extra...)...)
	if err != nil {
		return cs, err
	}
	return cs, wait
}

// PlaybookStep is the name of the finalizer step that runs the finalizer
// playbook of a [Builder.Playbook] runner.
const PlaybookStep = "playbook"

// playbookStep runs the finalizer playbook; the finalizer stays until a run
// succeeds.
func (r *Reconciler[T]) playbookStep(ctx context.Context, obj T) (finalizer.StepResult, error) {
	if _, err := r.playbook.Finalize(ctx, obj); err != nil {
		return finalizer.StepResult{}, err
	}
	return finalizer.Done(), nil
}

// ExternalStep is the name of the finalizer step that deletes the external
// resource of [Builder.External].
const ExternalStep = "external"

// externalStep deletes the external resource; done once it is verified gone.
// An observe-only object never deletes it, even though its finalizer runs.
func (r *Reconciler[T]) externalStep(ctx context.Context, obj T) (finalizer.StepResult, error) {
	if isSet(obj, AnnotationObserveOnly) {
		if r.recorder != nil {
			r.recorder.Eventf(obj, nil, corev1.EventTypeNormal, external.ReasonOrphaned, external.ActionDelete,
				"%s: the external resource %s is left in place", AnnotationObserveOnly, external.NameOf(obj))
		}
		r.external.Forget(types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()})
		return finalizer.Done(), nil
	}
	d, err := r.external.Delete(ctx, obj)
	if err != nil {
		return finalizer.StepResult{}, err
	}
	if d.Gone {
		return finalizer.Done(), nil
	}
	return finalizer.RequeueAfter(d.RequeueAfter), nil
}

func (r *Reconciler[T]) get(ctx context.Context, key types.NamespacedName, obj T) error {
	return r.client.Get(ctx, key, obj)
}

func (r *Reconciler[T]) writeStatus(ctx context.Context, p *conditions.StatusPatcher[T], obj T) error {
	wrote, err := p.Patch(ctx, r.client, obj)
	if wrote {
		r.ownWrites.remember(obj)
	}
	return err
}

// report emits events for what changed and for errors a human must act on.
// The recorder deduplicates, so a retry loop does not flood the API.
func (r *Reconciler[T]) report(ctx context.Context, obj T, changes ensure.ChangeSet, err error) {
	if r.recorder != nil && changes.Changed() {
		r.recorder.Eventf(obj, nil, corev1.EventTypeNormal, ReasonChildrenChanged, ActionReconcile, "%s", changes.Summary())
	}
	c := outcome.Classify(err)
	switch c.Class {
	case outcome.ClassTerminal:
		if r.recorder != nil {
			r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, c.Reason, ActionReconcile, "%s", c.Message)
		}
		log.FromContext(ctx).Info("reconcile stalled until the object changes", "reason", c.Reason, "message", c.Message)
	case outcome.ClassTransient:
		if r.recorder != nil {
			r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, c.Reason, ActionReconcile, "%s", c.Message)
		}
	}
}

// ReasonChildrenChanged is the event reason when ensure created, updated or
// deleted children; the message is the change summary.
const ReasonChildrenChanged = "ChildrenChanged"

// ActionReconcile is the events.k8s.io/v1 action of the events the
// reconciler records.
const ActionReconcile = "Reconcile"

// merge keeps the sooner of two requeue requests.
func merge(a, b reconcile.Result) reconcile.Result {
	switch {
	case a.RequeueAfter == 0:
		a.RequeueAfter = b.RequeueAfter
	case b.RequeueAfter > 0 && b.RequeueAfter < a.RequeueAfter:
		a.RequeueAfter = b.RequeueAfter
	}
	return a
}

// Ensurer returns the reconciler's [ensure.Ensurer] (nil without Children or
// Phases), for phase handlers that create children.
func (r *Reconciler[T]) Ensurer() *ensure.Ensurer { return r.ensurer }

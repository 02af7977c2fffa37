package finalizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/outcome"
)

// Result tells the caller of [Finalizer.Reconcile] what happened.
type Result struct {
	// Result is what the caller's Reconcile should return when Deleting is
	// true (RequeueAfter is set while cleanup waits for something).
	reconcile.Result
	// Deleting means the object has a deletionTimestamp or no longer exists:
	// the caller must not run its normal reconcile logic, and should return
	// Result.
	Deleting bool
	// Gone means the object no longer exists, or its name now belongs to a
	// different object (another UID). obj was not updated in that case.
	Gone bool
	// Finalized means this call removed the finalizer.
	Finalized bool
}

// Reconcile does everything the finalizer needs for obj, which is updated in
// place with what the API server returns for every write:
//
//   - obj is live and lacks the finalizer: adds it with a JSON patch that
//     tests the finalizer list it read (a concurrent change to the list
//     fails the test; the object is re-read and the patch rebuilt, at most
//     WithMaxAttempts times). Result.Deleting is false: carry on.
//   - obj is live and has it: no request at all.
//   - obj is being deleted and has it: runs the steps not yet recorded as
//     done, in order, and removes the finalizer (and ProgressAnnotation, in
//     the same write) once every step reported Done: by an update of obj as
//     read that deletes it when the finalizer is its only one, else (or when
//     that update is refused) by a JSON patch; see guarantee 1 of the
//     package documentation, and it for failures, deadlines and destructive
//     steps.
//   - obj is being deleted without it, or is gone (404): nothing to do,
//     no error.
//   - obj's UID is one this Finalizer removed itself from, or found gone,
//     in the last two minutes, read again from a cache that lags, with or
//     without a deletionTimestamp: Deleting (the object is being deleted or
//     gone), no request. A view from before the deletion is possible when a
//     re-read past the cache found the deletion and this Finalizer finished
//     it there and then; running the normal logic on it would recreate what
//     the steps released.
//   - obj's UID is one whose deletion this Finalizer has under way (it saw
//     the UID with a deletionTimestamp and its finalizer, and did not
//     finish), read from a cache that lags without the deletionTimestamp:
//     Deleting with a one-second requeue, no request. Running the normal
//     logic on such a view would undo a step that is remembered as done and
//     is not run again.
//
// An error is returned for a failing step (wrapped, with the step name: the
// workqueue retries with backoff) and for API errors other than 404.
func (f *Finalizer[T]) Reconcile(ctx context.Context, obj T) (Result, error) {
	if _, finalized := f.memoFor(obj.GetUID()); finalized && obj.GetUID() != "" {
		// This Finalizer removed itself from this object (UID) already: the
		// object is being deleted or gone, whatever a lagging cache shows —
		// even a view from before the deletion, when a re-read past the cache
		// found the deletion and finished it. Acting on such a view as live
		// would recreate what the steps released.
		return Result{Deleting: true}, nil
	}
	if obj.GetDeletionTimestamp().IsZero() {
		if m, _ := f.memoFor(obj.GetUID()); m.deleting && obj.GetUID() != "" {
			// The deletion of this UID is under way here (a re-read past a
			// lagging cache found it, and a step may have run): this view
			// is from before it. Acting on it as live would undo what the
			// steps did, and they are not run again. Wait for the cache.
			return Result{Deleting: true, Result: reconcile.Result{RequeueAfter: staleViewRequeue}}, nil
		}
		if slices.Contains(obj.GetFinalizers(), f.name) {
			return Result{}, nil
		}
		gone, err := f.patch(ctx, obj, func(cur T) []jsonOp {
			if !cur.GetDeletionTimestamp().IsZero() || slices.Contains(cur.GetFinalizers(), f.name) {
				return nil
			}
			fin := cur.GetFinalizers()
			if len(fin) == 0 {
				// The test on null also passes when the field is absent.
				return []jsonOp{
					{Op: "test", Path: "/metadata/finalizers", Value: nil},
					{Op: "add", Path: "/metadata/finalizers", Value: []string{f.name}},
				}
			}
			return []jsonOp{
				{Op: "test", Path: "/metadata/finalizers", Value: fin},
				{Op: "add", Path: "/metadata/finalizers/-", Value: f.name},
			}
		})
		if err != nil {
			return Result{}, f.wrap(obj, "add finalizer", err)
		}
		if gone {
			return Result{Deleting: true, Gone: true}, nil
		}
		if !obj.GetDeletionTimestamp().IsZero() {
			// The re-read found it being deleted meanwhile; handle that now.
			return f.Reconcile(ctx, obj)
		}
		return Result{}, nil
	}
	return f.finalize(ctx, obj)
}

// outcome of one pass over the steps, when it did not finish.
type stall struct {
	step    string
	reason  string // ReasonCleanupFailed, ReasonDeletionBlocked, or "" for pending
	message string
	err     error
	requeue time.Duration
}

func (f *Finalizer[T]) finalize(ctx context.Context, obj T) (Result, error) {
	res := Result{Deleting: true}
	if !slices.Contains(obj.GetFinalizers(), f.name) {
		return res, nil
	}
	uid := obj.GetUID()
	f.update(uid, func(m *memo) { m.deleting = true })
	m, _ := f.memoFor(uid) // a finalized UID returned in Reconcile already
	recorded := parseProgress(obj.GetAnnotations()[ProgressAnnotation])
	done := union(recorded, m.done)

	// Conditions a step sets on obj (its own progress: Finalizing,
	// Degraded, …) go out in the status write that reports the deletion's
	// progress, so they are compared against the object before the steps.
	preConds, _ := conditions.List(obj)
	// The object as read, for an update that removes the last finalizer: it
	// must not carry what the steps changed (guarantee 10).
	var pristine T
	byUpdate := false
	if f.updatable(obj) {
		pristine, byUpdate = obj.DeepCopyObject().(T)
	}
	var st *stall
	for i, s := range f.steps {
		if slices.Contains(done, s.name) {
			continue
		}
		if s.destructive && obj.GetAnnotations()[AllowDataLossAnnotation] != "true" {
			st = &stall{
				step:   s.name,
				reason: ReasonDeletionBlocked,
				message: fmt.Sprintf("cleanup step %q deletes data and needs explicit consent: add the annotation %s: \"true\" to %s to proceed",
					s.name, AllowDataLossAnnotation, objectRef(obj)),
				requeue: f.blockedRequeue,
			}
			break
		}
		r, err := f.runStep(ctx, obj, s)
		if err != nil {
			st = &stall{step: s.name, reason: ReasonCleanupFailed, message: fmt.Sprintf("cleanup step %q failed: %v", s.name, err), err: err}
			break
		}
		if !r.Done {
			d := r.RequeueAfter
			if d <= 0 {
				d = f.pendingRequeue
			}
			st = &stall{step: s.name, message: fmt.Sprintf("waiting for cleanup step %q to finish", s.name), requeue: d}
			break
		}
		done = append(done, s.name)
		f.remember(uid, done)
		if (s.checkpoint || f.checkpointAll) && i < len(f.steps)-1 {
			if _, err := f.recordProgress(ctx, obj, done); err != nil {
				return res, f.wrap(obj, "record progress", err)
			}
			// pristine no longer holds the stored object's resourceVersion
			// (and, after a lost race, perhaps not its finalizers): patch.
			byUpdate = false
		}
	}

	if st == nil {
		return f.removeFinalizer(ctx, obj, pristine, byUpdate)
	}

	var errs []error
	if st.err != nil {
		errs = append(errs, fmt.Errorf("step %q: %w", st.step, st.err))
	}
	if !slices.Equal(done, recorded) {
		gone, err := f.recordProgress(ctx, obj, done)
		if err != nil {
			errs = append(errs, fmt.Errorf("record progress: %w", err))
		}
		if gone {
			f.markFinalized(uid) // gone: stale views of it are ignored like those of a finished deletion
			return Result{Deleting: true, Gone: true}, nil
		}
	}
	postConds, _ := conditions.List(obj)
	gone, err := f.report(ctx, obj, m, st, stepConditions(preConds, postConds), preConds)
	if err != nil {
		errs = append(errs, err)
	}
	if gone {
		f.markFinalized(uid)
		return Result{Deleting: true, Gone: true}, nil
	}
	if len(errs) > 0 {
		return res, f.wrap(obj, "cleanup", errors.Join(errs...))
	}
	res.RequeueAfter = st.requeue
	if f.deadline > 0 {
		if left := f.deadline - f.sinceDeletion(obj); left > 0 && left < res.RequeueAfter {
			res.RequeueAfter = left + time.Second // deletionTimestamp has second precision
		}
	}
	return res, nil
}

// report sets conditions, emits events and tells the observer about a
// deletion that did not finish in this reconcile.
func (f *Finalizer[T]) report(ctx context.Context, obj T, m memo, st *stall, fromSteps, pre []metav1.Condition) (gone bool, err error) {
	since := f.sinceDeletion(obj)
	stuck := f.deadline > 0 && since >= f.deadline
	var conds []metav1.Condition
	switch st.reason {
	case ReasonCleanupFailed, ReasonDeletionBlocked:
		conds = append(conds, metav1.Condition{Type: ConditionCleanup, Status: metav1.ConditionFalse, Reason: st.reason, Message: st.message})
	default:
		// Only a previous failure is cleared; a smooth deletion writes no status.
		if c := conditions.Get(obj, ConditionCleanup); c != nil && c.Status == metav1.ConditionFalse {
			conds = append(conds, metav1.Condition{Type: ConditionCleanup, Status: metav1.ConditionUnknown, Reason: ReasonCleanupInProgress, Message: st.message})
		}
	}
	if stuck {
		conds = append(conds, metav1.Condition{
			Type: conditions.Stalled, Status: metav1.ConditionTrue, Reason: ReasonStuckDeleting,
			Message: fmt.Sprintf("deletion has not finished %s after it was requested (deadline %s): %s",
				since.Truncate(time.Second), f.deadline, st.message),
		})
	}
	for i := range conds {
		conds[i].Message = truncate(conds[i].Message, maxConditionMessage)
	}
	gone, err = f.setConditions(ctx, obj, append(fromSteps, conds...), pre)
	if gone {
		return true, nil
	}
	switch st.reason {
	case ReasonCleanupFailed:
		f.event(obj, ReasonCleanupFailed, st.message)
	case ReasonDeletionBlocked:
		if m.blockedReported != st.step {
			f.event(obj, ReasonDeletionBlocked, st.message)
			f.update(obj.GetUID(), func(m *memo) { m.blockedReported = st.step })
		}
	}
	if stuck && !m.stuckReported {
		f.event(obj, ReasonStuckDeleting, conds[len(conds)-1].Message)
		f.observer.StuckDeletion(obj, st.step, since)
		f.update(obj.GetUID(), func(m *memo) { m.stuckReported = true })
	}
	if err != nil {
		return false, fmt.Errorf("set conditions: %w", err)
	}
	return false, nil
}

// updatable reports whether removing N from obj may be an update: N is the
// only finalizer (the API server deletes the stored object instead of
// storing the update, so no field the Go type lacks can be lost), the object carries the
// resourceVersion the update is conditional on, T can be updated at all (a
// PartialObjectMetadata cannot), and no update was refused before.
func (f *Finalizer[T]) updatable(obj T) bool {
	if f.patchOnly.Load() || obj.GetResourceVersion() == "" || obj.GetDeletionTimestamp().IsZero() {
		return false
	}
	if _, ok := any(obj).(*metav1.PartialObjectMetadata); ok {
		return false
	}
	fin := obj.GetFinalizers()
	return len(fin) == 1 && fin[0] == f.name
}

// removeByUpdate removes N, the only finalizer, from pristine (obj as read,
// before the steps ran) by one update conditional on its resourceVersion.
// The API server deletes the stored object instead of storing the update
// (its DELETED event carries the object as stored). done reports
// success (obj then holds the server's response); on a lost race obj is
// re-read, and on any other refusal left as it was, for the patch to take
// over.
func (f *Finalizer[T]) removeByUpdate(ctx context.Context, obj, pristine T) (done, gone bool, err error) {
	pristine.SetFinalizers(nil)
	if ann := pristine.GetAnnotations(); ann != nil {
		if _, ok := ann[ProgressAnnotation]; ok {
			delete(ann, ProgressAnnotation)
			pristine.SetAnnotations(ann)
		}
	}
	err = f.client.Update(ctx, pristine)
	switch {
	case err == nil:
		restore(obj, pristine)
		return true, false, nil
	case isNotFound(err):
		return false, true, nil
	case isRace(err):
		gone, err := f.reread(ctx, obj)
		return false, gone, err
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err):
		// Validation, admission or the resource refuses this update (a
		// field the Go type lacks may be required, say): patch, now and
		// from now on.
		f.patchOnly.Store(true)
	}
	return false, false, nil
}

// removeFinalizer removes N from obj: by an update of pristine when
// byUpdate (see updatable), else, or when that update was refused, by a
// JSON patch.
func (f *Finalizer[T]) removeFinalizer(ctx context.Context, obj, pristine T, byUpdate bool) (Result, error) {
	since := f.sinceDeletion(obj)
	removed := false
	if byUpdate && f.updatable(pristine) {
		done, gone, err := f.removeByUpdate(ctx, obj, pristine)
		switch {
		case err != nil:
			return Result{Deleting: true}, f.wrap(obj, "remove finalizer", err)
		case done || gone:
			f.markFinalized(obj.GetUID())
			f.observer.Finalized(obj, since)
			return Result{Deleting: true, Gone: gone, Finalized: done}, nil
		}
	}
	gone, err := f.patch(ctx, obj, func(cur T) []jsonOp {
		i := slices.Index(cur.GetFinalizers(), f.name)
		if i < 0 {
			return nil
		}
		removed = true
		p := fmt.Sprintf("/metadata/finalizers/%d", i)
		ops := []jsonOp{{Op: "test", Path: p, Value: f.name}, {Op: "remove", Path: p}}
		if v, ok := cur.GetAnnotations()[ProgressAnnotation]; ok {
			ap := "/metadata/annotations/" + escapePointer(ProgressAnnotation)
			ops = append(ops, jsonOp{Op: "test", Path: ap, Value: v}, jsonOp{Op: "remove", Path: ap})
		}
		return ops
	})
	if err != nil {
		return Result{Deleting: true}, f.wrap(obj, "remove finalizer", err)
	}
	f.markFinalized(obj.GetUID())
	if removed || gone {
		// A 404 after the last step means someone else removed the object;
		// either way cleanup is complete.
		f.observer.Finalized(obj, since)
	}
	return Result{Deleting: true, Gone: gone, Finalized: removed && !gone}, nil
}

// recordProgress merges done into ProgressAnnotation.
func (f *Finalizer[T]) recordProgress(ctx context.Context, obj T, done []string) (bool, error) {
	return f.patch(ctx, obj, func(cur T) []jsonOp {
		if !slices.Contains(cur.GetFinalizers(), f.name) {
			return nil
		}
		ann := cur.GetAnnotations()
		old, had := ann[ProgressAnnotation]
		merged := union(parseProgress(old), done)
		val := strings.Join(merged, ",")
		if had && val == old {
			return nil
		}
		p := "/metadata/annotations/" + escapePointer(ProgressAnnotation)
		switch {
		case ann == nil:
			return []jsonOp{
				{Op: "test", Path: "/metadata/annotations", Value: nil},
				{Op: "add", Path: "/metadata/annotations", Value: map[string]string{ProgressAnnotation: val}},
			}
		case had:
			return []jsonOp{{Op: "test", Path: p, Value: old}, {Op: "replace", Path: p, Value: val}}
		default:
			return []jsonOp{{Op: "test", Path: p, Value: nil}, {Op: "add", Path: p, Value: val}}
		}
	})
}

type jsonOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// MarshalJSON keeps "value": null for test operations, which omitempty drops.
func (o jsonOp) MarshalJSON() ([]byte, error) {
	if o.Op == "test" || o.Value != nil {
		return json.Marshal(struct {
			Op    string `json:"op"`
			Path  string `json:"path"`
			Value any    `json:"value"`
		}{o.Op, o.Path, o.Value})
	}
	return json.Marshal(struct {
		Op   string `json:"op"`
		Path string `json:"path"`
	}{o.Op, o.Path})
}

// patch sends the JSON patch build returns for the freshest known state of
// obj, guarded by a test on obj's UID; on a conflict or a failed test it
// re-reads the object and rebuilds. build returning nil means nothing is left
// to do. gone reports a 404 or a different UID (obj is then not updated).
func (f *Finalizer[T]) patch(ctx context.Context, obj T, build func(cur T) []jsonOp) (gone bool, err error) {
	uid := obj.GetUID()
	for attempt := 1; ; attempt++ {
		ops := build(obj)
		if ops == nil {
			return false, nil
		}
		ops = append([]jsonOp{{Op: "test", Path: "/metadata/uid", Value: uid}}, ops...)
		data, err := json.Marshal(ops)
		if err != nil {
			return false, err
		}
		err = f.client.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, data))
		switch {
		case err == nil:
			return false, nil
		case isNotFound(err):
			return true, nil
		case !isRace(err) || attempt >= f.maxAttempts:
			return false, err
		}
		if gone, rerr := f.reread(ctx, obj); gone || rerr != nil {
			return gone, rerr
		}
	}
}

// setConditions applies conds to obj's status through the status subresource
// with an optimistic lock, re-reading on conflict. The conditions are written
// through opkit's one status accessor (conditions.Status), so any object with
// writable conditions gets them; objects without are left alone.
func (f *Finalizer[T]) setConditions(ctx context.Context, obj T, conds, pre []metav1.Condition) (gone bool, err error) {
	if !f.conditionsWrite || len(conds) == 0 {
		return false, nil
	}
	for attempt := 1; ; attempt++ {
		st, err := conditions.StatusOf(obj)
		if err != nil || !st.Writable() {
			return false, nil //nolint:nilerr // an object without conditions gets none
		}
		before, ok := obj.DeepCopyObject().(T)
		if !ok {
			return false, fmt.Errorf("DeepCopyObject of %T returned another type", obj)
		}
		if attempt == 1 && len(pre) > 0 {
			// The steps already set their conditions on obj: the base of the
			// patch is the object as it was before them.
			if err := restoreConditions(before, pre, conds); err != nil {
				return false, err
			}
		}
		for _, c := range conds {
			if err := st.Set(c, conditions.WithClock(f.clock)); err != nil {
				return false, err
			}
		}
		patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
		if data, err := patch.Data(obj); err == nil && isNoopMergePatch(data) {
			return false, nil
		}
		err = f.client.Status().Patch(ctx, obj, patch)
		switch {
		case err == nil:
			return false, nil
		case isNotFound(err):
			return true, nil
		case !isRace(err) || attempt >= f.maxAttempts:
			restore(obj, before)
			return false, err
		}
		if gone, rerr := f.reread(ctx, obj); gone || rerr != nil {
			return gone, rerr
		}
	}
}

// restoreConditions sets the conditions of obj whose types conds names back
// to their state in pre (removed when pre lacks them).
func restoreConditions(obj client.Object, pre, conds []metav1.Condition) error {
	st, err := conditions.StatusOf(obj)
	if err != nil {
		return err
	}
	for _, c := range conds {
		i := slices.IndexFunc(pre, func(p metav1.Condition) bool { return p.Type == c.Type })
		if i < 0 {
			err = st.Remove(c.Type)
		} else {
			err = st.Set(pre[i])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// stepConditions returns the conditions in post that are new or differ
// from pre in status, reason or message: what the steps set.
func stepConditions(pre, post []metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range post {
		i := slices.IndexFunc(pre, func(p metav1.Condition) bool { return p.Type == c.Type })
		if i < 0 || pre[i].Status != c.Status || pre[i].Reason != c.Reason || pre[i].Message != c.Message {
			out = append(out, c)
		}
	}
	return out
}

// isNoopMergePatch reports a merge patch that would change nothing but the
// resourceVersion precondition the optimistic lock adds.
func isNoopMergePatch(data []byte) bool {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return false
	}
	if md, ok := m["metadata"].(map[string]any); ok && len(md) == 1 && md["resourceVersion"] != nil {
		delete(m, "metadata")
	}
	return len(m) == 0
}

// restore copies before's contents back into obj.
func restore[T client.Object](obj, before T) {
	dst, src := reflect.ValueOf(obj), reflect.ValueOf(before)
	if dst.Kind() == reflect.Pointer && dst.Elem().Kind() == reflect.Struct {
		dst.Elem().Set(src.Elem())
	}
}

// reread replaces obj's contents with the API's current object, unless that
// object is gone or is another object (different UID) with the same name.
func (f *Finalizer[T]) reread(ctx context.Context, obj T) (gone bool, err error) {
	fresh, ok := obj.DeepCopyObject().(T)
	if !ok {
		return false, fmt.Errorf("DeepCopyObject of %T returned another type", obj)
	}
	if err := f.reader.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
		if isNotFound(err) {
			return true, nil
		}
		return false, err
	}
	if fresh.GetUID() != obj.GetUID() {
		return true, nil
	}
	dst, src := reflect.ValueOf(obj), reflect.ValueOf(fresh)
	if dst.Kind() != reflect.Pointer || dst.Elem().Kind() != reflect.Struct {
		return false, fmt.Errorf("%T is not a pointer to a struct", obj)
	}
	dst.Elem().Set(src.Elem())
	return false, nil
}

func (f *Finalizer[T]) runStep(ctx context.Context, obj T, s step[T]) (res StepResult, err error) {
	start := f.clock.Now()
	defer func() {
		if r := recover(); r != nil {
			log.FromContext(ctx).Error(fmt.Errorf("%v", r), "cleanup step panicked", "finalizer", f.name, "step", s.name, "stack", string(debug.Stack()))
			res, err = StepResult{}, fmt.Errorf("panic: %v", r)
		}
		f.observer.StepFinished(obj, s.name, f.clock.Since(start), err == nil && res.Done, err)
	}()
	return s.run(ctx, obj)
}

func (f *Finalizer[T]) event(obj T, reason, msg string) {
	if f.recorder != nil {
		f.recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Finalize", "%s", truncate(msg, maxEventNote))
	}
}

func (f *Finalizer[T]) sinceDeletion(obj T) time.Duration {
	ts := obj.GetDeletionTimestamp()
	if ts == nil {
		return 0
	}
	return f.clock.Since(ts.Time)
}

func (f *Finalizer[T]) wrap(obj T, what string, err error) error {
	return fmt.Errorf("finalizer %s: %s %s: %w", f.name, what, objectRef(obj), err)
}

// memoFor returns a copy of what this process knows about uid, and whether
// it already removed the finalizer from that object.
func (f *Finalizer[T]) memoFor(uid types.UID) (memo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.seen[uid]
	if !ok {
		return memo{}, false
	}
	return memo{deleting: m.deleting, done: slices.Clone(m.done), stuckReported: m.stuckReported, blockedReported: m.blockedReported}, !m.finalizedAt.IsZero()
}

func (f *Finalizer[T]) update(uid types.UID, fn func(*memo)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.seen[uid]
	if !ok {
		m = &memo{}
		f.seen[uid] = m
	}
	fn(m)
}

func (f *Finalizer[T]) remember(uid types.UID, done []string) {
	f.update(uid, func(m *memo) { m.done = union(m.done, done) })
}

// staleViewRequeue is the requeue for a view from before a deletion this
// process is carrying out: the cache's event for the deletion normally
// reconciles sooner.
const staleViewRequeue = time.Second

// finalizedRetention is how long a finalized UID is remembered, to ignore
// stale cached copies of an object that is already gone.
const finalizedRetention = 2 * time.Minute

func (f *Finalizer[T]) markFinalized(uid types.UID) {
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen[uid] = &memo{finalizedAt: now}
	if now.Sub(f.lastPruned) < finalizedRetention {
		return
	}
	f.lastPruned = now
	for k, m := range f.seen {
		if !m.finalizedAt.IsZero() && now.Sub(m.finalizedAt) > finalizedRetention {
			delete(f.seen, k)
		}
	}
}

func parseProgress(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// union returns a followed by the elements of b not in a.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

func objectRef(obj client.Object) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// isRace reports a write lost to another writer, by opkit's one error table:
// a resourceVersion conflict, or a JSON patch whose test (or remove of a
// since-removed key) no longer applies — both outcome.ClassConflict. Any
// other 422 is Terminal there and is not retried here either.
func isRace(err error) bool { return outcome.Classify(err).Class == outcome.ClassConflict }

// API limits: events.k8s.io/v1 note and metav1.Condition message lengths.
const (
	maxEventNote        = 1024
	maxConditionMessage = 32768
)

// truncate shortens s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "..."
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

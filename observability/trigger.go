package observability

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Trigger event types: what made a reconcile run.
const (
	TriggerCreate  = "create"
	TriggerUpdate  = "update"
	TriggerDelete  = "delete"
	TriggerGeneric = "generic"
	// TriggerResync is an informer resync: an update event whose old and new
	// objects have the same resourceVersion.
	TriggerResync = "resync"
	// TriggerRequeue means no watch event was recorded and the previous
	// reconcile of the request returned an error or asked to be requeued.
	TriggerRequeue = "requeue"
	// TriggerUnknown means no watch event was recorded (its handler was not
	// wrapped, or the entry was evicted) and no requeue was pending.
	TriggerUnknown = "unknown"
)

// DefaultTriggerCacheSize caps the pending triggers and requeue marks kept
// per [Observability], across controllers.
const DefaultTriggerCacheSize = 10000

// Trigger says why a reconcile ran: which watched object's event enqueued
// the request. Kind, Namespace and Name are empty for requeue and unknown.
type Trigger struct {
	// Event is one of the Trigger* constants.
	Event string
	// Kind, Namespace and Name identify the watched object whose event
	// enqueued the request (the object itself for For(), an owned or mapped
	// object for Owns() and Watches()).
	Kind, Namespace, Name string
	// Coalesced counts further events that enqueued the same request before
	// the reconcile started; the workqueue merged them into this run.
	Coalesced int
	// At is when the (first) event was handled.
	At time.Time
}

type triggerKey struct {
	controller string
	req        reconcile.Request
}

type triggerState struct {
	trigger Trigger
	requeue bool // previous reconcile asked to run again
}

// triggers remembers, per (controller, request), the first event that
// enqueued it since the request's last reconcile started. Bounded by an LRU.
type triggers struct {
	scheme *runtime.Scheme
	now    func() time.Time
	mu     sync.Mutex
	cache  *lru[triggerKey, *triggerState]
}

func newTriggers(scheme *runtime.Scheme, size int) *triggers {
	return &triggers{scheme: scheme, now: time.Now, cache: newLRU[triggerKey, *triggerState](size)}
}

func (t *triggers) record(controller string, req reconcile.Request, ev string, obj client.Object) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := triggerKey{controller, req}
	st, ok := t.cache.get(k)
	if ok && st.trigger.Event != "" {
		st.trigger.Coalesced++
		return
	}
	if !ok {
		st = &triggerState{}
		t.cache.add(k, st)
	}
	st.trigger = Trigger{Event: ev, Kind: t.kindOf(obj), Namespace: obj.GetNamespace(), Name: obj.GetName(), At: t.now()}
}

func (t *triggers) kindOf(obj client.Object) string {
	if t.scheme != nil {
		if gvk, err := apiutil.GVKForObject(obj, t.scheme); err == nil {
			return gvk.Kind
		}
	}
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return fmt.Sprintf("%T", obj)
}

// take returns and clears the trigger of req's reconcile that is starting.
func (t *triggers) take(controller string, req reconcile.Request) Trigger {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.cache.remove(triggerKey{controller, req})
	switch {
	case ok && st.trigger.Event != "":
		return st.trigger
	case ok && st.requeue:
		return Trigger{Event: TriggerRequeue}
	default:
		return Trigger{Event: TriggerUnknown}
	}
}

// markRequeue notes that req's last reconcile asked to run again.
func (t *triggers) markRequeue(controller string, req reconcile.Request) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := triggerKey{controller, req}
	if st, ok := t.cache.get(k); ok {
		st.requeue = true
		return
	}
	t.cache.add(k, &triggerState{requeue: true})
}

type triggerCtxKey struct{}

// TriggerFromContext returns why the reconcile running with ctx started, as
// recorded by a reconciler wrapped with [Observability.Wrap].
func TriggerFromContext(ctx context.Context) (Trigger, bool) {
	t, ok := ctx.Value(triggerCtxKey{}).(Trigger)
	return t, ok
}

// triggerHandler records, for every request the inner handler enqueues, the
// event that caused it. It sees exactly which requests each event produced,
// so it works for any inner handler (owner references, map functions).
type triggerHandler struct {
	t          *triggers
	controller string
	inner      handler.EventHandler
}

func (h *triggerHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Create(ctx, e, h.queue(q, TriggerCreate, e.Object))
}

func (h *triggerHandler) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Update(ctx, e, h.queue(q, updateKind(e.ObjectOld, e.ObjectNew), e.ObjectNew))
}

func (h *triggerHandler) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Delete(ctx, e, h.queue(q, TriggerDelete, e.Object))
}

func (h *triggerHandler) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Generic(ctx, e, h.queue(q, TriggerGeneric, e.Object))
}

func updateKind(oldObj, newObj client.Object) string {
	if oldObj != nil && newObj != nil && oldObj.GetResourceVersion() == newObj.GetResourceVersion() {
		return TriggerResync
	}
	return TriggerUpdate
}

func (h *triggerHandler) queue(q workqueue.TypedRateLimitingInterface[reconcile.Request], ev string, obj client.Object) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	if obj == nil {
		return q
	}
	rec := func(req reconcile.Request) { h.t.record(h.controller, req, ev, obj) }
	// The default queue is a priority queue and handlers type-assert for it to
	// pass priorities; keep that interface visible through the wrapper.
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return &recordingPriorityQueue{PriorityQueue: pq, rec: rec}
	}
	return &recordingQueue{TypedRateLimitingInterface: q, rec: rec}
}

type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	rec func(reconcile.Request)
}

func (q *recordingQueue) Add(r reconcile.Request) {
	q.rec(r)
	q.TypedRateLimitingInterface.Add(r)
}

func (q *recordingQueue) AddAfter(r reconcile.Request, d time.Duration) {
	q.rec(r)
	q.TypedRateLimitingInterface.AddAfter(r, d)
}

func (q *recordingQueue) AddRateLimited(r reconcile.Request) {
	q.rec(r)
	q.TypedRateLimitingInterface.AddRateLimited(r)
}

type recordingPriorityQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	rec func(reconcile.Request)
}

func (q *recordingPriorityQueue) Add(r reconcile.Request) {
	q.rec(r)
	q.PriorityQueue.Add(r)
}

func (q *recordingPriorityQueue) AddAfter(r reconcile.Request, d time.Duration) {
	q.rec(r)
	q.PriorityQueue.AddAfter(r, d)
}

func (q *recordingPriorityQueue) AddRateLimited(r reconcile.Request) {
	q.rec(r)
	q.PriorityQueue.AddRateLimited(r)
}

func (q *recordingPriorityQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	for _, r := range items {
		q.rec(r)
	}
	q.PriorityQueue.AddWithOpts(o, items...)
}

// triggerPredicate records the event for the request of the object itself,
// which is what For() enqueues. It never filters.
func triggerPredicate(t *triggers, controller string) predicate.Predicate {
	rec := func(ev string, obj client.Object) bool {
		if obj != nil {
			t.record(controller, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}, ev, obj)
		}
		return true
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return rec(TriggerCreate, e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return rec(updateKind(e.ObjectOld, e.ObjectNew), e.ObjectNew) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return rec(TriggerDelete, e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return rec(TriggerGeneric, e.Object) },
	}
}

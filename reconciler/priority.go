package reconciler

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ChildEventPriority is the workqueue priority of a reconcile that an
// update or deletion of an owned child (an [Builder.Owns] kind) asks for:
// higher than the default priority 0 of a new or changed primary object, so
// an object whose work has started — its Deployment just became Available,
// its Job just completed, someone changed or deleted its Service — is
// reconciled before a burst of objects created after it, instead of
// waiting behind all of them. A child's creation keeps the default
// priority: children are almost always created by the reconcile they would
// trigger, which already judged them, and reconciling their owner again
// at once would cost a reconcile that finds nothing new. Within one
// priority the queue is first in, first out, and an object already queued
// moves up to the higher priority; events that controller-runtime marks low
// priority (the initial list, resyncs with no change) keep
// handler.LowPriority. It applies only with controller-runtime's priority
// queue (the default; WithOptions with UsePriorityQueue false turns it
// off). A child event cannot starve new objects for long: each child event
// is the consequence of work done for its owner, so follow-ups run out.
const ChildEventPriority = 10

// followUp makes h enqueue with [ChildEventPriority] whatever it would have
// enqueued with the default priority for an update, deletion or generic
// event.
func followUp(h handler.EventHandler) handler.EventHandler { return &followUpHandler{inner: h} }

type followUpHandler struct{ inner handler.EventHandler }

func (h *followUpHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Create(ctx, e, q)
}

func (h *followUpHandler) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Update(ctx, e, prioritised(q))
}

func (h *followUpHandler) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Delete(ctx, e, prioritised(q))
}

func (h *followUpHandler) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Generic(ctx, e, prioritised(q))
}

// prioritised wraps q, when it is a priority queue, so that adds without a
// priority get ChildEventPriority; explicit priorities are kept.
func prioritised(q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return followUpQueue{PriorityQueue: pq}
	}
	return q
}

type followUpQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
}

func (q followUpQueue) priority() *int { p := ChildEventPriority; return &p }

func (q followUpQueue) Add(item reconcile.Request) {
	q.PriorityQueue.AddWithOpts(priorityqueue.AddOpts{Priority: q.priority()}, item)
}

func (q followUpQueue) AddAfter(item reconcile.Request, after time.Duration) {
	q.PriorityQueue.AddWithOpts(priorityqueue.AddOpts{Priority: q.priority(), After: after}, item)
}

func (q followUpQueue) AddRateLimited(item reconcile.Request) {
	q.PriorityQueue.AddWithOpts(priorityqueue.AddOpts{Priority: q.priority(), RateLimited: true}, item)
}

func (q followUpQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority == nil {
		o.Priority = q.priority()
	}
	q.PriorityQueue.AddWithOpts(o, items...)
}

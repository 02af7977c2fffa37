package reconciler

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// childWriteWait bounds how long the decision on a child event waits for the
// write of the same child in flight when it arrived (the watch may deliver a
// write's event before the write's own response is read); the decision
// waits in a goroutine of its own, never in the informer's dispatch.
const childWriteWait = time.Second

// childWrites is the owner's knowledge of its own child writes: per child of
// a kind declared with [WithoutOwnWriteEvents], the resourceVersion the last
// create, patch, update or apply of it by the default Children step returned.
// That kind's watch drops the one create or update event that carries exactly
// that resourceVersion: the reconcile that wrote it already judged the object
// as the event shows it (the status step reads the written children through
// [Observed]), so the event is no news and waking the owner again would be a
// reconcile that finds nothing to do. A create or update of that child by
// anybody else, a later version of it (its controller reporting status), and
// every delete still wake the owner.
//
// An event is dropped only when its resourceVersion equals the one the
// write returned; a write that failed, an event of another version and an
// event whose write is still in flight after [childWriteWait] are passed on.
// An event that arrives before its write's response is decided in a
// goroutine of its own, so the events of other children are never held
// back behind a slow response.
// So a dropped event is always the owner's own write, and the worst a lost
// race costs is the reconcile that would have run anyway.
type childWrites struct {
	kinds map[schema.GroupKind]bool // the Owns kinds declared WithoutOwnWriteEvents

	mu      sync.Mutex
	entries map[childKey]*childWrite
	swept   time.Time // when entries older than ownWriteTTL were last dropped
}

type childKey struct {
	gk              schema.GroupKind
	namespace, name string
}

type childWrite struct {
	done chan struct{} // closed when the write returned
	rv   string        // the resourceVersion the write returned; set before done closes
	at   time.Time
}

func newChildWrites(kinds []schema.GroupKind) *childWrites {
	w := &childWrites{kinds: map[schema.GroupKind]bool{}, entries: map[childKey]*childWrite{}}
	for _, gk := range kinds {
		w.kinds[gk] = true
	}
	return w
}

// recordingKey marks the context of the default Children step's ensure
// call: only its writes are recorded.
type recordingKey struct{}

// recording returns ctx marked for recording child writes.
func recording(ctx context.Context) context.Context {
	return context.WithValue(ctx, recordingKey{}, true)
}

// begin records a write of the child at k as in flight and returns its
// entry, or nil when k's kind is not recorded or ctx is not the default
// Children step's.
func (w *childWrites) begin(ctx context.Context, k childKey) *childWrite {
	if !w.kinds[k.gk] || ctx.Value(recordingKey{}) == nil {
		return nil
	}
	now := time.Now()
	e := &childWrite{done: make(chan struct{}), at: now}
	w.mu.Lock()
	defer w.mu.Unlock()
	// Swept at most every quarter TTL: an entry whose event never came (a
	// relist skipped that version) is dropped here.
	if now.Sub(w.swept) >= ownWriteTTL/4 {
		for key, old := range w.entries {
			if now.Sub(old.at) >= ownWriteTTL {
				delete(w.entries, key)
			}
		}
		w.swept = now
	}
	w.entries[k] = e
	return e
}

// end completes e, the write of the child at k: its event is expected when
// the write succeeded with resourceVersion rv, and forgotten otherwise.
func (w *childWrites) end(k childKey, e *childWrite, rv string, err error) {
	if e == nil {
		return
	}
	w.mu.Lock()
	if err != nil || rv == "" {
		if w.entries[k] == e {
			delete(w.entries, k)
		}
	} else {
		e.rv = rv
	}
	w.mu.Unlock()
	close(e.done)
}

// lookup returns the recorded write of obj (an event of kind gk shows it)
// and its key, or nil when none is recorded.
func (w *childWrites) lookup(gk schema.GroupKind, obj client.Object) (*childWrite, childKey) {
	if obj == nil {
		return nil, childKey{}
	}
	k := childKey{gk: gk, namespace: obj.GetNamespace(), name: obj.GetName()}
	w.mu.Lock()
	e := w.entries[k]
	w.mu.Unlock()
	return e, k
}

// claim reports whether obj is the version e, the returned write of the
// child at k, produced, and forgets that write if so. e must be done.
func (w *childWrites) claim(k childKey, e *childWrite, obj client.Object) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.entries[k] != e || e.rv == "" || e.rv != obj.GetResourceVersion() {
		return false
	}
	delete(w.entries, k)
	return true
}

// decide runs pass unless obj, as a create or update event of kind gk shows
// it, is the version the owner's last write of it returned (that write is
// then forgotten). When the write is still in flight, the decision is taken
// in a goroutine of its own once the write returns, or after
// [childWriteWait] (then pass runs): the caller, the informer's dispatch of
// this kind's events, never waits.
func (w *childWrites) decide(gk schema.GroupKind, obj client.Object, pass func()) {
	e, k := w.lookup(gk, obj)
	if e == nil {
		pass()
		return
	}
	settle := func() {
		if !w.claim(k, e, obj) {
			pass()
		}
	}
	select {
	case <-e.done:
		settle()
		return
	default:
	}
	go func() {
		t := time.NewTimer(childWriteWait)
		defer t.Stop()
		select {
		case <-e.done:
			settle()
		case <-t.C:
			pass()
		}
	}()
}

// handler wraps h, the handler of kind gk's events, so that the create or
// update event of the owner's own last write of a child is dropped (see
// [childWrites]); delete and generic events go to h as they are.
func (w *childWrites) handler(gk schema.GroupKind, h handler.EventHandler) handler.EventHandler {
	return &ownWriteHandler{EventHandler: h, w: w, gk: gk}
}

type ownWriteHandler struct {
	handler.EventHandler
	w  *childWrites
	gk schema.GroupKind
}

func (h *ownWriteHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.w.decide(h.gk, e.Object, func() { h.EventHandler.Create(ctx, e, q) })
}

func (h *ownWriteHandler) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.w.decide(h.gk, e.ObjectNew, func() { h.EventHandler.Update(ctx, e, q) })
}

// client wraps c, the ensurer's client, so that its writes of watched kinds
// are recorded.
func (w *childWrites) client(c client.Client) client.Client {
	return &childWriteClient{Client: c, w: w}
}

// childWriteClient records the creates, patches, updates and applies of
// watched kinds that go through it; every other call goes to Client as is.
type childWriteClient struct {
	client.Client
	w *childWrites
}

func (c *childWriteClient) key(obj client.Object) childKey {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		if g, err := c.GroupVersionKindFor(obj); err == nil {
			gvk = g
		}
	}
	return childKey{gk: gvk.GroupKind(), namespace: obj.GetNamespace(), name: obj.GetName()}
}

// record runs write, the write of obj, recording it when ctx is the default
// Children step's; the key is not computed for any other write.
func (c *childWriteClient) record(ctx context.Context, obj client.Object, write func() error) error {
	if ctx.Value(recordingKey{}) == nil {
		return write()
	}
	k := c.key(obj)
	e := c.w.begin(ctx, k)
	err := write()
	c.w.end(k, e, obj.GetResourceVersion(), err)
	return err
}

func (c *childWriteClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.record(ctx, obj, func() error { return c.Client.Create(ctx, obj, opts...) })
}

func (c *childWriteClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.record(ctx, obj, func() error { return c.Client.Update(ctx, obj, opts...) })
}

func (c *childWriteClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.record(ctx, obj, func() error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

// applied is what an apply configuration built from an unstructured object
// (client.ApplyConfigurationFromUnstructured) exposes; typed apply
// configurations are passed through unrecorded.
type applied interface {
	GroupVersionKind() schema.GroupVersionKind
	GetNamespace() string
	GetName() string
	GetResourceVersion() string
}

func (c *childWriteClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	u, ok := obj.(applied)
	if !ok {
		return c.Client.Apply(ctx, obj, opts...)
	}
	k := childKey{gk: u.GroupVersionKind().GroupKind(), namespace: u.GetNamespace(), name: u.GetName()}
	e := c.w.begin(ctx, k)
	err := c.Client.Apply(ctx, obj, opts...)
	c.w.end(k, e, u.GetResourceVersion(), err)
	return err
}

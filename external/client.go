package external

import (
	"context"
	"errors"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Connector makes a [Client] for one object: it reads the object's
// credentials (a Secret it names, the operator's defaults) and returns a
// client of the external API acting for them. It is called once per
// [Reconciler.Sync], [Reconciler.Observe] and [Reconciler.Delete]; an error
// is classified like a call's ([Classifier]), so a missing credentials
// Secret can be outcome.DependencyNotReady and a malformed endpoint
// outcome.Terminal.
type Connector[T client.Object] interface {
	Connect(ctx context.Context, obj T) (Client[T], error)
}

// ConnectorFn adapts a function to [Connector].
type ConnectorFn[T client.Object] func(ctx context.Context, obj T) (Client[T], error)

// Connect calls f.
func (f ConnectorFn[T]) Connect(ctx context.Context, obj T) (Client[T], error) { return f(ctx, obj) }

// Client is the external API as one object needs it. name is the external
// resource's name, fixed before the first create (see
// [AnnotationExternalName]) and passed to every call.
//
// Observe reads the resource and compares it with obj's spec; it never
// changes the external resource. It may write obj's status fields (what it
// observed) and, reporting [Observation.LateInitialized], fill spec fields
// obj left empty from what the external system defaulted.
//
// Create creates the resource; it must send [CreateRequest.Token] as the
// API's idempotency key where the API has one, so that a retried create
// returns the resource an earlier attempt made instead of making another.
// Update makes the existing resource match obj's spec (it is called only
// when Observe reported it not up to date). Delete starts deleting the
// resource; it must treat "does not exist" as success. The Reconciler calls
// Observe again until the resource is gone.
//
// Errors are classified by the [Classifier] given with [WithClassifier];
// an error already made with outcome (outcome.Terminal,
// outcome.DependencyNotReady, …) keeps its class.
type Client[T client.Object] interface {
	Observe(ctx context.Context, obj T, name string) (Observation, error)
	Create(ctx context.Context, obj T, req CreateRequest) (Creation, error)
	Update(ctx context.Context, obj T, name string) (Update, error)
	Delete(ctx context.Context, obj T, name string) error
}

// ClientFns adapts four functions to [Client]. A nil function is an error
// when it is called (an observe-only resource needs only ObserveFn).
type ClientFns[T client.Object] struct {
	ObserveFn func(ctx context.Context, obj T, name string) (Observation, error)
	CreateFn  func(ctx context.Context, obj T, req CreateRequest) (Creation, error)
	UpdateFn  func(ctx context.Context, obj T, name string) (Update, error)
	DeleteFn  func(ctx context.Context, obj T, name string) error
}

var errNoFn = errors.New("external: ClientFns has no function for this operation")

// Observe calls ObserveFn.
func (c ClientFns[T]) Observe(ctx context.Context, obj T, name string) (Observation, error) {
	if c.ObserveFn == nil {
		return Observation{}, errNoFn
	}
	return c.ObserveFn(ctx, obj, name)
}

// Create calls CreateFn.
func (c ClientFns[T]) Create(ctx context.Context, obj T, req CreateRequest) (Creation, error) {
	if c.CreateFn == nil {
		return Creation{}, errNoFn
	}
	return c.CreateFn(ctx, obj, req)
}

// Update calls UpdateFn.
func (c ClientFns[T]) Update(ctx context.Context, obj T, name string) (Update, error) {
	if c.UpdateFn == nil {
		return Update{}, errNoFn
	}
	return c.UpdateFn(ctx, obj, name)
}

// Delete calls DeleteFn.
func (c ClientFns[T]) Delete(ctx context.Context, obj T, name string) error {
	if c.DeleteFn == nil {
		return errNoFn
	}
	return c.DeleteFn(ctx, obj, name)
}

// ConnectionDetails are the values a consumer of the external resource
// needs (endpoint, credentials). They are published only to the connection
// Secret ([WithConnectionSecret]); the Reconciler never puts them in status,
// events, logs or errors.
type ConnectionDetails map[string][]byte

// Observation is what [Client.Observe] found.
type Observation struct {
	// Exists is false when the external resource does not exist. Every
	// other field is ignored then.
	Exists bool
	// Foreign is true when a resource of this name exists but was not made
	// for this object (another account, another idempotency token). It is
	// never updated or deleted: Sync stalls with reason
	// [ReasonExternalNameTaken], and deletion leaves it.
	Foreign bool
	// UpToDate is true when the resource matches obj's spec. When false,
	// Sync calls [Client.Update].
	UpToDate bool
	// Diff describes what differs when UpToDate is false, for events and
	// logs (e.g. "versioning false→true"). It must not hold secrets.
	Diff string
	// LateInitialized is true when Observe filled spec fields of obj from
	// the external resource; Sync then patches obj (metadata and spec, with
	// an optimistic lock) before going on.
	LateInitialized bool
	// Deleting is true while the external system is deleting the resource.
	// Sync waits for it to be gone (then creates it again); deletion waits
	// without calling Delete again.
	Deleting bool
	// NotReady, when not empty, says why an existing resource cannot be used
	// yet (e.g. "provisioning"); obj is not marked Ready and is looked at
	// again after the progress interval ([WithProgressPollInterval]).
	NotReady string
	// ConnectionDetails of the resource, when Observe can read them.
	ConnectionDetails ConnectionDetails
	// PollAfter, when positive, replaces the drift poll interval
	// ([WithPollInterval]) for this object after this observation.
	PollAfter time.Duration
}

// CreateRequest is what [Client.Create] is asked to create.
type CreateRequest struct {
	// Name is the external name ([AnnotationExternalName]).
	Name string
	// Token is the idempotency token: the object's UID ([Token]), the same
	// for every attempt of every process.
	Token string
}

// Creation is what [Client.Create] returns.
type Creation struct {
	// ConnectionDetails known only at creation (an initial password).
	ConnectionDetails ConnectionDetails
}

// Update is what [Client.Update] returns.
type Update struct {
	// ConnectionDetails changed by the update.
	ConnectionDetails ConnectionDetails
}

// Policy is what a Reconciler may do to an object's external resource,
// besides the reconciler package's opkit.dev/paused (nothing at all) and
// opkit.dev/observe-only (observe only) annotations.
type Policy struct {
	// ObserveOnly: observe the resource and report it in status; never
	// create, update or delete it. [Reconciler.Sync] behaves as
	// [Reconciler.Observe], and deletion leaves the resource.
	ObserveOnly bool
	// Orphan: deleting the object leaves the external resource in place
	// (the object's finalizer goes at once, with event [ReasonOrphaned]).
	Orphan bool
}

// Result is what [Reconciler.Sync] and [Reconciler.Observe] found.
type Result struct {
	// Name is the external name.
	Name string
	// Observation is the last observation.
	Observation Observation
	// Created and Updated say what this call did.
	Created, Updated bool
	// ConnectionDetails merges the observation's, the creation's and the
	// update's (later ones win). Publish them with
	// [Reconciler.ConnectionSecret]; never log them.
	ConnectionDetails ConnectionDetails
}

// Deletion is what [Reconciler.Delete] found.
type Deletion struct {
	// Gone is true when the external resource is verified gone (or left in
	// place by policy, or was never created): the finalizer may go.
	Gone bool
	// RequeueAfter is when to look again while it is not gone.
	RequeueAfter time.Duration
}

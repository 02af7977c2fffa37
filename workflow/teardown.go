package workflow

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/outcome"
)

// Teardown reasons (outcome.DependencyNotReady).
const (
	// ReasonTeardownWaiting: a child is being deleted, or waits for its
	// dependents to be gone.
	ReasonTeardownWaiting = "WaitingForChildDeletion"
	// ReasonTeardownStuck: a child has been deleting for longer than
	// [WithStuckAfter] (a finalizer nobody removes).
	ReasonTeardownStuck = "ChildDeletionStuck"
)

// DefaultStuckAfter is how long a child may take to disappear after its
// deletion before [Workflow.Teardown] reports it as stuck.
const DefaultStuckAfter = 5 * time.Minute

// WithStuckAfter sets how long after its deletionTimestamp a child that still
// exists is reported as stuck by [Workflow.Teardown] (default
// [DefaultStuckAfter]).
func WithStuckAfter(d time.Duration) Option { return func(w *Workflow) { w.stuckAfter = d } }

// WithClock sets the clock [Workflow.Teardown] measures stuck deletions with
// (default the real clock).
func WithClock(c clock.PassiveClock) Option { return func(w *Workflow) { w.clock = c } }

// Blocked is a child that keeps [Workflow.Teardown] from finishing: it still
// exists (as the cache shows it).
type Blocked struct {
	// Name is the node's name.
	Name string
	// Object is the live object.
	Object client.Object
	// DeletingSince is its deletionTimestamp; zero when its deletion was
	// requested in this call and the cache does not show it yet.
	DeletingSince time.Time
	// Finalizers are the finalizers it still carries.
	Finalizers []string
	// Stuck: DeletingSince is longer ago than [WithStuckAfter].
	Stuck bool
}

// TeardownReport is the outcome of one [Workflow.Teardown].
type TeardownReport struct {
	// Done: every node's object is gone (or was never the owner's).
	Done bool
	// Deleted names the nodes whose deletion this call requested.
	Deleted []string
	// Blocking lists the children being deleted that the remaining teardown
	// waits for, in reverse evaluation order.
	Blocking []Blocked
	// Pending names the nodes not deleted yet because a node that depends on
	// them still exists.
	Pending []string
	// Skipped names the nodes whose object exists but is not the owner's
	// ([WithOwnership]): left alone and not waited for.
	Skipped []string
}

// Teardown deletes the workflow's children in reverse dependency order, for
// a finalizer step: a node's object is deleted (UID precondition, background
// propagation) only once the object of every node that depends on it is gone
// from the cache — not merely being deleted — so a Deployment that reads a
// Secret is gone, with its finalizers run, before the Secret is deleted.
// Independent branches are torn down side by side. Activation conditions
// are ignored: every node's object is torn down. An object that is not the
// owner's ([WithOwnership]) is left alone and counts as gone, as does a node
// whose kind the API server does not serve.
//
// Call it again until it returns nil: the error is outcome.DependencyNotReady
// with reason [ReasonTeardownWaiting], or [ReasonTeardownStuck] when a child
// has been deleting for longer than [WithStuckAfter], naming the first
// blocking child, how long it has been deleting and its finalizers (watching
// the children's kinds reconciles the owner as soon as one goes). Reads come
// from the client's cache; each object costs one delete request (again only
// when Teardown runs before the cache has seen the deletion: the repeat
// finds the object deleting or gone and changes nothing).
func (w *Workflow) Teardown(ctx context.Context, owner client.Object) (*TeardownReport, error) {
	if owner == nil || owner.GetUID() == "" {
		return nil, fmt.Errorf("workflow: owner without a UID (read it from the API first)")
	}
	n := len(w.nodes)
	live := make([]client.Object, n)
	ids := make([]identity, n)
	rep := &TeardownReport{}
	for i, node := range w.nodes {
		id, err := w.identify(owner, node.Object)
		if meta.IsNoMatchError(err) {
			continue // a kind not served: no object of it can exist
		}
		if err != nil {
			return nil, fmt.Errorf("workflow node %q: %w", node.Name, err)
		}
		ids[i] = id
		o, err := w.read(ctx, node, id)
		if err != nil {
			return nil, err
		}
		if o != nil && !w.owned(owner, o) {
			rep.Skipped = append(rep.Skipped, node.Name)
			o = nil
		}
		live[i] = o
	}
	now := w.clock.Now()
	for i := n - 1; i >= 0; i-- {
		o := live[i]
		if o == nil {
			continue
		}
		waits := false
		for _, j := range w.rdeps[i] {
			if live[j] != nil {
				waits = true
				break
			}
		}
		if waits {
			rep.Pending = append(rep.Pending, w.nodes[i].Name)
			continue
		}
		b := Blocked{Name: w.nodes[i].Name, Object: o, Finalizers: o.GetFinalizers()}
		if ts := o.GetDeletionTimestamp(); ts != nil {
			b.DeletingSince = ts.Time
			b.Stuck = now.Sub(ts.Time) > w.stuckAfter
		} else {
			if err := w.deleteLive(ctx, o, ids[i]); err != nil {
				return rep, fmt.Errorf("workflow node %q: %w", w.nodes[i].Name, err)
			}
			rep.Deleted = append(rep.Deleted, w.nodes[i].Name)
		}
		rep.Blocking = append(rep.Blocking, b)
	}
	if len(rep.Blocking) == 0 && len(rep.Pending) == 0 {
		rep.Done = true
		return rep, nil
	}
	return rep, w.teardownError(rep, ids, now)
}

func (w *Workflow) teardownError(rep *TeardownReport, ids []identity, now time.Time) error {
	b := rep.Blocking[0]
	for _, x := range rep.Blocking {
		if x.Stuck {
			b = x
			break
		}
	}
	id := ids[w.index[b.Name]]
	msg := fmt.Sprintf("child %q (%s) ", b.Name, id)
	if b.DeletingSince.IsZero() {
		msg += "deletion requested"
	} else {
		msg += fmt.Sprintf("deleting for %s", now.Sub(b.DeletingSince).Round(time.Second))
	}
	if len(b.Finalizers) > 0 {
		msg += fmt.Sprintf(", finalizers %s", strings.Join(b.Finalizers, ", "))
	}
	if len(rep.Pending) > 0 {
		msg += fmt.Sprintf("; then %s", quoteAll(rep.Pending))
	}
	reason := ReasonTeardownWaiting
	if b.Stuck {
		reason = ReasonTeardownStuck
		msg += fmt.Sprintf(" (stuck: longer than %s)", w.stuckAfter)
	}
	return outcome.DependencyNotReady(reason, msg, w.recheck)
}

package workflow

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/outcome"
)

// State is where a node stands after one [Workflow.Reconcile].
type State string

const (
	// StateReady means every dependency is satisfied, the object was applied and
	// not changed by it, and its readiness check holds on the live object.
	StateReady State = "Ready"
	// StateNotReady means applied, but not ready yet: it was written in this pass
	// (reason [ReasonApplied]), the cache does not show it yet, or its
	// readiness check says why not.
	StateNotReady State = "NotReady"
	// StateWaiting means not applied, because a dependency (WaitingFor) is not
	// satisfied; an existing object is left as it is.
	StateWaiting State = "Waiting"
	// StateFailed means applying failed (Err), the declaration could not be
	// built, or the readiness check reports a terminal failure (a Job that
	// failed). Its dependents wait; other branches go on.
	StateFailed State = "Failed"
	// StateInactive means the activation condition is false. The object is
	// absent, being deleted, or not the owner's to delete (left alone);
	// Deleting tells whether it still exists.
	StateInactive State = "Inactive"
)

// Reasons the workflow itself gives a node (readiness checks give their own).
const (
	// ReasonApplied: the object was written in this pass; its readiness is
	// judged when the cache shows the write.
	ReasonApplied = "Applied"
	// ReasonNotObserved: the object was applied but the cache does not show
	// it yet.
	ReasonNotObserved = "NotObserved"
	// ReasonWaiting: a dependency is not satisfied.
	ReasonWaiting = "WaitingForDependency"
	// ReasonApplyFailed: the Applier returned an error.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonInactive: the activation condition is false.
	ReasonInactive = "Inactive"
	// ReasonNodeNotReady is the summary's reason while a node is not ready
	// (outcome.DependencyNotReady).
	ReasonNodeNotReady = "ChildNotReady"
	// ReasonNodeFailed is the summary's reason when a node failed
	// terminally and nothing else is in progress (outcome.Terminal).
	ReasonNodeFailed = "ChildFailed"
)

// NodeResult is one node's outcome of a [Workflow.Reconcile].
type NodeResult struct {
	// Name is the node's name.
	Name string
	// State is where the node stands.
	State State
	// Object is the live object as read from the cache at the start of the
	// pass (nil when absent). A node written in this pass has Changed set
	// and its Object is the one before the write.
	Object client.Object
	// Changed reports that the Applier wrote the object in this pass.
	Changed bool
	// Deleting reports, for an inactive node, that its object still exists
	// (being deleted, or not the owner's).
	Deleting bool
	// WaitingFor names, for StateWaiting, the first dependency (in
	// DependsOn order) that is not satisfied.
	WaitingFor string
	// Reason is a CamelCase reason for the state, usable in a condition.
	Reason string
	// Message says, for a human, why the node is in this state.
	Message string
	// Err is the Applier's or Build's error for StateFailed (nil for a
	// readiness failure).
	Err error
	// Terminal reports, for StateFailed, that retrying cannot help: a
	// readiness failure, or an Applier error outcome classifies as Terminal.
	Terminal bool
}

// satisfied reports whether dependents may proceed: the node is ready, or
// inactive (an optional child that is switched off blocks nothing).
func (r NodeResult) satisfied() bool {
	return r.State == StateReady || (r.State == StateInactive && !r.Deleting)
}

// Report is the outcome of one [Workflow.Reconcile], one entry per node in
// evaluation order ([Workflow.Nodes]).
type Report struct {
	// Nodes holds one result per node, in evaluation order.
	Nodes []NodeResult
	err   error
}

// Node returns the result of the named node (nil if there is none).
func (r *Report) Node(name string) *NodeResult {
	for i := range r.Nodes {
		if r.Nodes[i].Name == name {
			return &r.Nodes[i]
		}
	}
	return nil
}

// Ready reports whether every active node is ready and every inactive node's
// object is gone.
func (r *Report) Ready() bool { return r.err == nil }

// Err is the summary error [Workflow.Reconcile] returned; see there.
func (r *Report) Err() error { return r.err }

// Reconcile makes one pass over the graph for owner, in evaluation order:
//
//   - Activation conditions are evaluated once per pass. An inactive node
//     of a kind the API server does not serve (an optional CRD not
//     installed) is inactive and absent; an active one is an error.
//   - An inactive node's object, if it exists, is controlled by the owner
//     (see [WithOwnership]) and is not already being deleted, is deleted (UID
//     precondition, background propagation). An inactive node satisfies its
//     dependents once its object is gone.
//   - An active node whose dependencies are all satisfied (ready, or inactive
//     and gone) is applied through the Applier, then judged by its readiness
//     check on the live object from the cache. A node the Applier changed is
//     not ready in this pass (reason [ReasonApplied]): its status describes
//     the object before the write.
//   - An active node with an unsatisfied dependency is not applied, its
//     existing object is left as it is, and it waits (transitively: the
//     dependents of a waiting node wait for it).
//
// Every node is evaluated in every pass, so independent branches proceed
// while one waits or fails; a failed node blocks only its dependents. Reads
// come from the client's cache: a pass over a converged graph whose
// Applier writes nothing costs no API request.
//
// The error summarises the report (nil when [Report.Ready]); it is also
// [Report.Err]. By precedence:
//
//  1. a node failed with an error that is not terminal (a conflict, a
//     timeout): that error, wrapped with the node's name, so outcome classifies
//     it as the Applier's error is classified (first such node);
//  2. a node is not ready or waiting, or an inactive node's object is still
//     there, and it is not downstream of a terminally failed node:
//     outcome.DependencyNotReady with reason [ReasonNodeNotReady] and a message
//     naming the first such culprit (the node that is not ready, not the ones
//     waiting for it) and why, checked again after [WithRecheck];
//  3. a node failed terminally: outcome.Terminal with reason
//     [ReasonNodeFailed], naming the first failed node and why, and which
//     nodes wait for it.
//
// A terminal failure therefore does not stop the reconciles an unrelated
// branch still needs; once everything else is settled the summary is
// terminal. The message of 2 and 3 also names every other failed node.
func (w *Workflow) Reconcile(ctx context.Context, owner client.Object) (*Report, error) {
	if w.apply == nil {
		return nil, errors.New("workflow: Reconcile needs an Applier (New was given nil)")
	}
	if owner == nil || owner.GetUID() == "" {
		return nil, errors.New("workflow: owner without a UID (read it from the API first)")
	}
	ids := make([]identity, len(w.nodes))
	keep := make([]client.Object, len(w.nodes)) // nil: kind not served
	active := make([]bool, len(w.nodes))
	for i, n := range w.nodes {
		active[i] = n.Active == nil || n.Active()
		id, err := w.identify(owner, n.Object)
		if err != nil {
			if !active[i] && meta.IsNoMatchError(err) {
				continue // an optional child of a kind not installed: nothing to do
			}
			return nil, fmt.Errorf("workflow node %q: %w", n.Name, err)
		}
		ids[i] = id
		keep[i] = keepObject(n, id)
	}
	rep := &Report{Nodes: make([]NodeResult, len(w.nodes))}
	for i, n := range w.nodes {
		res := NodeResult{Name: n.Name}
		if keep[i] == nil {
			res.State, res.Reason = StateInactive, ReasonInactive
			res.Message = "not active; its kind is not served by the API server"
			rep.Nodes[i] = res
			continue
		}
		live, err := w.read(ctx, n, ids[i])
		if err != nil {
			return nil, err
		}
		res.Object = live
		switch {
		case !active[i]:
			w.deactivate(ctx, owner, ids[i], &res)
		default:
			if dep := w.unsatisfied(rep, i); dep != "" {
				res.State, res.WaitingFor, res.Reason = StateWaiting, dep, ReasonWaiting
				res.Message = fmt.Sprintf("waiting for %q", dep)
				break
			}
			others := make([]client.Object, 0, len(keep)-1)
			for j, k := range keep {
				if j != i && k != nil {
					others = append(others, k)
				}
			}
			w.applyNode(ctx, owner, n, ids[i], others, rep, &res)
		}
		rep.Nodes[i] = res
	}
	rep.err = w.summarize(rep)
	return rep, rep.err
}

// unsatisfied returns the first dependency of node i that does not let it
// proceed, or "".
func (w *Workflow) unsatisfied(rep *Report, i int) string {
	for _, d := range w.nodes[i].DependsOn {
		if !rep.Nodes[w.index[d]].satisfied() {
			return d
		}
	}
	return ""
}

func (w *Workflow) deactivate(ctx context.Context, owner client.Object, id identity, res *NodeResult) {
	res.State, res.Reason = StateInactive, ReasonInactive
	res.Message = "not active"
	live := res.Object
	if live == nil {
		return
	}
	res.Deleting = true
	switch {
	case !w.owned(owner, live):
		res.Message = fmt.Sprintf("not active; %s exists but is not the owner's, left alone", id)
		// Not ours: it blocks nothing we could resolve.
		res.Deleting = false
	case live.GetDeletionTimestamp() != nil:
		res.Message = fmt.Sprintf("not active; %s is being deleted", id)
	default:
		err := w.deleteLive(ctx, live, id)
		if err != nil {
			res.State, res.Reason, res.Err = StateFailed, "DeleteFailed", err
			res.Message = fmt.Sprintf("not active; deleting %s: %v", id, err)
			res.Terminal = outcome.Classify(err).Class == outcome.ClassTerminal
			return
		}
		res.Message = fmt.Sprintf("not active; %s deleted", id)
	}
}

// deleteLive deletes live (by UID, background); NotFound and a UID mismatch
// (someone else's object now) count as done.
func (w *Workflow) deleteLive(ctx context.Context, live client.Object, id identity) error {
	obj := empty(live, id.gvk)
	obj.SetNamespace(id.namespace)
	obj.SetName(id.name)
	uid := live.GetUID()
	err := w.c.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	switch c := outcome.Classify(err).Class; {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err) || c == outcome.ClassConflict:
		return nil
	default:
		return fmt.Errorf("delete %s: %w", id, err)
	}
}

func (w *Workflow) applyNode(ctx context.Context, owner client.Object, n Node, id identity, keep []client.Object, rep *Report, res *NodeResult) {
	fail := func(reason string, err error) {
		res.State, res.Reason, res.Err = StateFailed, reason, err
		res.Terminal = outcome.Classify(err).Class == outcome.ClassTerminal
		res.Message = err.Error()
	}
	desired := n.Object
	if n.Build != nil {
		deps := Deps{}
		for _, d := range n.DependsOn {
			if o := rep.Nodes[w.index[d]].Object; o != nil && rep.Nodes[w.index[d]].State == StateReady {
				deps[d] = o
			}
		}
		built, err := n.Build(ctx, deps)
		if err == nil && built == nil {
			err = errors.New("build returned no object")
		}
		if err == nil {
			var bid identity
			if bid, err = w.identify(owner, built); err == nil && bid != id {
				err = outcome.Terminal("InvalidChild", fmt.Errorf("build returned %s, not the node's %s", bid, id))
			}
		}
		if err != nil {
			fail("BuildFailed", fmt.Errorf("build %s: %w", id, err))
			return
		}
		desired = built
	}
	changed, err := w.apply.Apply(ctx, owner, desired, keep)
	res.Changed = changed
	if err != nil {
		fail(ReasonApplyFailed, err)
		return
	}
	switch {
	case changed:
		res.State, res.Reason = StateNotReady, ReasonApplied
		res.Message = fmt.Sprintf("%s written; waiting to observe it", id)
	case res.Object == nil:
		res.State, res.Reason = StateNotReady, ReasonNotObserved
		res.Message = fmt.Sprintf("%s applied; not yet in the cache", id)
	default:
		ready := n.Ready
		if ready == nil {
			ready = Default
		}
		r := ready(res.Object)
		switch {
		case r.Ready:
			res.State, res.Reason, res.Message = StateReady, nonEmpty(r.Reason, "Ready"), r.Message
		case r.Failed:
			res.State, res.Reason, res.Terminal = StateFailed, nonEmpty(r.Reason, "Failed"), true
			res.Message = fmt.Sprintf("%s failed: %s", id, r.Message)
		default:
			res.State, res.Reason = StateNotReady, nonEmpty(r.Reason, "NotReady")
			res.Message = fmt.Sprintf("%s not ready: %s", id, r.Message)
		}
	}
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// waitingOn lists the nodes that wait, directly or transitively, for node i.
func (w *Workflow) waitingOn(rep *Report, i int) []string {
	var out []string
	for j := range rep.Nodes {
		for k := j; rep.Nodes[k].State == StateWaiting; {
			k = w.index[rep.Nodes[k].WaitingFor]
			if k == i {
				out = append(out, rep.Nodes[j].Name)
				break
			}
		}
	}
	return out
}

func (w *Workflow) summarize(rep *Report) error {
	var terminal, progressing []int
	for i, r := range rep.Nodes {
		switch {
		case r.State == StateFailed && !r.Terminal:
			return fmt.Errorf("workflow node %q: %w", r.Name, r.Err)
		case r.State == StateFailed:
			terminal = append(terminal, i)
		case r.State == StateNotReady, r.State == StateInactive && r.Deleting:
			progressing = append(progressing, i)
		}
	}
	describe := func(i int) string {
		r := rep.Nodes[i]
		msg := fmt.Sprintf("%q: %s", r.Name, r.Message)
		if ws := w.waitingOn(rep, i); len(ws) > 0 {
			msg += fmt.Sprintf(" (waiting for it: %s)", quoteAll(ws))
		}
		return msg
	}
	var failed []string
	for _, i := range terminal {
		failed = append(failed, describe(i))
	}
	if len(progressing) > 0 {
		msg := "child " + describe(progressing[0])
		if len(failed) > 0 {
			msg += "; failed: " + strings.Join(failed, "; ")
		}
		return outcome.DependencyNotReady(ReasonNodeNotReady, msg, w.recheck)
	}
	if len(terminal) > 0 {
		return outcome.Terminal(ReasonNodeFailed, errors.New("child "+strings.Join(failed, "; ")))
	}
	return nil
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

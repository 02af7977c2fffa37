package reconciler

import (
	"context"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/workflow"
)

// WorkflowFunc returns obj's children as workflow nodes (package
// [workflow]). Like a [DesiredFunc] it is called on every reconcile and must
// not write; reading from the cache is fine.
type WorkflowFunc[T client.Object] func(ctx context.Context, obj T) ([]workflow.Node, error)

// TeardownStep is the name of the finalizer step [Builder.Workflow] adds.
const TeardownStep = "workflow-teardown"

// Workflow declares the children as a dependency graph instead of
// [Builder.Children]: each reconcile runs [workflow.Workflow.Reconcile],
// whose nodes are written through the builder's Ensurer
// ([ensure.Ensurer.EnsureKeeping]: a node waiting for a dependency is kept,
// not pruned; children of the Owns kinds that are no node are pruned), and
// writes the report into T's conditions ([workflow.SetConditions]: the
// summary condition workflow.ConditionChildrenReady, and with
// workflow.WithNodeConditions given in condOpts one per node). The report's
// error is the reconcile's error, so its class sets Reconciling or Stalled and
// the requeue. A [StatusFunc] still runs once every node is ready (e.g.
// conditions.SetSummary(obj, conditions.Ready,
// conditions.WithPositive(workflow.ConditionChildrenReady))).
//
// With a [Builder.Finalizer], a last cleanup step named [TeardownStep] tears
// the children down in reverse dependency order ([workflow.Workflow.Teardown])
// after the caller's steps (which may still need the children), writing which
// child blocks into the summary condition. Without a finalizer, deletion is
// left to the garbage collector, in no particular order.
//
// Objects the workflow deletes (inactive nodes, teardown) must be the
// owner's: controlled by it, or carrying ensure's owner label for it.
// Workflow does not combine with Children or Phases.
func (b *Builder[T]) Workflow(nodes WorkflowFunc[T], opts []workflow.Option, condOpts ...workflow.ConditionOption) *Builder[T] {
	b.workflow, b.wfOpts, b.wfCondOpts = nodes, opts, condOpts
	return b
}

// ownedByOwner is the workflow's ownership test for the builder's children.
func ownedByOwner(owner, obj client.Object) bool {
	if metav1.IsControlledBy(obj, owner) {
		return true
	}
	return obj.GetLabels()[ensure.LabelOwnerUID] == string(owner.GetUID())
}

// workflowOf builds the workflow for obj, writing through the Ensurer and
// collecting the changes into cs.
func (r *Reconciler[T]) workflowOf(ctx context.Context, obj T, cs *ensure.ChangeSet) (*workflow.Workflow, error) {
	nodes, err := r.workflow(ctx, obj)
	if err != nil {
		return nil, err
	}
	apply := workflow.ApplierFunc(func(ctx context.Context, owner, child client.Object, keep []client.Object) (bool, error) {
		changes, err := r.ensurer.EnsureKeeping(ctx, owner, keep, child)
		*cs = append(*cs, changes...)
		// Deleted is a prune of a child that is no node: the node itself
		// is unchanged by it.
		changed := false
		for _, ch := range changes {
			changed = changed || (ch.Action != ensure.Unchanged && ch.Action != ensure.Deleted)
		}
		return changed, err
	})
	opts := append([]workflow.Option{workflow.WithOwnership(ownedByOwner)}, r.wfOpts...)
	wf, err := workflow.New(r.client, apply, nodes, opts...)
	if err != nil {
		return nil, outcome.Terminal("InvalidWorkflow", err)
	}
	return wf, nil
}

// syncWorkflow is the Sync step of a workflow reconciler.
func (r *Reconciler[T]) syncWorkflow(ctx context.Context, obj T) (ensure.ChangeSet, error) {
	var cs ensure.ChangeSet
	wf, err := r.workflowOf(ctx, obj, &cs)
	if err != nil {
		return nil, err
	}
	rep, err := wf.Reconcile(ctx, obj)
	if rep != nil {
		if st, serr := conditions.StatusOf(obj); serr == nil && st.Writable() {
			if cerr := workflow.SetConditions(obj, rep, r.wfCondOpts...); cerr != nil {
				return cs, errors.Join(err, cerr)
			}
		}
	}
	return cs, err
}

// teardownStep is the finalizer step [Builder.Workflow] adds.
func (r *Reconciler[T]) teardownStep(ctx context.Context, obj T) (finalizer.StepResult, error) {
	var cs ensure.ChangeSet
	wf, err := r.workflowOf(ctx, obj, &cs)
	if err != nil {
		return finalizer.StepResult{}, err
	}
	rep, err := wf.Teardown(ctx, obj)
	if err == nil && rep.Done {
		return finalizer.Done(), nil
	}
	c := outcome.Classify(err)
	if c.Class != outcome.ClassDependencyNotReady {
		return finalizer.StepResult{}, err
	}
	if st, serr := conditions.StatusOf(obj); serr == nil && st.Writable() {
		if err := workflow.SetTeardownCondition(obj, err, r.wfCondOpts...); err != nil {
			return finalizer.StepResult{}, err
		}
	}
	return finalizer.RequeueAfter(c.RequeueAfter), nil
}

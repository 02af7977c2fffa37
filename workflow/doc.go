// Package workflow reconciles an owner's children as a dependency graph: each
// child (a node) is applied only once the children it depends on are ready,
// an optional child exists only while its activation condition holds, and
// teardown runs the graph backwards, each child deleted only after its
// dependents are really gone.
//
// # Guarantees
//
//   - Order. A node is applied only in a pass where every node it depends on
//     is ready, as its readiness check judges the live object in the cache,
//     and was not written in that same pass (a write makes the cached status
//     stale). An inactive dependency that is gone counts as satisfied.
//   - Hold, do not undo. A node whose dependency is not ready is not applied;
//     an object it already has is left exactly as it is (the [Applier] is
//     told to keep it, so opkit's ensure does not prune it).
//   - Isolation. Every node is evaluated in every pass. Independent branches
//     proceed while one waits or fails; a failed node blocks only the nodes
//     that depend on it, directly or transitively.
//   - Activation. An inactive node is not applied, and its object, when it
//     exists and is controlled by the owner, is deleted (UID precondition).
//     An object that is not the owner's is never deleted. An inactive node of
//     a kind the API server does not serve (an optional CRD) is just absent.
//   - Zero requests in steady state. Live objects are read from the client's
//     cache; a pass over a converged graph sends no request beyond what the
//     Applier sends (none, with opkit's ensure).
//   - One answer. [Workflow.Reconcile] returns a per-node [Report] and one
//     error classified with outcome: a retryable apply error as itself,
//     DependencyNotReady naming the child that is not ready (not the ones
//     waiting behind it) and why, Terminal naming the failed child once
//     nothing else is in progress. [SetConditions] writes it as a summary
//     condition, and optionally one condition per child; the reconciler's
//     conditions.ApplyOutcome makes it kstatus's InProgress / Failed.
//   - Ordered teardown. [Workflow.Teardown] deletes a node's object only
//     once the objects of all nodes depending on it are gone from the cache
//     (finalizers run), and reports which child blocks, with its finalizers,
//     and when it is stuck ([WithStuckAfter]).
//
// # Readiness
//
// [Default] knows Deployment (Available and rolled out to the current
// generation), StatefulSet (partition aware), DaemonSet, Job (Complete;
// Failed is terminal), PersistentVolumeClaim (Bound), Service (an address,
// for type LoadBalancer only) and CustomResourceDefinition (Established), and
// calls any other object ready when kstatus computes Current. A node's Ready
// field replaces it with any [ReadyFunc].
//
// # Writing
//
// The package does not write children itself: it hands each ready-to-apply
// node to an [Applier] with the identities of all other nodes to keep. The
// composition layer passes opkit's ensure:
//
//	applier := workflow.ApplierFunc(func(ctx context.Context, owner, obj client.Object, keep []client.Object) (bool, error) {
//		cs, err := ensurer.EnsureKeeping(ctx, owner, keep, obj)
//		return cs.Changed(), err
//	})
//
// One Apply call per node means a node whose write fails does not stop the
// writes of other branches, as one Ensure of a flat list would.
//
// # Compared with java-operator-sdk's workflows
//
// The model is JOSDK's dependent-resource workflows; point by point:
//
//   - dependsOn: the same. A node is reconciled after its dependencies are
//     reconciled and ready; independent nodes do not wait for each other, and
//     an error or a node that is not ready stops only what depends on it
//     (JOSDK's "as complete as possible execution").
//     JOSDK runs them on an executor in parallel; here one pass walks the
//     graph in topological order, because applying is a cache comparison and
//     rarely a request, and a reconcile that is not concurrent with itself is
//     easier to reason about.
//   - readyPostcondition: the same role ([Node.Ready]), with built-in checks
//     for the common kinds where JOSDK ships few. Differs: a check can report
//     a terminal failure (a failed Job), which fails the node instead of
//     waiting forever, and a node written in the current pass is never
//     judged on its stale cached status.
//   - reconcilePrecondition: [Node.Active] plays its part for the node
//     itself: false means the child must not exist, so it is not applied and
//     is deleted. Differs: JOSDK also deletes, recursively, every dependent of
//     such a node; here dependents proceed once the inactive child is gone (an
//     optional child switched off does not take down the Deployment that could
//     use it). A dependent that must go too says so with its own condition,
//     visible in its declaration. Only objects the owner controls are deleted.
//   - activationCondition: JOSDK's neither reconciles nor deletes the
//     resource, deletes its dependents, and registers or removes the
//     resource's informer at run time (for kinds that may be absent from the
//     cluster). Here watches are the controller's, declared once, so there is
//     no informer to switch; what remains is the absent kind: an inactive
//     node whose kind the API server does not serve is simply inactive
//     (an active one is an error). A separate "leave it alone" mode is not
//     offered: a child that exists but is neither wanted nor removed is drift.
//   - deletePostcondition: [Workflow.Teardown] has it built in: "gone from
//     the cache" is the postcondition for every node, so a child is deleted
//     only after its dependents have really disappeared, finalizers included.
//     JOSDK deletes in reverse order too but proceeds as soon as the delete
//     call returns unless each dependent opts into a deletePostcondition
//     (KubernetesResourceDeletedCondition). A per-node custom delete
//     postcondition is not offered.
//   - Errors: JOSDK collects exceptions per dependent and throws an aggregate
//     after the workflow; here the report is per node and the summary is one
//     error in opkit's taxonomy, so requeue and conditions follow from it
//     without extra code, and a terminal failure of one branch does not stop
//     the reconciles another branch still needs.
//   - Steady state: JOSDK compares desired and actual through its matchers
//     and caches; with opkit's ensure as Applier a converged graph costs zero
//     API requests, measured in this package's tests.
package workflow

// Package finalizer runs ordered, restartable cleanup before a Kubernetes
// object is deleted, and removes its finalizer only when cleanup is verified
// complete.
//
// # Guarantees
//
// For one [Finalizer] named N on objects of type T, called from a
// controller's Reconcile (one worker per object at a time, as
// controller-runtime ensures):
//
//  1. Never lost, never clobbered. N is added and removed with JSON patches
//     that test what they change: adding tests the whole finalizer list that
//     was read, removing tests that N is at the index being removed, and
//     every patch tests metadata.uid. A concurrent writer's finalizers,
//     labels and annotations are never overwritten; on a failed test (or a
//     conflict) the object is re-read and the patch rebuilt, at most
//     [WithMaxAttempts] times, after which the error is returned.
//     One exception, cheaper for the API server: when N is the object's only
//     finalizer (and the reconcile that removes it wrote no [Checkpoint]
//     progress before), it is removed by an update of the object as read
//     (before the steps ran), conditional on its resourceVersion. The API
//     server then deletes the stored object instead of storing the update
//     (the DELETED watch event carries the object as it was stored), so
//     nothing the update's body lacks — a field T does not know — is lost;
//     only admission sees that body. If the update loses a race (409:
//     someone wrote since the read), the object is re-read and the JSON
//     patch takes over; if it is refused otherwise (invalid — say a
//     validation rule needs a field T lacks —, forbidden, bad request,
//     method not allowed), the patch takes over and this Finalizer removes
//     N by patch from then on. Objects of type *metav1.PartialObjectMetadata,
//     which cannot be updated, are always patched.
//  2. Removed only when cleanup is done. N is removed only after every step,
//     in order, has returned [Done] — which a step must return only once the
//     external thing is verified gone. Errors, panics (recovered, reported
//     with the step name), [RequeueAfter] results, blocked destructive steps and
//     passed deadlines all keep N. Nothing here removes N silently.
//  3. Progress survives restarts. Finished steps are recorded in
//     [ProgressAnnotation] on the object whenever a reconcile ends with N
//     still needed, and a step is skipped once it is recorded (or once this
//     process has seen it finish). The record lives on the object, so an
//     object deleted and re-created under the same name starts clean, and a
//     patch never applies to an object with another UID.
//  4. At-least-once, not exactly-once. A step that finished but whose
//     completion was not yet written runs again after a crash, a lost write
//     or a restart: by default this window covers every step that finished
//     in the interrupted reconcile. Steps must therefore be idempotent
//     ("delete if it exists", "snapshot unless a snapshot with this ID
//     exists"). A step marked [Checkpoint] (or all of them, with
//     [WithCheckpointEveryStep]) is recorded before the next step starts,
//     which narrows the window to the step itself: between its side effect
//     and the write that records it. No library can close that window; a
//     step that must not repeat has to detect its own earlier side effect
//     (look the thing up, or record a marker of its own first).
//  5. One write per clean delete. When every step finishes in one
//     reconcile, the only write is the one that removes N (and the progress
//     annotation, in the same write; an update when N is the only
//     finalizer, see 1, else a patch); no status, no event.
//     Progress, conditions and events cost writes only when deletion does
//     not finish at once.
//  6. Destructive steps need consent. A step marked [Destructive] runs only
//     when the object carries [AllowDataLossAnnotation]: "true". Until then
//     the FinalizerCleanup condition (reason DeletionBlocked) and an event
//     say which annotation to add, and the object is looked at again only on
//     its next event or after [WithBlockedRequeue] (10 minutes): no hot loop.
//  7. Stuck deletions are visible. Past [WithDeadline] after
//     deletionTimestamp, the object gets Stalled=True (reason StuckDeleting,
//     naming the step), one Warning event and one [Observer.StuckDeletion]
//     call per process. Cleanup continues; N stays.
//  8. Gone is fine. A 404 (or another UID under the name) ends the work with
//     no error.
//  9. Conditions on any object, with no per-type code. The conditions of
//     guarantees 6 and 7 (and FinalizerCleanup=False, reason CleanupFailed,
//     for a failing step) are written through opkit's one status accessor,
//     github.com/opkit/opkit/conditions.Status, so every object whose
//     status.conditions is []metav1.Condition (typed, found by reflection),
//     unstructured content, or a conditions.Accessor gets them;
//     [WithoutConditions] turns them off. Errors are classified by
//     github.com/opkit/opkit/outcome's one table: a lost race (409, or a
//     JSON patch whose test no longer holds) is re-read and retried, any
//     other error is returned.
//  10. Steps may report their own progress. A condition a step sets on the
//     object it is given (conditions.Set: Finalizing, Degraded, …) while
//     deletion is not finished goes out in the same status write as the
//     finalizer's own conditions (one write, optimistic lock; re-applied
//     after a re-read on a lost race). Only conditions are carried: other
//     changes a step makes to the object are not written.
//  11. Finished means finished, whatever the cache shows. Once this Finalizer
//     removed N from an object (a UID), every later [Finalizer.Reconcile] of
//     that UID reports Deleting for two minutes, with no request, even for a
//     view from before the deletion (a lagging cache can serve one after a
//     re-read past the cache found the deletion and finished it): the
//     caller's normal logic never runs again for it and cannot recreate
//     what the steps released. The same holds for an object found gone, and
//     for a deletion still under way in this process (steps ran, a later one
//     waits or the removal of N was refused): a view of that UID without a
//     deletionTimestamp reports Deleting with a one-second requeue, with no
//     request, so the caller cannot undo a step that is remembered as done
//     and will not run again.
//
// Assumptions: the object is not edited to remove N by hand while cleanup
// runs (that deletes it without cleanup, which the API allows); conditions
// are written through the status subresource; steps change nothing on the
// object passed to them but its conditions.
//
// # Usage
//
// Build one Finalizer per controller and call it first in Reconcile:
//
//	fin, err := finalizer.New[*v1.Volume](mgr.GetClient(), "storage.example.com/cleanup",
//		finalizer.WithStep("snapshot", snapshot),
//		finalizer.WithStep("detach", detach),
//		finalizer.WithStep("delete", deleteDisk, finalizer.Destructive()),
//		finalizer.WithAPIReader(mgr.GetAPIReader()),
//		finalizer.WithEventRecorder(mgr.GetEventRecorder("volume-controller")),
//		finalizer.WithDeadline(30*time.Minute),
//	)
//
//	func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
//		vol := &v1.Volume{}
//		if err := r.Get(ctx, req.NamespacedName, vol); err != nil {
//			return ctrl.Result{}, client.IgnoreNotFound(err)
//		}
//		res, err := r.fin.Reconcile(ctx, vol)
//		if err != nil || res.Deleting {
//			return res.Result, err
//		}
//		// normal reconcile; vol carries the finalizer
//	}
//
// A step reports progress explicitly:
//
//	func deleteDisk(ctx context.Context, v *v1.Volume) (finalizer.StepResult, error) {
//		disk, err := cloud.Get(ctx, v.Status.DiskID)
//		switch {
//		case cloud.IsNotFound(err):
//			return finalizer.Done(), nil // verified gone
//		case err != nil:
//			return finalizer.StepResult{}, err // condition + event, backoff
//		case disk.State != "deleting":
//			if err := cloud.Delete(ctx, disk.ID); err != nil {
//				return finalizer.StepResult{}, err
//			}
//		}
//		return finalizer.RequeueAfter(15 * time.Second), nil // check again later
//	}
//
// Dependents that ownerReferences cannot express — in another namespace, or
// cluster-scoped objects owned by a namespaced one — are deleted by a step
// that deletes them and returns Done only once a Get returns NotFound (see
// the Example functions).
//
// Do not filter the controller's watch with GenerationChangedPredicate if
// you use Destructive steps: adding the annotation does not change the
// generation, so the blocked deletion would wait for the blocked requeue.
package finalizer

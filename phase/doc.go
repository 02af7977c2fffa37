// Package phase runs a declared, typed state machine over a custom resource:
// phases with one handler each, a transition table checked when the machine
// is built, per-phase timeouts, approval guards, deletion hand-over, and
// Mermaid/Graphviz rendering of the declaration.
//
// Conditions stay the truth; the phase is the path. The machine writes
// status.phase (for humans and for resuming) and keeps the standard
// conditions of package conditions (Ready, Reconciling, Stalled, Degraded)
// consistent with it, so kstatus, `kubectl wait` and GitOps tools need not
// know about phases at all.
//
// # Guarantees
//
//   - One transition per [Machine.Step]. The persisted phase therefore always
//     names a phase whose predecessors' handlers completed: a phase is
//     entered only after the handler of the phase before it returned [Next].
//   - Resumable: the machine keeps no state of its own that matters. After a
//     restart (or on another replica) it continues from the persisted phase
//     and entered-at time; finished phases are not repeated.
//   - Handlers are idempotent BY CONTRACT. A handler runs on every Step while
//     the object is in its phase, and may run again after its work was done
//     when the status write that records the transition fails, or when the
//     process stops between the two. Write handlers that check the world and
//     converge, never ones that "do it once".
//   - The machine only changes the object in memory and never talks to the
//     API server. The caller persists the status after every Step, whatever
//     it returned (conditions.StatusPatcher sends nothing when nothing changed,
//     so a steady state costs no write).
//   - Undeclared transitions are refused, never taken: Stalled=True with
//     reason TransitionRefused naming the transition, a Warning event, and a
//     reconcile.TerminalError wrapping [ErrTransitionRefused].
//   - Bad persisted input never panics or loops: an undeclared status.phase
//     (hand-edited, or from another version) restarts the object from the
//     initial phase with reason UnknownPhase and a Warning event; a status
//     without the phase fields is an error wrapping [ErrNoPhaseField]; a
//     panicking handler is an error wrapping [ErrHandlerPanic].
//   - Timeouts are measured from the persisted entered-at time with an
//     injectable clock ([WithClock]); a Step never blocks or polls, it asks to
//     be requeued at the deadline.
//   - Approval guards do not hot-loop: a blocked transition sets a condition
//     saying which annotation to add and does not requeue.
//   - No package-level mutable state; a Machine is safe for concurrent use.
//
// # Declaring a machine
//
//	m, err := phase.New[*v1.Database]("database",
//		phase.WithEventRecorder(mgr.GetEventRecorder("database-controller")),
//	).
//		Initial(phase.Pending).
//		On(phase.Pending, r.validate, phase.To(phase.Provisioning)).
//		On(phase.Provisioning, r.provision,
//			phase.To(phase.Ready), phase.Timeout(10*time.Minute, phase.Degraded)).
//		On(phase.Ready, r.watchHealth, phase.To(phase.Degraded, "Migrating")).
//		On("Migrating", r.migrate, phase.To(phase.Ready), phase.RequireApproval()).
//		On(phase.Degraded, r.repair, phase.To(phase.Provisioning, phase.Ready)).
//		OnDelete(phase.Deleting, r.finalBackup).
//		Build()
//
// Build reports every inconsistency at once (undeclared targets, no initial
// phase, unreachable phases, ...). A handler returns [Next] (a declared
// target), [RequeueAfter] (requeue after a duration), [Wait] (until a watch event) or,
// in the deletion phase, [Done].
//
// # Where the phase lives
//
// status.phase (a string, or any string type) and status.phaseTransitionTime
// (metav1.Time or *metav1.Time) by default; other JSON names with
// [WithStatusFields]. Typed structs are read by reflection (cached per type),
// *unstructured.Unstructured by path, and objects implementing [Accessor]
// through it, which always wins. The CRD schema must declare both fields.
//
// # Conditions
//
// Each phase has a [Kind] that decides the standard conditions on entry
// (reason = the phase name, or PhaseTimeout/UnknownPhase for those moves):
//
//	KindProgressing  Reconciling=True, Ready=False, Stalled removed   (kstatus InProgress)
//	KindReady        Ready=True, Reconciling and Stalled removed      (kstatus Current)
//	KindDegraded     Degraded=True, Ready=False, Reconciling/Stalled removed
//	KindFailed       Stalled=True, Ready=False, Reconciling removed   (kstatus Failed)
//
// The machine owns these four types: do not also call conditions.MarkReady or
// conditions.ApplyOutcome(obj, nil) after a successful Step, or the two will
// fight. A handler error is recorded by Step itself with
// conditions.ApplyOutcome; Conflict errors change nothing.
//
// # Reconcile
//
//	func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
//		db := &v1.Database{}
//		if err := r.Get(ctx, req.NamespacedName, db); err != nil {
//			return reconcile.Result{}, client.IgnoreNotFound(err)
//		}
//		patcher := conditions.NewStatusPatcher(db, conditions.WithOptimisticLock())
//		res, err := r.machine.Step(ctx, db)
//		if _, perr := patcher.Patch(ctx, r.Client, db); perr != nil && err == nil {
//			err = perr
//		}
//		if err != nil {
//			return reconcile.Result{}, err
//		}
//		if res.Deleting && res.DeletionHandled {
//			return r.finalize(ctx, db) // finalizer cleanup, then remove the finalizer
//		}
//		return res.Result, nil
//	}
//
// After a transition, Result.RequeueAfter is practically immediate. A
// cache-backed client may serve that requeue the object from before the
// transition; the machine recognises its own recent transitions
// ([WithStaleReadWindow]) and waits for the cache instead of re-running the
// previous handler. [conditions.WithOptimisticLock] on the patcher adds a
// second line of defence: a status write based on a stale read fails with a
// Conflict instead of overwriting a newer phase.
//
// # Deletion hand-over
//
// This package does not manage finalizers. With a deletion phase declared
// ([Builder.OnDelete]), an object with a deletionTimestamp moves into it
// (Result.Deleting); its handler — a final backup, say — runs until it
// returns [Done]; from then on every Step reports Result.DeletionHandled
// (recorded in the Reconciling condition's reason DeletionHandled, so it
// survives restarts), and the caller's finalizer flow (e.g. opkit's finalizer
// package, composed in reconciler) does its cleanup and removes the
// finalizer. Without a deletion phase Step reports DeletionHandled at once.
// The caller must hold a finalizer for the deletion phase to run at all.
//
// # Approval guards
//
// A phase declared with [RequireApproval] is entered only while the object
// carries the annotation [ApproveAnnotation] ("phase.opkit.dev/approve") with
// the phase name as value. Until then the object stays where it is, with
// Reconciling=True, reason AwaitingApproval and a message quoting the kubectl
// command to run. The controller must see annotation changes (do not filter
// with predicate.GenerationChangedPredicate alone; or it with
// predicate.AnnotationChangedPredicate). The annotation is not removed by
// the machine.
//
// # Watching and requeues
//
// Result.Result carries every requeue the machine needs (transitions, RequeueAfter,
// timeout deadlines, stale reads), so the controller may filter its own
// status writes with predicate.GenerationChangedPredicate (plus annotation
// changes for guards).
package phase

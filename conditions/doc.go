// Package conditions reads and writes status.conditions ([]metav1.Condition)
// on any object, with one rule for timestamps, API validation before any
// request, kstatus-compatible standard conditions, summaries, mirroring of
// children's conditions, the wiring from [outcome] classes to status, and
// status writes that send nothing when nothing changed.
//
// # Guarantees
//
//   - lastTransitionTime changes only when a condition's status changes (or it
//     is new). Reason, message and observedGeneration are updated in place.
//     Setting the same condition again changes nothing, so a steady-state
//     reconcile produces an identical status and [StatusPatcher] sends no request.
//   - observedGeneration of every condition written is the object's
//     metadata.generation at the time of the write.
//   - Messages are bounded to 32768 bytes (the API limit), cut on a UTF-8
//     boundary and marked " ... [truncated]"; invalid UTF-8 is replaced.
//   - Conditions are kept in one deterministic order: Ready, Reconciling,
//     Stalled, Degraded, then all other types by name.
//   - Types, statuses and reasons are validated as the API server would,
//     before anything changes; an invalid condition is an error, never a
//     rejected request.
//   - Objects are never half-updated by a Mark helper: it validates first.
//   - Nothing here panics on an object without conditions: it is an error
//     wrapping [ErrNoConditions] (predicates such as [IsTrue] return false).
//   - Time comes from an injectable clock ([WithClock]); there is no global
//     clock or other package-level configuration.
//
// # One status accessor
//
// [StatusOf] resolves how an object keeps its status once and returns a
// [Status] handle: conditions, status.observedGeneration and named status
// fields ([Status.String], [Status.Time], for a phase machine's status.phase).
// Every function of this package is also a method of Status; code that makes
// several calls on one object (a reconcile) resolves it once. It is the one
// status accessor of opkit: finalizer, phase and the reconciler read and write
// status through it.
//
// # The operator's own summary condition
//
// The taxonomy's summary condition is Ready by default; an operator that
// summarises in another type passes [WithSummaryType] to the Mark helpers and
// [ApplyOutcome], and never gets a Ready from opkit.
//
// # Options
//
// Each function takes only the options that mean something to it
// ([SetOption], [MarkOption], [SummaryOption], [MirrorOption]): passing
// [WithPositive] to [MarkReady] does not compile. [WithClock] fits all of them.
//
// # Which objects
//
// No getter/setter boilerplate is needed for the common layouts:
//
//   - typed structs with a Status (JSON "status") field, struct or pointer,
//     holding Conditions []metav1.Condition (JSON "conditions") and optionally
//     ObservedGeneration int64 — found by reflection once per type;
//   - *unstructured.Unstructured, at status.conditions;
//   - anything implementing [Accessor] (and [ObservedGenerationAccessor]),
//     which wins over the above, for unusual layouts.
//
// Conditions of other types (an apps/v1 Deployment's, for example) can be
// read ([List], [Get], [IsTrue], [Mirror]) but not written.
//
// # Standard conditions and kstatus
//
// [Ready], [Reconciling], [Stalled] and [Degraded] follow kstatus
// (sigs.k8s.io/cli-utils/pkg/kstatus/status), which Flux, Argo CD and
// `kubectl wait` use. Reconciling is what is elsewhere called Progressing;
// it keeps the name kstatus reads. Reconciling and Stalled are
// "abnormal-true": present and True only while they apply, removed
// otherwise. The helpers produce only kstatus-consistent combinations:
//
//	MarkReady        Ready=True; Reconciling, Stalled removed                 → Current
//	MarkReconciling  Reconciling=True; Stalled removed; Ready=Unknown if new  → InProgress
//	MarkStalled      Stalled=True, Ready=False; Reconciling removed           → Failed
//
// [ApplyOutcome] maps an error's [outcome.Class] onto them:
//
//	Success             Reconciling, Stalled removed (Ready is the caller's: MarkReady or SetSummary;
//	                    a Ready=False ApplyOutcome itself wrote with them is removed too)
//	Conflict            nothing changes
//	Transient           MarkReconciling(reason, error message)
//	DependencyNotReady  MarkReconciling(reason, message)
//	Terminal            MarkStalled(reason, error message)
//
// # Usage
//
//	func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
//		obj := &v1.Widget{}
//		if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
//			return reconcile.Result{}, client.IgnoreNotFound(err)
//		}
//		patcher := conditions.NewStatusPatcher(obj)
//		err := r.reconcile(ctx, obj) // sets sub-conditions, e.g. with conditions.Mirror
//		if err == nil {
//			err = conditions.SetSummary(obj, conditions.Ready, conditions.WithPositive("Available"), conditions.WithNegative(conditions.Degraded))
//		}
//		if aerr := conditions.ApplyOutcome(obj, err); aerr != nil {
//			return outcome.Result(aerr)
//		}
//		if _, perr := patcher.Patch(ctx, r.Client, obj); perr != nil && err == nil {
//			err = perr
//		}
//		return outcome.Result(err)
//	}
//
// The controller should filter status-only updates (for example with
// predicate.GenerationChangedPredicate), so its own status writes do not
// trigger reconciles and a Terminal error really stops until the spec changes.
package conditions

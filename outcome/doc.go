// Package outcome classifies the errors a reconciler returns and turns them
// into the controller-runtime result that treats each class correctly.
//
// # Guarantees
//
// Every error falls into exactly one class. The class decides what the
// workqueue does with the object and, through
// github.com/opkit/opkit/conditions.ApplyOutcome, what its status says:
//
//	Class               Result(err)                          workqueue                         status (conditions.ApplyOutcome)
//	------------------  -----------------------------------  --------------------------------  ------------------------------------------------
//	Success (nil)       Result{}, nil                        forgotten; waits for an event     Stalled and Reconciling removed; Ready is the caller's
//	  RequeueAfter(d)   Result{RequeueAfter: d+jitter}, nil  looked at again after about d     as Success
//	Conflict            Result{RequeueAfter: 100ms}, nil     retried shortly, not logged       untouched (no write at all)
//	Transient           Result{}, err                        exponential backoff, logged       Reconciling=True with the reason and message
//	  with Retry-After  Result{RequeueAfter: delay}, nil     retried after the server's delay  Reconciling=True with the reason and message
//	DependencyNotReady  Result{RequeueAfter: after}, nil     retried after a fixed wait        Reconciling=True with the reason and message
//	Terminal            Result{}, reconcile.TerminalError    never retried; logged once        Stalled=True, Ready=False; Reconciling removed
//
// A Terminal error is also a controller-runtime terminal error
// (errors.Is(err, reconcile.TerminalError(nil)) holds), so controller-runtime,
// every opkit package and [Classify] agree without importing each other. It is
// not retried: only a new event (a spec change, which bumps
// metadata.generation) reconciles the object again. Controllers that write
// status must therefore filter status-only updates (for example with
// predicate.GenerationChangedPredicate), or their own status write would
// re-trigger the reconcile that just gave up.
//
// # Classification rules
//
// [Classify] applies, in order:
//
//  1. nil is Success; so is [RequeueAfter] (success, with a wait).
//  2. The outermost wrapper made by [Terminal], [Transient],
//     [DependencyNotReady] or [Conflict], found with errors.As through any
//     fmt.Errorf("%w") wrapping, decides the class, reason and message.
//  3. Otherwise the error is classified automatically, only where the cause is
//     unambiguous (see [Classify] for the table); anything unknown is Transient,
//     so it is retried with backoff rather than dropped.
//  4. Whatever rules 2 and 3 say, an error that controller-runtime treats as
//     terminal (one that wraps reconcile.TerminalError) is Terminal, because
//     controller-runtime will not retry it and outcome must not pretend it will.
//
// Reasons are CamelCase strings valid as a metav1.Condition reason; the
// constructors normalise what they are given (see [SanitizeReason]).
//
// # Usage
//
//	func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
//		...
//		if spec.Replicas < 0 {
//			return outcome.Result(outcome.Terminal("InvalidReplicas", fmt.Errorf("replicas %d < 0", spec.Replicas)))
//		}
//		if !db.Ready() {
//			return outcome.Result(outcome.DependencyNotReady("DatabaseNotReady", "waiting for database "+db.Name, 15*time.Second))
//		}
//		return outcome.Result(r.Client.Update(ctx, obj)) // a 409 requeues quietly; a 500 backs off
//	}
package outcome

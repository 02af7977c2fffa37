// Package reconciler composes opkit's pattern packages into the reconcile
// skeleton every operator re-types:
//
//	get → finalizer → (phase machine) → ensure children → status → requeue policy
//
// with observability around it. It is the one place where the pattern packages
// meet; each of them stays usable alone.
//
// Guarantees, for a custom resource T reconciled by a [Reconciler]:
//
//   - A missing object (404) ends the reconcile with no error and no request
//     beyond the cache read; its metrics series are forgotten.
//   - With a finalizer configured, a live object gets the finalizer (one patch,
//     lock-safe) before any child is created, and a deleting object runs only
//     the finalizer flow: cleanup steps, then finalizer removal. The normal
//     steps never run on a deleting object.
//   - Children are ensured through [ensure.Ensurer]: a steady state costs zero
//     API requests, a field the operator stops declaring is removed from the
//     child (fields other actors own are kept), and children no longer
//     desired are pruned.
//   - Status is written once per reconcile at most, as a merge patch of the
//     status subresource holding only what changed, and not at all when
//     nothing changed ([conditions.StatusPatcher]). The error's class
//     ([outcome.Classify]) sets Reconciling/Stalled ([conditions.ApplyOutcome]);
//     a conflict changes no condition.
//   - The error's class decides the requeue ([outcome.Result]): conflicts
//     requeue at once without an error log, transient errors back off
//     exponentially, DependencyNotReady waits its fixed delay, terminal errors
//     are not retried until the object's generation, labels or annotations change.
//   - The builder's default predicates drop update events of T that change
//     neither generation, labels, annotations, finalizers nor deletionTimestamp, so the
//     controller's own status writes do not trigger reconciles.
//   - One status accessor: T's status is resolved once per reconcile
//     ([conditions.StatusOf]); the finalizer's conditions (FinalizerCleanup
//     with reason CleanupFailed or DeletionBlocked, Stalled with reason
//     StuckDeleting) and the outcome's conditions reach any T whose status
//     has []metav1.Condition, with no per-type code. A T without conditions
//     (a ConfigMap) is reconciled without them.
//   - One recorder, one observer convention: with [Builder.Observability],
//     every event (the reconciler's, the finalizer's, the phase machine's) goes
//     through the deduplicating observability.Recorder, and each package's
//     own metrics (finalizer.Metrics, phase.Metrics, ensure.Metrics,
//     sharding.Metrics) are registered on the same registerer and wired in.
//
// Layering: outcome and conditions are the base every pattern package may
// import; finalizer, ensure, phase, sharding, observability and webhook do
// not import each other; this package composes them.
//
// Each step can be replaced ([Builder.WithSteps]: Get, Sync, WriteStatus) and
// each package can be used without this one. The full skeleton for a WebApp in user code:
//
//	err := reconciler.For[*v1.WebApp](mgr, "webapp", func() *v1.WebApp { return &v1.WebApp{} }).
//		Owns(&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}).
//		Finalizer("apps.example.com/release", finalizer.WithStep("release", release)).
//		Children(func(ctx context.Context, app *v1.WebApp) ([]client.Object, error) {
//			return []client.Object{configMap(app), deployment(app), service(app)}, nil
//		}).
//		Status(func(ctx context.Context, app *v1.WebApp, r reconciler.Observed) error {
//			return conditions.SetSummary(app, conditions.Ready, conditions.WithPositive("Available"))
//		}).
//		Observability(obs).
//		Complete()
package reconciler

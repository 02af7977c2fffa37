// Package external turns a client of an external API (a cloud, a SaaS, any
// system outside Kubernetes) into a correct controller of one external
// resource per object: the cloud-resource operator pattern, done once.
//
// The operator author writes a [Connector] (credentials → a [Client]) and a
// [Client] with four calls — Observe, Create, Update, Delete — whose results
// say "does not exist", "up to date", "late-initialised fields", "being
// deleted", "not ours". A [Classifier] maps the API's errors to [Kind]s. The
// [Reconciler] does the rest; the reconciler package composes it with a
// finalizer, the connection Secret and status (reconciler.Builder.External).
//
// # Guarantees
//
// For an object obj of type T reconciled by a [Reconciler]:
//
//   - Crash-safe create. The external name is recorded on obj
//     ([AnnotationExternalName]) before any create, and never recomputed.
//     [AnnotationCreatePending] is written (optimistic-lock patch: a stale
//     read fails as a conflict, it never overwrites a newer object) before
//     the create is sent; [AnnotationCreateSucceeded] or
//     [AnnotationCreateFailed] replaces it after. Every create carries the
//     idempotency token [Token] (obj's UID), the same for every attempt of
//     every process.
//   - A create whose outcome is unknown (timeout, 5xx, the process died) is
//     never blindly repeated: the next Sync observes first. Found, the
//     create is recorded as succeeded (event [ReasonCreateRecovered]); not
//     found, it is sent again with the same token (the API returns what an
//     earlier attempt made) — or, for an API without idempotent creates
//     ([WithNonIdempotentCreate]), obj stalls with reason
//     [ReasonCreateOutcomeUnknown] and a message naming the annotation to
//     remove once a person has checked.
//   - A resource of the external name not made for obj ([Observation.Foreign])
//     is never updated or deleted: obj stalls with [ReasonExternalNameTaken],
//     and deleting obj leaves it.
//   - Deletion is verified: [Reconciler.Delete] calls [Client.Delete] once,
//     waits while the resource is [Observation.Deleting], and reports Gone
//     only when Observe says it does not exist; only then may the finalizer
//     go.
//   - Policies: [Policy.ObserveOnly] (and the reconciler package's
//     opkit.dev/observe-only annotation) observes and reports status, never
//     creates, updates or deletes; [Policy.Orphan] leaves the resource when
//     obj is deleted (event [ReasonOrphaned]); the reconciler package's
//     opkit.dev/paused annotation makes no call at all.
//   - Drift: a successful Sync returns outcome.RequeueAfter(poll interval)
//     ([WithPollInterval], per object with [Observation.PollAfter]; outcome
//     adds up to 10% jitter), so each object is observed again on its own.
//     A difference found on an object already in sync for its generation is
//     drift: set back, event [ReasonDriftCorrected] (Warning) with the
//     Observation's Diff, and counted; so is re-creating a resource deleted
//     outside Kubernetes. A difference after a spec change is an ordinary
//     update (event [ReasonUpdated]).
//   - One [Limiter] per endpoint, shared by every object (and every
//     Reconciler given it): calls stay under its rate; a Throttled answer
//     (429) closes the endpoint for its Retry-After for every object; a call
//     that would wait longer than [WithMaxWait] is not sent, and the object
//     says so in status (Reconciling, reason [ReasonThrottled]) and is looked
//     at again when the endpoint opens.
//   - Errors are classified through outcome: [Terminal] (quota, invalid
//     input) → Stalled, not retried until obj changes; [Retryable] (5xx,
//     timeouts) → backoff; [Throttled] → wait the Retry-After. The
//     Failure's Code is the condition reason and the metrics label.
//   - Connection details ([ConnectionDetails]) go only to the Secret obj
//     names ([WithConnectionSecret], [Reconciler.ConnectionSecret]), never
//     to status, events, logs or errors.
//   - Late initialisation: fields Observe fills ([Observation.LateInitialized])
//     are written to obj (metadata and spec, optimistic lock) before the
//     update decision.
//   - Metrics ([Metrics], on the registerer given to [NewMetrics]): time to
//     first Ready, drift corrections, calls held back, external call
//     latency by operation and errors by operation and code; no label holds
//     an object or endpoint name.
//
// The bookkeeping annotations live under [AnnotationPrefix]; the reconciler
// package's default predicate ignores changes to them, so recording a
// marker does not reconcile the object again (a refused create does not
// loop).
//
// # Compared with crossplane-runtime's managed reconciler
//
// crossplane-runtime (pkg/reconciler/managed) is the reference for this
// pattern; this package keeps its shape (ExternalConnecter → Connector,
// ExternalClient → Client, ExternalObservation → Observation, the
// external-create-pending/succeeded/failed annotations) and differs where
// operators got hurt:
//
//   - Unknown create outcome: crossplane-runtime stops as soon as the
//     pending marker is newer than the others ("cannot determine creation
//     result"), without observing, so every crash or timeout between create
//     and record needs a person. Here the resource is observed first; only an
//     API without idempotency tokens ever needs a person.
//   - Create errors: crossplane-runtime records create-failed for any
//     error. Here only a refusal (Terminal, Throttled) is recorded as
//     failed; a timeout or 5xx stays pending, since the resource may exist.
//   - Error classes: crossplane-runtime requeues every error with the
//     controller's backoff. Here quota and invalid input stall (no retry
//     storm), 5xx back off, 429 waits the server's Retry-After.
//   - Rate limits: crossplane-runtime limits reconciles (a global token
//     bucket on the workqueue); it does not see Retry-After. Here calls are
//     limited per endpoint, a 429 pauses every object of that endpoint, and
//     the object says Throttled in status.
//   - Polling: crossplane-runtime polls every object at one interval per
//     controller (jitter by hook; a per-resource interval is crossplane
//     issue 7204). Here Observe can set the next poll per object.
//   - Ownership: crossplane-runtime trusts the external name. Here an
//     Observe that reports [Observation.Foreign] protects a resource that
//     was not made for the object from update and delete.
//   - Policies: crossplane-runtime has spec.managementPolicies (any subset
//     of Observe, Create, Update, Delete, LateInitialize), deletionPolicy
//     and crossplane.io/paused. Here: observe-only, orphan and pause, the
//     last two annotations shared with every opkit controller; partial sets
//     such as "create but never update" are not offered.
//   - Status: crossplane-runtime updates status on every reconcile. Through
//     the reconciler package a reconcile that changes nothing writes
//     nothing, and the conditions are kstatus's (Ready, Reconciling,
//     Stalled) rather than Ready/Synced.
//   - Metrics: crossplane-runtime measures time to first reconcile and
//     readiness, drift and deletion. Here also every external call's
//     latency and errors by operation and code, and calls held back.
//   - Connection details: both publish to a Secret the object names;
//     crossplane-runtime also to external secret stores, which this package
//     does not.
//
// # Usage
//
// With the reconciler package (the usual case):
//
//	err := reconciler.For(mgr, "bucket", func() *v1.Bucket { return &v1.Bucket{} }).
//		External(connector,
//			external.WithClassifier(external.ClassifierFn(classify)),
//			external.WithLimiter(limiter), // shared with every controller of the account
//			external.WithEndpoint(func(b *v1.Bucket) string { return b.Spec.Account }),
//			external.WithPolicy(func(b *v1.Bucket) external.Policy {
//				return external.Policy{Orphan: b.Spec.DeletionPolicy == "Orphan"}
//			}),
//			external.WithConnectionSecret(func(b *v1.Bucket) string { return b.Name + "-connection" }),
//		).
//		Observability(obs).
//		Complete()
//
// Alone, call [Reconciler.Sync] (or [Reconciler.Observe]) from a reconcile,
// write obj's status, publish [Reconciler.ConnectionSecret], and call
// [Reconciler.Delete] from a finalizer until it reports Gone.
package external

// Package observability gives a controller-runtime operator its metrics,
// Events, logs, traces, health checks and a debug page with one call,
// [Setup], and one reconciler wrapper, [Observability.Wrap].
//
// # Guarantees
//
// Cardinality. Every Prometheus label takes values from a set the program
// fixes — controller names, result classes, condition types and the three
// condition statuses, phase names, finalizer step names, ensure actions —
// never object names, namespaces or UIDs. opkit_condition_objects is a COUNT
// of objects per (controller, type, status): 100 or 100,000 objects produce
// the same series. Keeping those counts exact needs the last status of each
// object; it is kept in memory (one small map per object reported) and
// released by [Metrics.ForgetObject], which reconcilers call when the object
// is gone. Status values other than True and False count as Unknown.
//
// Deduplication. A [Recorder] forwards an Event with the same object UID,
// reason, type, action and message at most once per [DefaultDedupInterval]
// (5 minutes) and at most [DefaultDedupBurst] (5) Events per (object UID,
// reason) per interval, whatever the messages. Its state is an LRU of at most
// [DefaultDedupCacheSize] (4096) entries: an evicted entry only means the
// next Event for it is written. A suppressed call makes no API request and
// starts no goroutine. All three are options ([WithDedupInterval], [WithDedupBurst],
// [WithDedupCacheSize]).
//
// Triggers. Which watched object and event type enqueued each request is
// kept until its reconcile starts, in an LRU of [DefaultTriggerCacheSize]
// (10,000) entries shared by the controllers of one Observability.
//
// Cost of the defaults. Tracing defaults to OpenTelemetry's no-op provider:
// a reconcile pays for a few attribute slices and context values, and
// nothing is exported or buffered. The global OpenTelemetry state is never
// read or set; pass a provider with [WithTracerProvider] (the otlp
// sub-package builds one that exports over OTLP/gRPC).
//
// Start-up errors. Invalid histogram buckets, or a different metric already
// registered under one of opkit's names, are an error from [Setup] /
// [NewMetrics]; scrapes never fail because of opkit. The same metrics
// registered twice on one registry (several managers in one process) are
// shared, not an error.
//
// # What Setup wires
//
//   - Metrics on controller-runtime's metrics.Registry, served on the
//     manager's metrics endpoint ([WithRegisterer] for another registry):
//     see [Metrics] for the series.
//   - /healthz check "ping" and /readyz check "informer-cache-sync", which
//     fails until the manager's informer cache has synced ([CacheSyncCheck]).
//   - A JSON debug report at [DefaultDebugPath] on the metrics server: per
//     wrapped controller, queue depth (from controller-runtime's
//     workqueue_depth) and the last reconcile's start, duration and result.
//   - [Observability.Recorder]: deduplicating Recorders over the manager's
//     events.k8s.io/v1 recorder (mgr.GetEventRecorder). A [Recorder] is a
//     client-go events.EventRecorder, so every opkit package and any
//     controller-runtime code takes it.
//   - [Observability.Registerer]: where the pattern packages register their
//     own metrics (finalizer.NewMetrics, phase.NewMetrics, ensure.NewMetrics,
//     sharding.NewMetrics); the reconciler package does it for you.
//
// # Per controller
//
//	obs, err := observability.Setup(mgr)
//	c := obs.Client(mgr.GetClient())                     // a span per API write
//	err = builder.ControllerManagedBy(mgr).Named("shop").
//		For(&v1.Shop{}, builder.WithPredicates(obs.TriggerPredicate("shop"))).
//		Owns(&corev1.Secret{}).                          // or Watches(obj, obs.TriggerHandler("shop", h))
//		Complete(obs.Wrap("shop", &ShopReconciler{Client: c, Events: obs.Recorder("shop"), Metrics: obs.Metrics()}))
//
// Wrap starts a span "reconcile <controller>" per reconcile with the
// object, reconcile ID, result class and trigger (opkit.trigger.event = create,
// update, delete, generic, resync, requeue or unknown, plus the kind,
// namespace and name of the watched object); adds traceID and spanID to the
// context's logger, next to the namespace, name and reconcileID that
// controller-runtime already puts there; and records the result class (by
// default the outcome package's class: success, conflict, transient,
// dependencynotready or terminal, and panic — [WithClassifier] takes any
// func(error) string) and duration. [StartExternal] makes a child span for a call outside the
// cluster.
//
// Other opkit packages never import this one: they take client-go's
// events.EventRecorder and own their metrics behind a small Observer
// interface; the reconciler package passes them this package's [Recorder]
// and registers their metrics on [Observability.Registerer]. This package
// imports only the base (outcome).
package observability

package observability

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// DefaultDebugPath is where [Setup] serves the debug report on the manager's
// metrics server.
const DefaultDebugPath = "/debug/opkit/controllers"

// Names of the checks [Setup] adds to the manager.
const (
	HealthzCheckName = "ping"
	ReadyzCheckName  = "informer-cache-sync"
)

type options struct {
	registerer     prometheus.Registerer
	gatherer       prometheus.Gatherer
	metricsOpts    []MetricsOption
	noMetrics      bool
	tracerProvider trace.TracerProvider
	classifier     Classifier
	classes        []string
	noHealth       bool
	debugPath      string
	recorderOpts   []RecorderOption
	triggerSize    int
	scheme         *runtime.Scheme
}

// Option configures [Setup] and [New].
type Option func(*options)

// WithRegisterer registers the metrics on reg instead of controller-runtime's
// metrics.Registry (which the manager's metrics endpoint serves).
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) { o.registerer = reg }
}

// WithGatherer reads controller-runtime's workqueue_depth for the debug
// report from g instead of controller-runtime's metrics.Registry.
func WithGatherer(g prometheus.Gatherer) Option { return func(o *options) { o.gatherer = g } }

// WithMetricsOptions passes options to [NewMetrics].
func WithMetricsOptions(opts ...MetricsOption) Option {
	return func(o *options) { o.metricsOpts = append(o.metricsOpts, opts...) }
}

// WithoutMetrics registers no metrics; [Observability.Metrics] returns nil,
// whose methods do nothing.
func WithoutMetrics() Option { return func(o *options) { o.noMetrics = true } }

// WithTracerProvider makes reconcile and API-write spans with tp. The default
// is a no-op provider: spans cost a few allocations and are never exported.
// The global OpenTelemetry provider is never read or set.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider = tp }
}

// WithClassifier replaces [DefaultClassifier]. classes lists every value c
// returns; their reconcile_total series are created at zero when a
// reconciler is wrapped.
func WithClassifier(c Classifier, classes ...string) Option {
	return func(o *options) { o.classifier, o.classes = c, classes }
}

// WithoutHealthChecks adds no /healthz and /readyz checks to the manager.
func WithoutHealthChecks() Option { return func(o *options) { o.noHealth = true } }

// WithDebugPath serves the debug report at path on the metrics server
// (default [DefaultDebugPath]); an empty path turns it off.
func WithDebugPath(path string) Option { return func(o *options) { o.debugPath = path } }

// WithRecorderOptions configures the Recorders [Observability.Recorder] returns.
func WithRecorderOptions(opts ...RecorderOption) Option {
	return func(o *options) { o.recorderOpts = append(o.recorderOpts, opts...) }
}

// WithTriggerCacheSize caps the pending reconcile triggers kept (default
// [DefaultTriggerCacheSize]); when exceeded, the oldest is dropped and its
// reconcile reports trigger "unknown".
func WithTriggerCacheSize(n int) Option { return func(o *options) { o.triggerSize = n } }

// WithScheme resolves the kinds of watched objects with s; [Setup] uses the
// manager's scheme.
func WithScheme(s *runtime.Scheme) Option { return func(o *options) { o.scheme = s } }

// Observability wires metrics, events, logs and traces for the controllers of
// one manager. Build it with [Setup] (or [New] outside a manager). It is safe
// for concurrent use.
type Observability struct {
	metrics    *Metrics
	gatherer   prometheus.Gatherer
	tracer     trace.Tracer
	classify   Classifier
	classes    []string
	triggers   *triggers
	status     *controllerStatuses
	recOpts    []RecorderOption
	newEventer func(name string) events.EventRecorder
	registerer prometheus.Registerer

	mu        sync.Mutex
	recorders map[string]*Recorder
}

// New builds an Observability without a manager: metrics registered on the
// registerer, the tracer, trigger tracking. Recorders it returns drop every
// Event. [Setup] is New plus the manager wiring.
func New(opts ...Option) (*Observability, error) {
	o := options{
		registerer:  crmetrics.Registry,
		gatherer:    crmetrics.Registry,
		classifier:  DefaultClassifier,
		classes:     DefaultClasses,
		debugPath:   DefaultDebugPath,
		triggerSize: DefaultTriggerCacheSize,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.classifier == nil {
		return nil, errors.New("observability: nil Classifier")
	}
	obs := &Observability{
		gatherer:   o.gatherer,
		classify:   o.classifier,
		classes:    o.classes,
		triggers:   newTriggers(o.scheme, o.triggerSize),
		status:     &controllerStatuses{m: map[string]*ControllerStatus{}},
		recOpts:    o.recorderOpts,
		newEventer: func(string) events.EventRecorder { return discardEvents{} },
		recorders:  map[string]*Recorder{},
	}
	tp := o.tracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	obs.tracer = tp.Tracer(TracerName)
	if !o.noMetrics {
		m, err := NewMetrics(o.registerer, o.metricsOpts...)
		if err != nil {
			return nil, err
		}
		obs.metrics = m
		obs.registerer = o.registerer
	}
	return obs, nil
}

// Setup builds an Observability for mgr: metrics on controller-runtime's
// registry (served on the manager's metrics endpoint), a "ping" /healthz
// check, an "informer-cache-sync" /readyz check that fails until the
// manager's cache has synced, the debug report on the metrics server, and
// Recorders backed by mgr.GetEventRecorder (events.k8s.io/v1). Call it once
// per manager, before mgr.Start. Errors (e.g. metrics already registered) are
// returned, never deferred to scrape time; on error nothing stays registered.
func Setup(mgr manager.Manager, opts ...Option) (*Observability, error) {
	var o options
	o.debugPath = DefaultDebugPath
	for _, opt := range opts {
		opt(&o)
	}
	obs, err := New(append([]Option{WithScheme(mgr.GetScheme())}, opts...)...)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Observability, error) { return nil, err }
	obs.newEventer = func(name string) events.EventRecorder { return mgr.GetEventRecorder(name) }
	if !o.noHealth {
		if err := mgr.AddHealthzCheck(HealthzCheckName, healthz.Ping); err != nil {
			return fail(fmt.Errorf("observability: add healthz check: %w", err))
		}
		if err := mgr.AddReadyzCheck(ReadyzCheckName, CacheSyncCheck(mgr.GetCache())); err != nil {
			return fail(fmt.Errorf("observability: add readyz check: %w", err))
		}
	}
	if o.debugPath != "" {
		if err := mgr.AddMetricsServerExtraHandler(o.debugPath, obs.DebugHandler()); err != nil {
			return fail(fmt.Errorf("observability: add debug handler at %s: %w", o.debugPath, err))
		}
	}
	return obs, nil
}

// Metrics returns the metrics, or nil when built [WithoutMetrics] (a nil
// *Metrics accepts every call and does nothing).
func (o *Observability) Metrics() *Metrics { return o.metrics }

// Registerer returns the registerer the metrics are on (controller-runtime's
// metrics.Registry unless [WithRegisterer] said otherwise), or nil when built
// [WithoutMetrics]. The pattern packages register their own metrics there
// (finalizer.NewMetrics, phase.NewMetrics, …); the reconciler package does it
// for every controller it builds.
func (o *Observability) Registerer() prometheus.Registerer { return o.registerer }

// Tracer returns the tracer reconcile and API-write spans are made with.
func (o *Observability) Tracer() trace.Tracer { return o.tracer }

// Wrap returns r instrumented for the controller named controller (use the
// name given to the builder, so it matches controller-runtime's own metrics
// and the workqueue): each reconcile runs in a span "reconcile <controller>"
// carrying the object, the reconcile ID, the result class and the trigger
// (see [Observability.TriggerHandler]); the context's logger gains the trace
// and span IDs; the result class and duration go to opkit_reconcile_total
// and opkit_reconcile_duration_seconds; the debug report's last reconcile is
// updated. The reconciler's result and error are returned unchanged, and a
// panic is recorded (class "panic") and re-raised.
func (o *Observability) Wrap(controller string, r reconcile.Reconciler, opts ...WrapOption) reconcile.Reconciler {
	var wo wrapOptions
	for _, opt := range opts {
		opt(&wo)
	}
	o.status.register(controller)
	o.metrics.InitController(controller, o.classes...)
	return &wrapped{o: o, controller: controller, kind: wo.kind, inner: r}
}

// TriggerHandler wraps h (any handler: EnqueueRequestForObject, owner, map
// function) so every request it enqueues for controller remembers the event
// that caused it; the reconcile span then says which watched object and which
// event type made it run. Use it in Watches(obj, o.TriggerHandler(name, h)).
// Memory is bounded by [WithTriggerCacheSize].
func (o *Observability) TriggerHandler(controller string, h handler.EventHandler) handler.EventHandler {
	return &triggerHandler{t: o.triggers, controller: controller, inner: h}
}

// TriggerPredicate records triggers for For(): it notes each event as the
// trigger of the object's own request and never filters. Put it last among
// a watch's predicates so events that other predicates drop are not noted:
// For(&T{}, builder.WithPredicates(filter, o.TriggerPredicate(name))).
func (o *Observability) TriggerPredicate(controller string) predicate.Predicate {
	return triggerPredicate(o.triggers, controller)
}

// Client returns c with a child span around every write (create, update,
// patch, apply, delete, deletecollection, and status/subresource writes),
// named "kube.<verb>[ <subresource>]" and carrying the object's kind,
// namespace and name; a failed write marks its span as an error. Reads are
// not traced.
func (o *Observability) Client(c client.Client) client.Client {
	return tracingClientFor(c, o.tracer)
}

// Recorder returns the deduplicating event [Recorder] for controller, the
// same one on every call. Events name controller as reporting controller.
func (o *Observability) Recorder(controller string) *Recorder {
	o.mu.Lock()
	defer o.mu.Unlock()
	if r, ok := o.recorders[controller]; ok {
		return r
	}
	r := NewRecorder(o.newEventer(controller), o.recOpts...)
	o.recorders[controller] = r
	return r
}

type discardEvents struct{}

func (discardEvents) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}

package external

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/internal/promreg"
)

// Operations, as passed to [Observer.Call] and in the operation label.
const (
	OpConnect = "connect"
	OpObserve = "observe"
	OpCreate  = "create"
	OpUpdate  = "update"
	OpDelete  = "delete"
)

// Observer receives measurements. Implementations must be safe for
// concurrent use. Embed [NopObserver] to stay compatible when methods are
// added.
type Observer interface {
	// Call is one external call (or connect) that was sent, with its
	// duration; code is "" on success, else the [Failure.Code].
	Call(obj client.Object, op string, took time.Duration, code string)
	// Throttled is a call not sent because the endpoint's rate limit or
	// Retry-After would make it wait longer than the maximum wait.
	Throttled(obj client.Object, endpoint string, wait time.Duration)
	// FirstReady is obj marked Ready by a Reconciler that had not seen it
	// in sync before, while its status did not already say Ready: took is
	// the time since its creationTimestamp. An object already Ready when the
	// process starts is not counted again.
	FirstReady(obj client.Object, took time.Duration)
	// DriftCorrected is an external resource changed (or deleted) outside
	// Kubernetes and set back to obj's spec.
	DriftCorrected(obj client.Object)
}

// NopObserver ignores everything. It is the default.
type NopObserver struct{}

// Call does nothing.
func (NopObserver) Call(client.Object, string, time.Duration, string) {}

// Throttled does nothing.
func (NopObserver) Throttled(client.Object, string, time.Duration) {}

// FirstReady does nothing.
func (NopObserver) FirstReady(client.Object, time.Duration) {}

// DriftCorrected does nothing.
func (NopObserver) DriftCorrected(client.Object) {}

// CallBuckets are the buckets of opkit_external_call_duration_seconds.
var CallBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// ReadyBuckets are the buckets of opkit_external_time_to_first_ready_seconds.
var ReadyBuckets = []float64{0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// Metrics is an [Observer] recording the package's Prometheus metrics for
// one controller, on the registerer given to [NewMetrics]:
//
//	opkit_external_call_duration_seconds{controller,operation}      histogram: external calls sent, by operation
//	opkit_external_call_errors_total{controller,operation,code}     counter: failed calls, by operation and Failure.Code
//	opkit_external_throttled_total{controller}                      counter: calls held back by the Limiter
//	opkit_external_time_to_first_ready_seconds{controller}          histogram: creationTimestamp → first Ready
//	opkit_external_drift_corrections_total{controller}              counter: external changes set back
//
// Labels take values fixed by the program and the API's error codes, never
// object or endpoint names, so the series do not grow with the objects.
type Metrics struct {
	NopObserver
	controller string
	latency    *prometheus.HistogramVec
	errs       *prometheus.CounterVec
	throttled  *prometheus.CounterVec
	ready      *prometheus.HistogramVec
	drift      *prometheus.CounterVec
}

// NewMetrics registers the metrics on reg — or reuses them when already
// registered there — and returns an Observer recording them with the label
// controller=controller. Pass it to [WithObserver]; the reconciler package
// does this for you.
func NewMetrics(reg prometheus.Registerer, controller string) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("external: NewMetrics: nil Registerer")
	}
	m := &Metrics{controller: controller}
	var err error
	if m.latency, err = promreg.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "opkit_external_call_duration_seconds", Buckets: CallBuckets,
		Help: "Duration of calls to the external API, by operation (connect, observe, create, update, delete).",
	}, []string{"controller", "operation"})); err != nil {
		return nil, err
	}
	if m.errs, err = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "opkit_external_call_errors_total",
		Help: "Failed calls to the external API, by operation and error code.",
	}, []string{"controller", "operation", "code"})); err != nil {
		return nil, err
	}
	if m.throttled, err = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "opkit_external_throttled_total",
		Help: "External calls held back by the endpoint's rate limit or Retry-After.",
	}, []string{"controller"})); err != nil {
		return nil, err
	}
	if m.ready, err = promreg.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "opkit_external_time_to_first_ready_seconds", Buckets: ReadyBuckets,
		Help: "Time from an object's creation to its first Ready.",
	}, []string{"controller"})); err != nil {
		return nil, err
	}
	if m.drift, err = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "opkit_external_drift_corrections_total",
		Help: "External resources changed or deleted outside Kubernetes and set back.",
	}, []string{"controller"})); err != nil {
		return nil, err
	}
	m.throttled.WithLabelValues(controller)
	m.drift.WithLabelValues(controller)
	return m, nil
}

// Call observes the call's duration and counts its error.
func (m *Metrics) Call(_ client.Object, op string, took time.Duration, code string) {
	m.latency.WithLabelValues(m.controller, op).Observe(took.Seconds())
	if code != "" {
		m.errs.WithLabelValues(m.controller, op, code).Inc()
	}
}

// Throttled counts a held-back call.
func (m *Metrics) Throttled(client.Object, string, time.Duration) {
	m.throttled.WithLabelValues(m.controller).Inc()
}

// FirstReady observes the time to first Ready.
func (m *Metrics) FirstReady(_ client.Object, took time.Duration) {
	m.ready.WithLabelValues(m.controller).Observe(took.Seconds())
}

// DriftCorrected counts a correction.
func (m *Metrics) DriftCorrected(client.Object) {
	m.drift.WithLabelValues(m.controller).Inc()
}

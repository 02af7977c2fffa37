package finalizer

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/internal/promreg"
)

// CleanupBuckets are the buckets of opkit_finalizer_cleanup_duration_seconds,
// in seconds.
var CleanupBuckets = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900}

// Metrics is an [Observer] that records the finalizer's Prometheus metrics
// for one controller. The series, on the registerer given to [NewMetrics]:
//
//	opkit_finalizer_cleanup_duration_seconds{controller,step,result}  histogram: one step's run; result success or error
//	opkit_finalizer_stuck_objects{controller}                         gauge: objects past the deadline right now
//	opkit_finalizer_stuck_deletions_total{controller}                 counter: times an object became stuck
//
// Labels take values fixed by the program (controller and step names),
// never object names, so the series do not grow with the number of objects.
// The stuck gauge is exact: it keeps one small entry per stuck object until
// the object is finalized or [Metrics.Forget] is called.
type Metrics struct {
	NopObserver
	controller string
	duration   *prometheus.HistogramVec
	stuckNow   *prometheus.GaugeVec
	stuckTotal *prometheus.CounterVec

	mu    sync.Mutex
	stuck map[types.NamespacedName]struct{}
}

// NewMetrics registers the finalizer metrics on reg — or reuses them when
// they are already registered there, so every controller (and every manager
// in one process) can call it — and returns an Observer that records them
// with the label controller=controller. Pass it to [WithObserver]; the
// reconciler package does this for you.
func NewMetrics(reg prometheus.Registerer, controller string) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("finalizer: NewMetrics: nil Registerer")
	}
	m := &Metrics{controller: controller, stuck: map[types.NamespacedName]struct{}{}}
	var err error
	if m.duration, err = promreg.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "opkit_finalizer_cleanup_duration_seconds", Buckets: CleanupBuckets,
		Help: "Time one finalizer cleanup step took, by step and result (success or error).",
	}, []string{"controller", "step", "result"})); err != nil {
		return nil, err
	}
	if m.stuckNow, err = promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "opkit_finalizer_stuck_objects",
		Help: "Objects currently reported stuck in deletion.",
	}, []string{"controller"})); err != nil {
		return nil, err
	}
	if m.stuckTotal, err = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "opkit_finalizer_stuck_deletions_total",
		Help: "Times an object was first reported stuck in deletion.",
	}, []string{"controller"})); err != nil {
		return nil, err
	}
	m.stuckNow.WithLabelValues(controller)
	m.stuckTotal.WithLabelValues(controller)
	return m, nil
}

// StepFinished observes the step's duration.
func (m *Metrics) StepFinished(_ client.Object, step string, took time.Duration, _ bool, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	m.duration.WithLabelValues(m.controller, step, result).Observe(took.Seconds())
}

// StuckDeletion counts obj as stuck (once, however often it is reported).
func (m *Metrics) StuckDeletion(obj client.Object, _ string, _ time.Duration) {
	key := client.ObjectKeyFromObject(obj)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, was := m.stuck[key]; was {
		return
	}
	m.stuck[key] = struct{}{}
	m.stuckNow.WithLabelValues(m.controller).Inc()
	m.stuckTotal.WithLabelValues(m.controller).Inc()
}

// Finalized stops counting obj as stuck.
func (m *Metrics) Finalized(obj client.Object, _ time.Duration) {
	m.Forget(client.ObjectKeyFromObject(obj))
}

// Forget stops counting the object key as stuck, for an object that went
// away without this process seeing its finalizer removed.
func (m *Metrics) Forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, was := m.stuck[key]; was {
		delete(m.stuck, key)
		m.stuckNow.WithLabelValues(m.controller).Dec()
	}
}

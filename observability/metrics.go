package observability

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/opkit/opkit/internal/promreg"
)

// DefaultReconcileBuckets are the reconcile duration histogram buckets, in seconds.
var DefaultReconcileBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Metrics holds the reconcile metrics observability owns. Every label takes
// values from a set fixed by the program (controller names, result classes,
// condition types and statuses) — never object names or UIDs — so the number
// of series does not grow with the number of objects. Per-object state
// needed to keep the condition gauge exact lives in memory, one small entry
// per object the caller reported, removed by [Metrics.ForgetObject].
//
// The pattern packages own their metrics (finalizer.Metrics, phase.Metrics,
// ensure.Metrics, sharding.Metrics) and register them on the same registerer
// ([Observability.Registerer]); the reconciler package wires them all.
//
// All methods are safe for concurrent use and do nothing on a nil *Metrics,
// so callers can hold a nil Metrics when metrics are turned off.
//
// Series:
//
//	opkit_reconcile_total{controller,result}          counter; result is the outcome class (success, conflict, transient, dependencynotready, terminal) or panic
//	opkit_reconcile_duration_seconds{controller}      histogram
//	opkit_condition_objects{controller,type,status}   gauge: number of objects
type Metrics struct {
	reconcileTotal    *prometheus.CounterVec
	reconcileDuration *prometheus.HistogramVec
	conditionObjects  *prometheus.GaugeVec

	mu    sync.Mutex
	conds map[objectRef]map[string]string // condition type -> normalised status
}

type objectRef struct {
	controller string
	key        types.NamespacedName
}

type metricsOptions struct {
	reconcileBuckets []float64
}

// MetricsOption configures [NewMetrics].
type MetricsOption func(*metricsOptions)

// WithReconcileBuckets replaces [DefaultReconcileBuckets]; they must be
// strictly increasing, or NewMetrics fails.
func WithReconcileBuckets(b ...float64) MetricsOption {
	return func(o *metricsOptions) { o.reconcileBuckets = b }
}

// NewMetrics registers the reconcile metrics on reg — or reuses them when
// they are already registered there, so several managers in one process (a
// test suite) can each set up observability — and returns them. Pass
// controller-runtime's metrics.Registry to serve them on the manager's
// metrics endpoint. Invalid buckets and a collision with a different metric of
// the same name are errors here, at start-up; a scrape never fails because of
// them.
func NewMetrics(reg prometheus.Registerer, opts ...MetricsOption) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("observability: NewMetrics: nil Registerer")
	}
	o := metricsOptions{reconcileBuckets: DefaultReconcileBuckets}
	for _, opt := range opts {
		opt(&o)
	}
	b := o.reconcileBuckets
	if len(b) == 0 {
		return nil, errors.New("observability: empty reconcile histogram buckets")
	}
	for i := 1; i < len(b); i++ {
		if b[i] <= b[i-1] {
			return nil, fmt.Errorf("observability: reconcile histogram buckets not strictly increasing: %v", b)
		}
	}
	m := &Metrics{conds: map[objectRef]map[string]string{}}
	var err error
	if m.reconcileTotal, err = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "opkit_reconcile_total",
		Help: "Reconciles finished, by controller and result class.",
	}, []string{"controller", "result"})); err != nil {
		return nil, fmt.Errorf("observability: %w", err)
	}
	if m.reconcileDuration, err = promreg.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "opkit_reconcile_duration_seconds",
		Help: "Time one reconcile took, by controller.", Buckets: b,
	}, []string{"controller"})); err != nil {
		return nil, fmt.Errorf("observability: %w", err)
	}
	if m.conditionObjects, err = promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "opkit_condition_objects",
		Help: "Number of objects whose last reported condition of this type has this status (True, False or Unknown).",
	}, []string{"controller", "type", "status"})); err != nil {
		return nil, fmt.Errorf("observability: %w", err)
	}
	return m, nil
}

// InitController creates controller's reconcile series for every result
// class in classes at zero, so rates and alerts work before the first
// reconcile of each class.
func (m *Metrics) InitController(controller string, classes ...string) {
	if m == nil {
		return
	}
	for _, c := range classes {
		m.reconcileTotal.WithLabelValues(controller, c)
	}
	m.reconcileDuration.WithLabelValues(controller)
}

// ObserveReconcile counts one finished reconcile of controller with result
// class (e.g. "success", "conflict", "terminal") and records its duration.
// class must come from a small fixed set.
func (m *Metrics) ObserveReconcile(controller, class string, d time.Duration) {
	if m == nil {
		return
	}
	m.reconcileTotal.WithLabelValues(controller, class).Inc()
	m.reconcileDuration.WithLabelValues(controller).Observe(d.Seconds())
}

// SetConditions records conds as the current conditions of the object key
// reconciled by controller, moving the object between the
// condition_objects{controller,type,status} counts. A status other than True
// or False counts as Unknown. Condition types the object no longer has stop
// counting it. Calling it again with the same conditions changes nothing.
func (m *Metrics) SetConditions(controller string, key types.NamespacedName, conds []metav1.Condition) {
	if m == nil {
		return
	}
	next := make(map[string]string, len(conds))
	for _, c := range conds {
		next[c.Type] = normaliseStatus(c.Status)
	}
	ref := objectRef{controller, key}
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.conds[ref]
	for typ, st := range prev {
		if next[typ] != st {
			m.conditionObjects.WithLabelValues(controller, typ, st).Dec()
		}
	}
	for typ, st := range next {
		if prev[typ] != st {
			m.conditionObjects.WithLabelValues(controller, typ, st).Inc()
		}
	}
	if len(next) == 0 {
		delete(m.conds, ref)
		return
	}
	m.conds[ref] = next
}

// ForgetObject removes everything recorded about the object key for
// controller: it stops counting in condition_objects and, if it was stuck,
// in finalizer_stuck_objects. Call it when the reconciler finds the object gone.
func (m *Metrics) ForgetObject(controller string, key types.NamespacedName) {
	if m == nil {
		return
	}
	m.SetConditions(controller, key, nil)
}

func normaliseStatus(s metav1.ConditionStatus) string {
	switch s {
	case metav1.ConditionTrue, metav1.ConditionFalse:
		return string(s)
	default:
		return string(metav1.ConditionUnknown)
	}
}

package observability

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Result classes of [DefaultClassifier]. The outcome package's classes
// (success, conflict, transient, terminal, dependency) are plain strings too
// and can be passed through [WithClassifier] unchanged.
const (
	ClassSuccess  = "success"
	ClassConflict = "conflict"
	ClassTerminal = "terminal"
	ClassError    = "error"
	// ClassPanic is recorded when the wrapped reconciler panics.
	ClassPanic = "panic"
)

// DefaultNamespace prefixes every metric name (opkit_reconcile_total, ...).
const DefaultNamespace = "opkit"

var (
	// DefaultReconcileBuckets are the reconcile duration histogram buckets, in seconds.
	DefaultReconcileBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	// DefaultPhaseBuckets are the time-in-phase histogram buckets, in seconds (1s to 1d).
	DefaultPhaseBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400}
	// DefaultCleanupBuckets are the finalizer cleanup step histogram buckets, in seconds.
	DefaultCleanupBuckets = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900}
)

// Metrics holds opkit's Prometheus metrics. Every label takes values from a
// set fixed by the program (controller names, result classes, condition types
// and statuses, phase names, finalizer step names, ensure actions) — never
// object names or UIDs — so the number of series does not grow with the
// number of objects. Per-object state needed to keep the condition and
// stuck-deletion gauges exact lives in memory, one small entry per object the
// caller reported, removed by [Metrics.ForgetObject].
//
// All methods are safe for concurrent use and do nothing on a nil *Metrics,
// so callers can hold a nil Metrics when metrics are turned off.
//
// Series (with the default namespace "opkit"):
//
//	opkit_reconcile_total{controller,result}                      counter
//	opkit_reconcile_duration_seconds{controller}                  histogram
//	opkit_condition_objects{controller,type,status}               gauge: number of objects
//	opkit_phase_transitions_total{controller,from,to}             counter
//	opkit_phase_duration_seconds{controller,phase}                histogram: time spent in phase
//	opkit_finalizer_cleanup_duration_seconds{controller,step,result} histogram
//	opkit_finalizer_stuck_objects{controller}                     gauge: objects stuck in deletion now
//	opkit_finalizer_stuck_deletions_total{controller}             counter: times an object became stuck
//	opkit_ensure_results_total{controller,action}                 counter
//	opkit_shard_objects{ring,member}                              gauge: objects labelled for a member (member="" = unassigned)
//	opkit_shard_events_total{ring,member,event}                   counter: assigned, moved_in, moved_out, drain_requested, drain_acknowledged
//	opkit_shard_ring_recomputations_total{ring}                   counter
//	opkit_shard_ring_members{ring}                                gauge: ready members in the ring
type Metrics struct {
	reg        prometheus.Registerer
	collectors []prometheus.Collector

	reconcileTotal      *prometheus.CounterVec
	reconcileDuration   *prometheus.HistogramVec
	conditionObjects    *prometheus.GaugeVec
	phaseTransitions    *prometheus.CounterVec
	phaseDuration       *prometheus.HistogramVec
	cleanupDuration     *prometheus.HistogramVec
	stuckObjects        *prometheus.GaugeVec
	stuckDeletionsTotal *prometheus.CounterVec
	ensureResults       *prometheus.CounterVec
	shardObjects        *prometheus.GaugeVec
	shardEvents         *prometheus.CounterVec
	shardRecomputations *prometheus.CounterVec
	shardMembers        *prometheus.GaugeVec

	mu    sync.Mutex
	conds map[objectRef]map[string]string // condition type -> normalised status
	stuck map[objectRef]struct{}
	// shardSeen remembers every member ShardObjects reported per ring, so a
	// member that disappears from the counts is set to 0.
	shardSeen map[string]map[string]struct{}
}

type objectRef struct {
	controller string
	key        types.NamespacedName
}

type metricsOptions struct {
	namespace                                      string
	reconcileBuckets, phaseBuckets, cleanupBuckets []float64
}

// MetricsOption configures [NewMetrics].
type MetricsOption func(*metricsOptions)

// MetricsNamespace replaces the "opkit" name prefix. It must be a valid
// Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*); NewMetrics returns an
// error otherwise.
func MetricsNamespace(ns string) MetricsOption { return func(o *metricsOptions) { o.namespace = ns } }

// ReconcileBuckets replaces [DefaultReconcileBuckets].
func ReconcileBuckets(b ...float64) MetricsOption {
	return func(o *metricsOptions) { o.reconcileBuckets = b }
}

// PhaseBuckets replaces [DefaultPhaseBuckets].
func PhaseBuckets(b ...float64) MetricsOption { return func(o *metricsOptions) { o.phaseBuckets = b } }

// CleanupBuckets replaces [DefaultCleanupBuckets].
func CleanupBuckets(b ...float64) MetricsOption {
	return func(o *metricsOptions) { o.cleanupBuckets = b }
}

// NewMetrics creates opkit's metrics and registers them on reg. Pass
// controller-runtime's metrics.Registry to serve them on the manager's
// metrics endpoint. Every problem — an invalid name, a collision with a metric
// already registered on reg — is returned here, at start-up, and nothing is
// left registered; a scrape never fails because of them.
func NewMetrics(reg prometheus.Registerer, opts ...MetricsOption) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("observability: NewMetrics: nil Registerer")
	}
	o := metricsOptions{
		namespace:        DefaultNamespace,
		reconcileBuckets: DefaultReconcileBuckets,
		phaseBuckets:     DefaultPhaseBuckets,
		cleanupBuckets:   DefaultCleanupBuckets,
	}
	for _, opt := range opts {
		opt(&o)
	}
	// Validate against the classic scheme, not client_golang's UTF-8 default,
	// so every scraper and promtool accept the names.
	if !model.LegacyValidation.IsValidMetricName(o.namespace) {
		return nil, fmt.Errorf("observability: invalid metrics namespace %q: want [a-zA-Z_:][a-zA-Z0-9_:]*", o.namespace)
	}
	for name, b := range map[string][]float64{"reconcile": o.reconcileBuckets, "phase": o.phaseBuckets, "cleanup": o.cleanupBuckets} {
		if len(b) == 0 {
			return nil, fmt.Errorf("observability: empty %s histogram buckets", name)
		}
		for i := 1; i < len(b); i++ {
			if b[i] <= b[i-1] {
				return nil, fmt.Errorf("observability: %s histogram buckets not strictly increasing: %v", name, b)
			}
		}
	}
	ns := o.namespace
	m := &Metrics{
		reg:   reg,
		conds: map[objectRef]map[string]string{},
		stuck: map[objectRef]struct{}{},
		reconcileTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "reconcile_total",
			Help: "Reconciles finished, by controller and result class.",
		}, []string{"controller", "result"}),
		reconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "reconcile_duration_seconds",
			Help: "Time one reconcile took, by controller.", Buckets: o.reconcileBuckets,
		}, []string{"controller"}),
		conditionObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "condition_objects",
			Help: "Number of objects whose last reported condition of this type has this status (True, False or Unknown).",
		}, []string{"controller", "type", "status"}),
		phaseTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "phase_transitions_total",
			Help: "Phase transitions, by controller and from/to phase (from=\"none\" for the first phase).",
		}, []string{"controller", "from", "to"}),
		phaseDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "phase_duration_seconds",
			Help: "Time an object spent in a phase before leaving it.", Buckets: o.phaseBuckets,
		}, []string{"controller", "phase"}),
		cleanupDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "finalizer_cleanup_duration_seconds",
			Help: "Time one finalizer cleanup step took, by step and result (success or error).", Buckets: o.cleanupBuckets,
		}, []string{"controller", "step", "result"}),
		stuckObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "finalizer_stuck_objects",
			Help: "Objects currently reported stuck in deletion.",
		}, []string{"controller"}),
		stuckDeletionsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "finalizer_stuck_deletions_total",
			Help: "Times an object was first reported stuck in deletion.",
		}, []string{"controller"}),
		ensureResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "ensure_results_total",
			Help: "Objects ensured, by controller and action (created, updated, unchanged, deleted).",
		}, []string{"controller", "action"}),
		shardObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "shard_objects",
			Help: "Objects labelled for each member of a sharding ring (member=\"\" counts unassigned objects), as last counted by the ring's assigner.",
		}, []string{"ring", "member"}),
		shardEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "shard_events_total",
			Help: "Sharding events by ring, member and event (assigned, moved_in, moved_out, drain_requested, drain_acknowledged).",
		}, []string{"ring", "member", "event"}),
		shardRecomputations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "shard_ring_recomputations_total",
			Help: "Times the ring was rebuilt because its set of ready members changed.",
		}, []string{"ring"}),
		shardMembers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "shard_ring_members",
			Help: "Ready members in the ring at its last recomputation.",
		}, []string{"ring"}),
	}
	all := []prometheus.Collector{
		m.reconcileTotal, m.reconcileDuration, m.conditionObjects, m.phaseTransitions, m.phaseDuration,
		m.cleanupDuration, m.stuckObjects, m.stuckDeletionsTotal, m.ensureResults,
		m.shardObjects, m.shardEvents, m.shardRecomputations, m.shardMembers,
	}
	for _, c := range all {
		if err := reg.Register(c); err != nil {
			m.Unregister()
			return nil, fmt.Errorf("observability: register metrics: %w", err)
		}
		m.collectors = append(m.collectors, c)
	}
	return m, nil
}

// Unregister removes every metric from the Registerer NewMetrics used, so a
// new Metrics can be registered there (e.g. by the next test).
func (m *Metrics) Unregister() {
	if m == nil {
		return
	}
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
	m.collectors = nil
}

// InitController creates the reconcile_total series of controller for each
// class with value 0, so rate() and absent() work before the first reconcile.
// [Observability.Wrap] calls it with the classifier's classes.
func (m *Metrics) InitController(controller string, classes ...string) {
	if m == nil {
		return
	}
	for _, c := range classes {
		m.reconcileTotal.WithLabelValues(controller, c)
	}
	m.reconcileDuration.WithLabelValues(controller)
	m.stuckObjects.WithLabelValues(controller)
	m.stuckDeletionsTotal.WithLabelValues(controller)
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
	m.StuckDeletion(controller, key, false)
}

// PhaseTransition counts a transition of one object from phase from to phase
// to and, when from is not empty, records timeInFrom in phase_duration_seconds
// for phase from. An empty from (the first phase) is reported as "none".
func (m *Metrics) PhaseTransition(controller, from, to string, timeInFrom time.Duration) {
	if m == nil {
		return
	}
	label := from
	if label == "" {
		label = "none"
	}
	m.phaseTransitions.WithLabelValues(controller, label, to).Inc()
	if from != "" {
		m.phaseDuration.WithLabelValues(controller, from).Observe(timeInFrom.Seconds())
	}
}

// CleanupFinished records how long one run of finalizer cleanup step took;
// result is "success" when err is nil and "error" otherwise.
func (m *Metrics) CleanupFinished(controller, step string, d time.Duration, err error) {
	if m == nil {
		return
	}
	result := ClassSuccess
	if err != nil {
		result = ClassError
	}
	m.cleanupDuration.WithLabelValues(controller, step, result).Observe(d.Seconds())
}

// StuckDeletion reports whether the object key is stuck in deletion (e.g.
// past its cleanup deadline). finalizer_stuck_objects counts the objects
// currently stuck; finalizer_stuck_deletions_total counts each false→true
// change. Repeating the same report changes nothing.
func (m *Metrics) StuckDeletion(controller string, key types.NamespacedName, stuck bool) {
	if m == nil {
		return
	}
	ref := objectRef{controller, key}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, was := m.stuck[ref]
	switch {
	case stuck && !was:
		m.stuck[ref] = struct{}{}
		m.stuckObjects.WithLabelValues(controller).Inc()
		m.stuckDeletionsTotal.WithLabelValues(controller).Inc()
	case !stuck && was:
		delete(m.stuck, ref)
		m.stuckObjects.WithLabelValues(controller).Dec()
	}
}

// EnsureResult adds n to ensure_results_total{controller,action}; action is
// one of created, updated, unchanged, deleted. n <= 0 does nothing.
func (m *Metrics) EnsureResult(controller, action string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.ensureResults.WithLabelValues(controller, action).Add(float64(n))
}

func normaliseStatus(s metav1.ConditionStatus) string {
	switch s {
	case metav1.ConditionTrue, metav1.ConditionFalse:
		return string(s)
	default:
		return string(metav1.ConditionUnknown)
	}
}

// ShardEvent adds one to shard_events_total{ring,member,event}. event is one of
// assigned, moved_in, moved_out, drain_requested, drain_acknowledged.
func (m *Metrics) ShardEvent(ring, member, event string) {
	if m == nil {
		return
	}
	m.shardEvents.WithLabelValues(ring, member, event).Inc()
}

// ShardRing records a ring recomputation and its number of ready members.
func (m *Metrics) ShardRing(ring string, members int) {
	if m == nil {
		return
	}
	m.shardRecomputations.WithLabelValues(ring).Inc()
	m.shardMembers.WithLabelValues(ring).Set(float64(members))
}

// ShardObjects sets shard_objects{ring,member} from counts (member "" counts
// unassigned objects). Members missing from counts are set to 0 rather than
// deleted, so a member that lost all its objects shows 0.
func (m *Metrics) ShardObjects(ring string, counts map[string]int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shardSeen == nil {
		m.shardSeen = map[string]map[string]struct{}{}
	}
	seen := m.shardSeen[ring]
	if seen == nil {
		seen = map[string]struct{}{}
		m.shardSeen[ring] = seen
	}
	for member := range seen {
		if _, ok := counts[member]; !ok {
			m.shardObjects.WithLabelValues(ring, member).Set(0)
		}
	}
	for member, n := range counts {
		seen[member] = struct{}{}
		m.shardObjects.WithLabelValues(ring, member).Set(float64(n))
	}
}

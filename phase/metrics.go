package phase

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opkit/opkit/internal/promreg"
)

// DurationBuckets are the buckets of opkit_phase_duration_seconds, in
// seconds (1 s to 1 day).
var DurationBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400}

// Metrics is an [Observer] that records a machine's transitions for one
// controller. The series, on the registerer given to [NewMetrics]:
//
//	opkit_phase_transitions_total{controller,from,to}  counter (from="none" for an object's first phase)
//	opkit_phase_duration_seconds{controller,phase}      histogram: time spent in a phase before leaving it
//
// Phase names come from the machine's declaration, so the series are bounded.
type Metrics struct {
	NopObserver
	controller  string
	transitions *prometheus.CounterVec
	duration    *prometheus.HistogramVec
}

// NewMetrics registers the phase metrics on reg — or reuses them when they
// are already registered there — and returns an Observer that records them
// with the label controller=controller. Pass it to [WithObserver]; the
// reconciler package does this for you.
func NewMetrics(reg prometheus.Registerer, controller string) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("phase: NewMetrics: nil Registerer")
	}
	m := &Metrics{controller: controller}
	var err error
	if m.transitions, err = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "opkit_phase_transitions_total",
		Help: "Phase transitions, by controller and from/to phase (from=\"none\" for the first phase).",
	}, []string{"controller", "from", "to"})); err != nil {
		return nil, err
	}
	if m.duration, err = promreg.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "opkit_phase_duration_seconds", Buckets: DurationBuckets,
		Help: "Time an object spent in a phase before leaving it.",
	}, []string{"controller", "phase"})); err != nil {
		return nil, err
	}
	return m, nil
}

// Transition counts the transition and, when the object left a phase it had
// entered, observes the time it spent there.
func (m *Metrics) Transition(_ string, from, to Phase, timeInFrom time.Duration) {
	label := string(from)
	if label == "" {
		label = "none"
	}
	m.transitions.WithLabelValues(m.controller, label, string(to)).Inc()
	if from != "" {
		m.duration.WithLabelValues(m.controller, string(from)).Observe(timeInFrom.Seconds())
	}
}

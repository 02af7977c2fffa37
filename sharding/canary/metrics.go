package canary

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opkit/opkit/internal/promreg"
)

// Observer receives a rollout's measurements. Implementations must be safe
// for concurrent use and must not block.
type Observer interface {
	// Checked is called after every check with the state it left (also when
	// nothing changed).
	Checked(ring string, s State)
	// Decided is called once per Pass or Fail verdict that changed the
	// rollout (a widened step, a promotion, a roll back), and once per
	// person's action acted on, with verdict "" and the action.
	Decided(ring string, verdict Verdict, action string)
}

// NopObserver ignores everything; it is the default.
type NopObserver struct{}

// Checked implements [Observer].
func (NopObserver) Checked(string, State) {}

// Decided implements [Observer].
func (NopObserver) Decided(string, Verdict, string) {}

// phases lists every phase, so the phase gauge shows 0 for the others.
var phases = []Phase{PhaseIdle, PhaseProgressing, PhasePaused, PhasePromoting, PhasePromoted, PhaseRollingBack, PhaseRolledBack}

// Metrics is an [Observer] recording a rollout's Prometheus metrics, on the
// registerer given to [NewMetrics]:
//
//	opkit_canary_percent{ring}                      gauge: the canary's share of the ring at the current step (0 rolling back, 100 promoting)
//	opkit_canary_step{ring}                         gauge: index of the current step
//	opkit_canary_phase{ring,phase}                  gauge: 1 for the current phase, 0 for the others
//	opkit_canary_objects{ring,cohort}               gauge: objects on canary / stable members at the last check
//	opkit_canary_unhealthy_objects{ring,cohort}     gauge: of those, Stalled + Degraded + not Ready in time
//	opkit_canary_decisions_total{ring,decision}     counter: pass, fail, and the actions pause, resume, promote, abort
//
// Ring names are the program's, so the series are bounded.
type Metrics struct {
	percent, step, phase, objects, unhealthy *prometheus.GaugeVec
	decisions                                *prometheus.CounterVec
}

// NewMetrics registers the canary metrics on reg — or reuses them when they
// are already registered there — and returns an Observer that records them.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("canary: NewMetrics: nil Registerer")
	}
	m := &Metrics{}
	gauge := func(name, help string, labels ...string) (*prometheus.GaugeVec, error) {
		return promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, append([]string{"ring"}, labels...)))
	}
	var err error
	if m.percent, err = gauge("opkit_canary_percent", "The canary version's share of the ring at the rollout's current step, in percent."); err != nil {
		return nil, err
	}
	if m.step, err = gauge("opkit_canary_step", "Index of the rollout's current step."); err != nil {
		return nil, err
	}
	if m.phase, err = gauge("opkit_canary_phase", "1 for the rollout's current phase, 0 for the others.", "phase"); err != nil {
		return nil, err
	}
	if m.objects, err = gauge("opkit_canary_objects", "Objects on the canary and on the stable members at the rollout's last check.", "cohort"); err != nil {
		return nil, err
	}
	if m.unhealthy, err = gauge("opkit_canary_unhealthy_objects", "Objects Stalled, Degraded or not Ready in time, per cohort, at the rollout's last check.", "cohort"); err != nil {
		return nil, err
	}
	if m.decisions, err = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "opkit_canary_decisions_total",
		Help: "Rollout decisions: verdicts (pass, fail) that changed the rollout and actions (pause, resume, promote, abort) acted on.",
	}, []string{"ring", "decision"})); err != nil {
		return nil, err
	}
	return m, nil
}

// Checked sets the gauges from s.
func (m *Metrics) Checked(ring string, s State) {
	m.percent.WithLabelValues(ring).Set(float64(s.Percent))
	m.step.WithLabelValues(ring).Set(float64(s.Step))
	for _, p := range phases {
		v := 0.0
		if p == s.Phase {
			v = 1
		}
		m.phase.WithLabelValues(ring, string(p)).Set(v)
	}
	m.objects.WithLabelValues(ring, "canary").Set(float64(s.Canary.Objects))
	m.objects.WithLabelValues(ring, "stable").Set(float64(s.Stable.Objects))
	m.unhealthy.WithLabelValues(ring, "canary").Set(float64(s.Canary.Unhealthy()))
	m.unhealthy.WithLabelValues(ring, "stable").Set(float64(s.Stable.Unhealthy()))
}

// Decided counts a verdict ("pass", "fail") or an action.
func (m *Metrics) Decided(ring string, v Verdict, action string) {
	switch {
	case v == Pass:
		m.decisions.WithLabelValues(ring, "pass").Inc()
	case v == Fail:
		m.decisions.WithLabelValues(ring, "fail").Inc()
	case action != "":
		m.decisions.WithLabelValues(ring, action).Inc()
	}
}

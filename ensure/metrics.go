package ensure

import (
	"context"
	"errors"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opkit/opkit/internal/promreg"
)

// Metrics is an [Observer] that counts what an Ensurer did, for one
// controller. The series, on the registerer given to [NewMetrics]:
//
//	opkit_ensure_results_total{controller,action}  counter; action is created, updated, unchanged, deleted or recreated
type Metrics struct {
	controller string
	results    *prometheus.CounterVec
}

// NewMetrics registers the ensure metrics on reg — or reuses them when they
// are already registered there — and returns an Observer that records them
// with the label controller=controller. Pass it to [WithObserver]; the
// reconciler package does this for you.
func NewMetrics(reg prometheus.Registerer, controller string) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("ensure: NewMetrics: nil Registerer")
	}
	results, err := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "opkit_ensure_results_total",
		Help: "Objects ensured, by controller and action (created, updated, unchanged, deleted, recreated).",
	}, []string{"controller", "action"}))
	if err != nil {
		return nil, err
	}
	return &Metrics{controller: controller, results: results}, nil
}

// ObserveChange counts c by its action.
func (m *Metrics) ObserveChange(_ context.Context, c Change) {
	m.results.WithLabelValues(m.controller, strings.ToLower(string(c.Action))).Inc()
}

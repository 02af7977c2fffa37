package main

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opkit/opkit/examples/sharded/fleet"
)

// reconcileErrors is the rollout's error source (canary.WithErrorCounts) in
// this demo: each replica's opkit_reconcile_total of the webapp controller
// with an error result (transient, terminal, panic), summed per version. The
// replicas share this process, so it reads their registries directly; a real
// deployment would query its Prometheus instead.
type reconcileErrors struct {
	mu        sync.Mutex
	gatherers map[string][]prometheus.Gatherer // version → replicas' registries
}

func (e *reconcileErrors) add(rs ...*fleet.Replica) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gatherers == nil {
		e.gatherers = map[string][]prometheus.Gatherer{}
	}
	for _, r := range rs {
		e.gatherers[r.Version] = append(e.gatherers[r.Version], r.Gatherer())
	}
}

// count implements the canary.WithErrorCounts function.
func (e *reconcileErrors) count(_ context.Context, version string) (float64, error) {
	e.mu.Lock()
	gs := append([]prometheus.Gatherer(nil), e.gatherers[version]...)
	e.mu.Unlock()
	total := 0.0
	for _, g := range gs {
		mfs, err := g.Gather()
		if err != nil {
			return 0, err
		}
		for _, mf := range mfs {
			if mf.GetName() != "opkit_reconcile_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				var controller, result string
				for _, l := range m.GetLabel() {
					switch l.GetName() {
					case "controller":
						controller = l.GetValue()
					case "result":
						result = l.GetValue()
					}
				}
				if controller == "webapp" && (result == "transient" || result == "terminal" || result == "panic") {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total, nil
}

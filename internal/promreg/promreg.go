// Package promreg registers Prometheus collectors so that registering the
// same metrics twice on one registry — several controllers, or several
// managers in one test process — shares them instead of failing.
package promreg

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns the collector to use: c itself,
// or the equal collector (same name, help and labels) already registered
// there. A collision with a different metric of the same name is an error.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	var zero C
	return zero, fmt.Errorf("register metrics: %w", err)
}

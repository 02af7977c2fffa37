package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegisterSharesEqualCollectorsAndRefusesCollisions(t *testing.T) {
	reg := prometheus.NewRegistry()
	newVec := func(help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: help}, []string{"a"})
	}
	first, err := Register(reg, newVec("h"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := Register(reg, newVec("h"))
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Fatal("the second registration did not return the collector already registered")
	}
	second.WithLabelValues("v").Inc()
	if _, err := Register(reg, newVec("other help")); err == nil {
		t.Fatal("a different metric with the same name was accepted")
	}
}

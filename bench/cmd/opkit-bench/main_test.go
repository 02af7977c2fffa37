package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opkit/opkit/bench"
)

func TestParsePasses(t *testing.T) {
	got, err := parsePasses("5000x3,20000=ceiling+opkit,300")
	if err != nil {
		t.Fatal(err)
	}
	want := []bench.Pass{{N: 5000, Rounds: 3}, {N: 20000, Contenders: []string{"ceiling", "opkit"}}, {N: 300}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("parsePasses (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"x3", "5000x", "5000x0", "-1", "5000xa=opkit"} {
		if _, err := parsePasses(bad); err == nil {
			t.Errorf("parsePasses(%q): no error", bad)
		}
	}
}

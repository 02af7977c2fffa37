package e2etest

import (
	"testing"

	"github.com/opkit/opkit/testenv/chaos"
)

// Build compiles the main package in dir ("." from an example's own tests)
// with `go build` into the test's temporary directory and returns the
// binary's path: [chaos.BuildBinary].
func Build(t testing.TB, dir string) string {
	t.Helper()
	return chaos.BuildBinary(t, dir)
}

// Process is an operator running as a separate OS process, started by
// [Start]: [chaos.Process].
type Process = chaos.Process

// Start starts binary with args as a separate OS process: [chaos.StartProcess].
func Start(t testing.TB, name, binary string, args ...string) *Process {
	t.Helper()
	return chaos.StartProcess(t, name, binary, args...)
}

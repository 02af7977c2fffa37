package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/opkit/opkit/examples/internal/e2etest"
	"github.com/opkit/opkit/examples/internal/examplecmd"
)

// TestDemoRunsBounded runs the embedded demo as CI does
// (--exit-when-ready): install, upgrade to chart 1.1.0, rollback.
func TestDemoRunsBounded(t *testing.T) {
	ctx := e2etest.Context(t, 4*time.Minute)
	err := run(ctx, examplecmd.Flags{Embedded: true, ExitWhenReady: true, Timeout: 3 * time.Minute, MetricsAddr: "0", ProbeAddr: "0"})
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

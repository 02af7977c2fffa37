package main

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/opkit/opkit/examples/internal/e2etest"
)

// TestDemoRunsBounded runs the demo as `go run ./examples/canary
// --exit-when-ready` does, on a control plane of its own, and checks what it
// measured: v2 caught on its share and rolled back with every WebApp Ready
// on v1 and the very same children in v1's shape; v2.1 widened through
// every step and promoted; never two replicas, of any version, inside one
// WebApp's reconcile (the demo fails otherwise, as it fails on a lost,
// duplicated or re-created child). CANARY_WEBAPPS sets the number of
// WebApps (default 24; the fake node runs at most 500 pods, about 330
// WebApps of the samples).
func TestDemoRunsBounded(t *testing.T) {
	logf.SetLogger(logr.Discard())
	o := defaultOptions()
	o.exitWhenReady, o.timeout = true, 8*time.Minute
	o.steps, o.window = []int{25, 50, 100}, 3*time.Second
	// Leader and member Leases of 4s (the demo's default is 2s): the test
	// runs under -race beside other packages on 2 cores, where a 1.5s renew
	// deadline was missed ("leader election lost") before any canary joined.
	o.leaseDuration = 4 * time.Second
	if s := os.Getenv("CANARY_WEBAPPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		o.webapps, o.timeout = n, 30*time.Minute
	}
	res, err := run(e2etest.Context(t, o.timeout+2*time.Minute), o)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	t.Logf("%d WebApps: v2 verdict %s after it joined (%s; up to %.0f reconcile errors reported), rolled back %s after the verdict, all Ready on v1 again %s after it; v2.1 promoted %s after it joined via %v; %d reconciles",
		o.webapps, res.verdictAfter.Round(time.Millisecond), res.failedAt, res.canaryErrors, res.rolledBackAfter.Round(time.Millisecond),
		res.restoredAfter.Round(time.Millisecond), res.promotedAfter.Round(time.Millisecond), res.stepsSeen, res.reconciles)
	if !slices.Equal(res.stepsSeen, []int{25, 50, 100}) {
		t.Errorf("v2.1 held %v on its way, want every step 25, 50, 100", res.stepsSeen)
	}
	if res.maxConcurrent != 1 {
		t.Errorf("most replicas inside one WebApp's reconcile: %d", res.maxConcurrent)
	}
	if res.failedAt == "" {
		t.Error("no failure message for v2")
	}
	// v2's refused Deployments are terminal reconcile errors; the rollout
	// reads them through WithErrorCounts.
	if res.canaryErrors == 0 {
		t.Error("the rollout reported no reconcile errors for v2")
	}
}

package main

import (
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/examples/database/controller"
	"github.com/opkit/opkit/examples/internal/e2etest"
)

// kubectl scale drives spec.replicas through the scale subresource, within the
// schema's bounds, and the subresource reports the StatefulSet's replicas and
// the selector of the Database's pods.
func TestKubectlScaleDrivesReplicasThroughTheScaleSubresource(t *testing.T) {
	ns := env.Namespace(t)
	startOperator(t, ns)
	ctx := e2etest.Context(t, 3*time.Minute)
	db := newDB(ns, "scaled", "v1", 1)
	if err := env.Client.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, db, "Ready")

	if _, err := env.Kubectl(ctx, "scale", "--replicas=2", "database/scaled", "-n", ns); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
		t.Fatal(err)
	}
	if db.Spec.Replicas != 2 {
		t.Fatalf("after kubectl scale --replicas=2, spec.replicas = %d", db.Spec.Replicas)
	}
	// The schema's bounds hold for the scale subresource too.
	out, err := env.Kubectl(ctx, "scale", "--replicas=10", "database/scaled", "-n", ns)
	if err == nil || !strings.Contains(out, "spec.replicas") {
		t.Fatalf("kubectl scale --replicas=10 (maximum 9) was not rejected by the schema: %v: %s", err, out)
	}
	waitPhase(t, db, "Ready")

	e2etest.WaitScale(ctx, t, env.Client, db, 2, controller.Labels(db))
}

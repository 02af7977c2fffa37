package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/examples/internal/e2etest"
	"github.com/opkit/opkit/reconciler"
)

// TestPauseAndReconcileNowWithKubectl: the reconciler's operational controls
// on the flagship example, driven with kubectl as a user would: a paused
// WebApp says so and its ConfigMap does not follow spec edits until the
// pause ends; a reconcile-now request is recorded in
// status.lastHandledReconcileAt.
func TestPauseAndReconcileNowWithKubectl(t *testing.T) {
	ns := env.Namespace(t)
	startOperator(t, ns, nil)
	ctx := e2etest.Context(t, 2*time.Minute)
	app := newApp(ns, "ops", 1)
	if err := env.Client.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitReady(t, app)
	kubectl := func(args ...string) {
		t.Helper()
		if out, err := env.Kubectl(ctx, append(args, "-n", ns)...); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	greeting := func() string {
		var cm corev1.ConfigMap
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ops-config"}, &cm); err != nil {
			t.Fatal(err)
		}
		return cm.Data["greeting"]
	}

	kubectl("annotate", "webapp/ops", reconciler.AnnotationPaused+"=true")
	e2etest.WaitFor(t, 30*time.Second, "Paused", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(app), app)
		return conditions.IsTrue(app, reconciler.ConditionPaused), err
	})
	kubectl("patch", "webapp/ops", "--type=merge", "-p", `{"spec":{"config":{"greeting":"paused edit"}}}`)
	time.Sleep(2 * time.Second)
	if g := greeting(); g != "hello" {
		t.Fatalf("a paused WebApp's ConfigMap followed the spec: %q", g)
	}
	kubectl("annotate", "webapp/ops", reconciler.AnnotationPaused+"-")
	e2etest.WaitFor(t, 30*time.Second, "the ConfigMap follows after the pause", func() (bool, error) {
		return greeting() == "paused edit", nil
	})
	waitReady(t, app)
	if conditions.Get(app, reconciler.ConditionPaused) != nil {
		t.Fatalf("Paused left after resuming: %+v", app.Status.Conditions)
	}

	kubectl("annotate", "webapp/ops", reconciler.AnnotationReconcileRequestedAt+"=req-1")
	e2etest.WaitFor(t, 30*time.Second, "status.lastHandledReconcileAt", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(app), app)
		return app.Status.LastHandledReconcileAt == "req-1", err
	})
}

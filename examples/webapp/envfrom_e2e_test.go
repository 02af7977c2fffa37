package main

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/examples/internal/e2etest"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/controller"
)

// TestEnvFromConfigMapChangeRollsExactlyItsWebApps: a WebApp waits
// (Reconciling, not Stalled) for the ConfigMap its spec.envFrom names; once
// it exists the pods get it as environment; a change to its data rolls the
// pods of exactly the WebApps that name it (reconciler.References), not
// the others.
func TestEnvFromConfigMapChangeRollsExactlyItsWebApps(t *testing.T) {
	ns := env.Namespace(t)
	op := startOperator(t, ns, nil)
	ctx := e2etest.Context(t, 2*time.Minute)
	a, b, other := newApp(ns, "a", 1), newApp(ns, "b", 1), newApp(ns, "other", 1)
	a.Spec.EnvFrom, b.Spec.EnvFrom = "shared-env", "shared-env"
	for _, app := range []*webappv1.WebApp{a, b, other} {
		if err := env.Client.Create(ctx, app); err != nil {
			t.Fatal(err)
		}
	}
	e2etest.WaitFor(t, 30*time.Second, "a waits for its ConfigMap", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), a)
		c := conditions.Get(a, conditions.Reconciling)
		return c != nil && c.Reason == "EnvFromNotFound" && conditions.Get(a, conditions.Stalled) == nil, err
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared-env"}, Data: map[string]string{"MODE": "blue"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	for _, app := range []*webappv1.WebApp{a, b, other} {
		waitReady(t, app)
	}
	envHash := func(name string) string {
		var dep appsv1.Deployment
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
			t.Fatal(err)
		}
		if name != "other" && (len(dep.Spec.Template.Spec.Containers[0].EnvFrom) != 1 || dep.Spec.Template.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name != "shared-env") {
			t.Fatalf("%s: envFrom %+v", name, dep.Spec.Template.Spec.Containers[0].EnvFrom)
		}
		return dep.Spec.Template.Annotations[controller.AnnotationEnvHash]
	}
	ha, hb, ho := envHash("a"), envHash("b"), envHash("other")
	if ha == "" || hb == "" || ho != "" {
		t.Fatalf("env hashes a=%q b=%q other=%q", ha, hb, ho)
	}
	op.requests.Reset()
	cm.Data["MODE"] = "green"
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	e2etest.WaitFor(t, 30*time.Second, "a and b roll", func() (bool, error) {
		return envHash("a") != ha && envHash("b") != hb, nil
	})
	time.Sleep(time.Second)
	if got := op.requests.Count("patch", "deployments.apps"); got != 2 {
		t.Fatalf("%d Deployment patches after the ConfigMap change, want 2 (a and b):\n%s", got, op.requests)
	}
}

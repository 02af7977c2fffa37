package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/opkit/opkit/examples/internal/e2etest"
	"github.com/opkit/opkit/examples/webapp/config"
	"github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/examples/webapp/registry"
)

// TestNamespaceScopedWithOnlyARole (issue 17, point 9): the webapp operator
// installed namespace-scoped — its generated rules granted by a Role in each
// of two namespaces and nowhere else, the manager's cache restricted to
// them — converges a WebApp in each, and never lists or watches anything
// cluster-wide (the request counter sees only namespaced lists and watches;
// RBAC would refuse any other).
func TestNamespaceScopedWithOnlyARole(t *testing.T) {
	ns1, ns2 := env.Namespace(t), env.Namespace(t)
	ctx := e2etest.Context(t, 2*time.Minute)
	objs, err := config.RBAC()
	if err != nil {
		t.Fatal(err)
	}
	limited, limitedClient := e2etest.UserBoundTo(t, env, objs, "manager-role", ns1, ns2)
	if err := limitedClient.List(ctx, &corev1.ConfigMapList{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the namespaced operator can list ConfigMaps cluster-wide: %v", err)
	}
	mgr := e2etest.NewManager(t, limited, env.Scheme, ns1, func(o *manager.Options) {
		o.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{ns1: {}, ns2: {}}}
	})
	if err := controller.Setup(mgr, controller.Options{Registry: registry.New(), Observability: mgr.Observability}); err != nil {
		t.Fatal(err)
	}
	mgr.Run(t)
	apps := []*struct{ ns, name string }{{ns1, "one"}, {ns2, "two"}}
	for _, a := range apps {
		app := newApp(a.ns, a.name, 1)
		if err := env.Client.Create(ctx, app); err != nil {
			t.Fatal(err)
		}
		waitReady(t, app)
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: a.ns, Name: a.name + "-config"}, &corev1.ConfigMap{}); err != nil {
			t.Fatalf("child ConfigMap in %s: %v", a.ns, err)
		}
	}
	snap := mgr.Requests.Snapshot()
	listed := 0
	for req := range snap {
		if req.Verb != "list" && req.Verb != "watch" {
			continue
		}
		per := mgr.Requests.ByNamespace(req.Verb, req.Resource)
		if n := per[""]; n > 0 {
			t.Errorf("%d cluster-wide %s (namespaces: %v)", n, req, per)
		}
		for ns, n := range per {
			if ns != ns1 && ns != ns2 && ns != "" {
				t.Errorf("%d %s in namespace %s, outside the operator's", n, req, ns)
			}
		}
		listed++
	}
	if listed == 0 {
		t.Fatalf("no list or watch counted:\n%s", mgr.Requests)
	}
	t.Logf("requests:\n%s", mgr.Requests)
}

package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/examples/internal/e2etest"
	"github.com/opkit/opkit/examples/webapp/config"
	"github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/examples/webapp/registry"
	"github.com/opkit/opkit/nscache"
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

// TestNamespacesChosenByALabelWhileRunning (issue 17, point 9, composed):
// the webapp operator on an nscache.New cache serves the namespaces
// labelled for it, as a user holding only a Role in each namespace it may
// serve plus get/list/watch on namespaces. A WebApp in a namespace not
// (yet) labelled is not reconciled; labelling the namespace while the
// operator runs makes it converge; no namespaced kind is ever listed or
// watched cluster-wide.
func TestNamespacesChosenByALabelWhileRunning(t *testing.T) {
	served, later := env.Namespace(t), env.Namespace(t)
	ctx := e2etest.Context(t, 2*time.Minute)
	const label = "webapp.example.com/managed"
	objs, err := config.RBAC()
	if err != nil {
		t.Fatal(err)
	}
	limited, _ := e2etest.UserBoundTo(t, env, objs, "manager-role", served, later)
	grantNamespaceReads(ctx, t, limited)
	setLabel := func(ns string) {
		t.Helper()
		var n corev1.Namespace
		if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
			t.Fatal(err)
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[label] = "true"
		if err := env.Client.Update(ctx, &n); err != nil {
			t.Fatal(err)
		}
	}
	setLabel(served)
	mgr := e2etest.NewManager(t, limited, env.Scheme, served, func(o *manager.Options) {
		o.Cache = cache.Options{}
		o.NewCache = nscache.New(labels.SelectorFromSet(labels.Set{label: "true"}))
	})
	if err := controller.Setup(mgr, controller.Options{Registry: registry.New(), Observability: mgr.Observability}); err != nil {
		t.Fatal(err)
	}
	mgr.Run(t)
	one := newApp(served, "one", 1)
	if err := env.Client.Create(ctx, one); err != nil {
		t.Fatal(err)
	}
	waitReady(t, one)
	two := newApp(later, "two", 1)
	if err := env.Client.Create(ctx, two); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(two), two); err != nil {
		t.Fatal(err)
	}
	if len(two.Finalizers) > 0 || conditions.Get(two, conditions.Ready) != nil {
		t.Fatalf("a WebApp in a namespace not labelled was reconciled: %v %+v", two.Finalizers, two.Status.Conditions)
	}
	start := time.Now()
	setLabel(later)
	waitReady(t, two)
	t.Logf("labelled namespace converged in %v", time.Since(start).Round(time.Millisecond))
	for req := range mgr.Requests.Snapshot() {
		if (req.Verb == "list" || req.Verb == "watch") && req.Resource != "namespaces" {
			if n := mgr.Requests.ByNamespace(req.Verb, req.Resource)[""]; n > 0 {
				t.Errorf("%d cluster-wide %s", n, req)
			}
		}
	}
}

// grantNamespaceReads gives the user cfg authenticates as (its client
// certificate's common name) get, list and watch on namespaces: what
// nscache needs cluster-wide.
func grantNamespaceReads(ctx context.Context, t *testing.T, cfg *rest.Config) {
	t.Helper()
	block, _ := pem.Decode(cfg.CertData)
	if block == nil {
		t.Fatal("the limited config has no client certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	user := cert.Subject.CommonName
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-namespaces"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
}

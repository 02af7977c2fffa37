package testenv

import (
	"context"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// UserBoundTo creates a user who holds exactly clusterRole's rules, to run
// an operator with what its manifests grant and nothing more (the admin
// config the harness hands out can do anything, so a test on it cannot show
// that the generated RBAC is sufficient). clusterRole is the operator's
// ClusterRole as its manifests declare it, typed (*rbacv1.ClusterRole) or
// unstructured; its rules are granted, under a name unique to the test, to a
// user of that name — cluster-wide (a ClusterRole and ClusterRoleBinding),
// or, when namespaces are given, only in those namespaces (a Role and
// RoleBinding in each: how a namespace-scoped operator is installed; the
// rules hold nowhere else, and nothing cluster-wide is granted) — and everything is deleted
// when the test ends. It returns a config and a client that authenticate as
// that user (a client certificate the control plane trusts). It fails the
// test when clusterRole is not a ClusterRole or cannot be created.
func (e *Env) UserBoundTo(tb testing.TB, clusterRole client.Object, namespaces ...string) (*rest.Config, client.Client) {
	tb.Helper()
	cr := &rbacv1.ClusterRole{}
	switch o := clusterRole.(type) {
	case *rbacv1.ClusterRole:
		cr.Rules, cr.AggregationRule = o.Rules, o.AggregationRule
	case *unstructured.Unstructured:
		if o.GetKind() != "ClusterRole" {
			tb.Fatalf("testenv: UserBoundTo: %s %s is not a ClusterRole", o.GetKind(), o.GetName())
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, cr); err != nil {
			tb.Fatalf("testenv: UserBoundTo: %v", err)
		}
	default:
		tb.Fatalf("testenv: UserBoundTo: %T is not a ClusterRole", clusterRole)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := clusterRole.GetName() + "-" + utilrand.String(6)
	var created []client.Object
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := len(created) - 1; i >= 0; i-- {
			_ = e.Client.Delete(ctx, created[i])
		}
	})
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}
	var objs []client.Object
	if len(namespaces) == 0 {
		objs = append(objs,
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: cr.Rules, AggregationRule: cr.AggregationRule},
			&rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			})
	}
	for _, ns := range namespaces {
		// A Role of the same rules, so that nothing cluster-wide is granted.
		objs = append(objs,
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: cr.Rules},
			&rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			})
	}
	for _, o := range objs {
		if err := e.Client.Create(ctx, o); err != nil {
			tb.Fatalf("testenv: UserBoundTo: create %T %s: %v", o, name, err)
		}
		created = append(created, o)
	}
	authn, err := e.Envtest.AddUser(envtest.User{Name: name}, &rest.Config{QPS: 100, Burst: 200})
	if err != nil {
		tb.Fatalf("testenv: UserBoundTo: %v", err)
	}
	cfg := authn.Config()
	c, err := client.New(cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		tb.Fatalf("testenv: UserBoundTo: %v", err)
	}
	return cfg, c
}

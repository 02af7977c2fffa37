package testenv

import (
	"context"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// UserBoundTo creates a user who holds exactly clusterRole's rules, to run
// an operator with what its manifests grant and nothing more (the admin
// config the harness hands out can do anything, so a test on it cannot show
// that the generated RBAC is sufficient). clusterRole is the operator's
// ClusterRole as its manifests declare it, typed (*rbacv1.ClusterRole) or
// unstructured; a copy is created under a name unique to the test, with a
// ClusterRoleBinding to a user of that name, and both are deleted when the
// test ends. It returns a config and a client that authenticate as that user
// (a client certificate the control plane trusts). It fails the test when
// clusterRole is not a ClusterRole or cannot be created.
func (e *Env) UserBoundTo(tb testing.TB, clusterRole client.Object) (*rest.Config, client.Client) {
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
	user := &rbacv1.ClusterRole{
		ObjectMeta:      metav1.ObjectMeta{GenerateName: clusterRole.GetName() + "-"},
		Rules:           cr.Rules,
		AggregationRule: cr.AggregationRule,
	}
	if err := e.Client.Create(ctx, user); err != nil {
		tb.Fatalf("testenv: UserBoundTo: create ClusterRole: %v", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user.Name}},
	}
	if err := e.Client.Create(ctx, binding); err != nil {
		_ = e.Client.Delete(ctx, user)
		tb.Fatalf("testenv: UserBoundTo: create ClusterRoleBinding: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = e.Client.Delete(ctx, binding)
		_ = e.Client.Delete(ctx, user)
	})
	authn, err := e.Envtest.AddUser(envtest.User{Name: user.Name}, &rest.Config{QPS: 100, Burst: 200})
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

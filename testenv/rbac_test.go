package testenv_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestUserBoundToHoldsExactlyTheRole: the user can do what the role grants
// and is refused the rest, for a typed and an unstructured role.
func TestUserBoundToHoldsExactlyTheRole(t *testing.T) {
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	role := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(role)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]client.Object{"typed": role, "unstructured": &unstructured.Unstructured{Object: content}} {
		t.Run(name, func(t *testing.T) {
			_, c := env.UserBoundTo(t, r)
			if err := c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns)); err != nil {
				t.Fatalf("the role grants list configmaps: %v", err)
			}
			if err := c.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
				t.Fatalf("list secrets: %v, want Forbidden", err)
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}}
			if err := c.Create(ctx, cm); !apierrors.IsForbidden(err) {
				t.Fatalf("create configmap: %v, want Forbidden", err)
			}
		})
	}
}

// TestUserBoundInNamespacesHoldsTheRoleThereOnly: with namespaces, the rules
// hold in each of them and nowhere else, and not cluster-wide.
func TestUserBoundInNamespacesHoldsTheRoleThereOnly(t *testing.T) {
	a, b, other := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}
	_, c := env.UserBoundTo(t, role, a, b)
	for _, ns := range []string{a, b} {
		if err := c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns)); err != nil {
			t.Fatalf("list configmaps in %s: %v", ns, err)
		}
	}
	if err := c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(other)); !apierrors.IsForbidden(err) {
		t.Fatalf("list configmaps in another namespace: %v, want Forbidden", err)
	}
	if err := c.List(ctx, &corev1.ConfigMapList{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list configmaps cluster-wide: %v, want Forbidden", err)
	}
}

package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/examples/internal/e2etest"
	tenancyv1 "github.com/opkit/opkit/examples/tenant/api/v1alpha1"
	"github.com/opkit/opkit/examples/tenant/config"
	"github.com/opkit/opkit/examples/tenant/controller"
)

// mergePatch is a JSON merge patch of body.
func mergePatch(body string) client.Patch {
	return client.RawPatch("application/merge-patch+json", []byte(body))
}

// forbidden fails the test unless err is the API server's 403.
func forbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: want Forbidden, got %v", what, err)
	}
}

func allowed(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: want allowed, got %v", what, err)
	}
}

func pod(ns, name string, limits corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "registry.example/app:1",
			Resources: corev1.ResourceRequirements{Limits: limits},
		}}},
	}
}

// TestTenantAdminsAreConfinedToTheirNamespaces, asked of the API server as
// the admins themselves (impersonation): tenant A's admin works in A's
// namespaces; cannot read, list or change anything of tenant B's, nor list
// namespaces, nor create or edit a Tenant (her own included), nor relabel her
// namespace; and cannot escape the quota or the limits — not by editing them,
// not by deleting them, not by exceeding them.
func TestTenantAdminsAreConfinedToTheirNamespaces(t *testing.T) {
	ctx := e2etest.Context(t, 3*time.Minute)
	op := startOperator(t, 2)
	a := op.tenant(unique("ta"), tenancyv1.Admins{Users: []string{"alice"}})
	b := op.tenant(unique("tb"), tenancyv1.Admins{Groups: []string{"team-b"}})
	aNS, bNS := a.Name+"-work", b.Name+"-work"
	a.Spec.Namespaces = []tenancyv1.Namespace{tenancyv1.Namespace(aNS)}
	b.Spec.Namespaces = []tenancyv1.Namespace{tenancyv1.Namespace(bNS)}
	a.Spec.Quota = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2"), corev1.ResourceLimitsMemory: resource.MustParse("1Gi")}
	create(ctx, t, a, b)
	waitReady(ctx, t, a)
	waitReady(ctx, t, b)
	alice, bob := as(t, "alice"), as(t, "bob", "team-b", "system:authenticated")

	// In her own namespace alice works.
	allowed(t, "alice creates a ConfigMap in her namespace", alice.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: aNS, Name: "settings"}}))
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: aNS, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}},
			},
		},
	}
	allowed(t, "alice creates a Deployment in her namespace", alice.Create(ctx, dep))
	allowed(t, "alice reads her quota", alice.Get(ctx, client.ObjectKey{Namespace: aNS, Name: controller.QuotaName}, &corev1.ResourceQuota{}))
	allowed(t, "alice reads her namespace", alice.Get(ctx, client.ObjectKey{Name: aNS}, &corev1.Namespace{}))
	allowed(t, "bob (through group team-b) lists Pods in his namespace", bob.List(ctx, &corev1.PodList{}, client.InNamespace(bNS)))

	// Nothing of tenant B's.
	forbidden(t, "alice lists Pods in B's namespace", alice.List(ctx, &corev1.PodList{}, client.InNamespace(bNS)))
	forbidden(t, "alice lists ConfigMaps in B's namespace", alice.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(bNS)))
	forbidden(t, "alice reads B's namespace", alice.Get(ctx, client.ObjectKey{Name: bNS}, &corev1.Namespace{}))
	forbidden(t, "alice reads B's quota", alice.Get(ctx, client.ObjectKey{Namespace: bNS, Name: controller.QuotaName}, &corev1.ResourceQuota{}))
	forbidden(t, "alice creates a ConfigMap in B's namespace", alice.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: bNS, Name: "x"}}))
	forbidden(t, "alice deletes B's allow policy", alice.Delete(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: bNS, Name: controller.AllowPolicyName}}))
	forbidden(t, "bob reads A's ConfigMap", bob.Get(ctx, client.ObjectKey{Namespace: aNS, Name: "settings"}, &corev1.ConfigMap{}))
	forbidden(t, "alice lists namespaces", alice.List(ctx, &corev1.NamespaceList{}))
	forbidden(t, "alice lists Pods cluster-wide", alice.List(ctx, &corev1.PodList{}))

	// Tenants are the platform's.
	forbidden(t, "alice creates a Tenant", alice.Create(ctx, op.tenant(unique("mine"), tenancyv1.Admins{Users: []string{"alice"}}, unique("mine"))))
	forbidden(t, "alice adds B's namespace to her Tenant", alice.Patch(ctx, a.DeepCopy(), mergePatch(`{"spec":{"namespaces":["`+aNS+`","`+bNS+`"]}}`)))
	forbidden(t, "alice reads her Tenant", alice.Get(ctx, client.ObjectKeyFromObject(a), &tenancyv1.Tenant{}))
	forbidden(t, "alice labels her namespace as B's (to pass B's network policy)",
		alice.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: aNS}}, mergePatch(`{"metadata":{"labels":{"`+controller.LabelTenant+`":"`+b.Name+`"}}}`)))

	// No way around the quota and the limits.
	forbidden(t, "alice raises her quota", alice.Patch(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: aNS, Name: controller.QuotaName}}, mergePatch(`{"spec":{"hard":{"pods":"100"}}}`)))
	forbidden(t, "alice deletes her quota", alice.Delete(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: aNS, Name: controller.QuotaName}}))
	forbidden(t, "alice creates a second quota", alice.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: aNS, Name: "mine"}}))
	forbidden(t, "alice deletes her LimitRange", alice.Delete(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: aNS, Name: controller.LimitRangeName}}))
	forbidden(t, "alice deletes her default-deny policy", alice.Delete(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: aNS, Name: controller.DenyPolicyName}}))
	forbidden(t, "alice binds herself another role", alice.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: aNS, Name: "more"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
	}))
	forbidden(t, "alice reads Secrets (tenant-admin grants none)", alice.List(ctx, &corev1.SecretList{}, client.InNamespace(aNS)))
	err := alice.Create(ctx, pod(aNS, "huge", corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}))
	forbidden(t, "alice creates a Pod above the LimitRange maximum", err)
	// The quota's usage is computed by kube-controller-manager; admission
	// refuses pods until it has, so wait for the first one to be admitted.
	first := pod(aNS, "p0", nil)
	e2etest.WaitFor(t, 30*time.Second, "the quota controller has computed the quota's usage", func() (bool, error) {
		err := alice.Create(ctx, first)
		return err == nil, err
	})
	if got := first.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]; got.Cmp(controller.DefaultLimit[corev1.ResourceMemory]) != 0 {
		t.Errorf("the LimitRange did not default the Pod's memory limit: %v", first.Spec.Containers[0].Resources)
	}
	allowed(t, "alice creates a second Pod (quota pods=2)", alice.Create(ctx, pod(aNS, "p1", nil)))
	err = alice.Create(ctx, pod(aNS, "p2", nil))
	forbidden(t, "alice creates a third Pod (quota pods=2)", err)
	if err != nil && !strings.Contains(err.Error(), "exceeded quota") {
		t.Errorf("the third Pod was refused, but not by the quota: %v", err)
	}
}

// TestOperatorHoldsNoEscalateBindImpersonateOrWildcard: the generated role
// has no wildcard and none of the verbs that lift RBAC's escalation check,
// the API server agrees (SelfSubjectAccessReview as the operator's user), and
// the role holds every rule of tenant-admin — which is why the operator may
// bind tenant-admin without the bind verb.
func TestOperatorHoldsNoEscalateBindImpersonateOrWildcard(t *testing.T) {
	ctx := e2etest.Context(t, time.Minute)
	manager := role("manager-role")
	for _, r := range manager.Rules {
		for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.NonResourceURLs} {
			if slices.Contains(list, "*") {
				t.Errorf("wildcard in the operator's rule %+v", r)
			}
		}
		for _, v := range []string{"bind", "escalate", "impersonate"} {
			if slices.Contains(r.Verbs, v) {
				t.Errorf("the operator holds %q: %+v", v, r)
			}
		}
	}
	for _, r := range role(controller.DefaultAdminRole).Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if !slices.ContainsFunc(manager.Rules, func(m rbacv1.PolicyRule) bool {
						return slices.Contains(m.APIGroups, g) && slices.Contains(m.Resources, res) && slices.Contains(m.Verbs, v) && len(m.ResourceNames) == 0
					}) {
						t.Errorf("tenant-admin grants %s %s.%s, which the operator does not hold: it could not bind tenant-admin", v, res, g)
					}
				}
			}
		}
	}

	cfg, _ := e2etest.UserBoundTo(t, env, e2etest.Must(config.RBAC()), "manager-role")
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, attr := range []authorizationv1.ResourceAttributes{
		{Group: rbacv1.GroupName, Resource: "clusterroles", Verb: "bind", Name: "cluster-admin"},
		{Group: rbacv1.GroupName, Resource: "clusterroles", Verb: "escalate"},
		{Group: rbacv1.GroupName, Resource: "roles", Verb: "bind", Namespace: "default"},
		{Resource: "users", Verb: "impersonate", Name: "alice"},
		{Resource: "serviceaccounts", Verb: "impersonate", Namespace: "kube-system"},
		{Resource: "secrets", Verb: "list"},
		{Group: rbacv1.GroupName, Resource: "clusterrolebindings", Verb: "create"},
	} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attr}}
		if err := c.Create(ctx, review); err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed {
			t.Errorf("the operator's user may %s %s %s/%s", attr.Verb, attr.Resource, attr.Namespace, attr.Name)
		}
	}
}

// TestTenantAskingForClusterAdminIsRefusedByTheAPIServer: a Tenant naming
// cluster-admin as its admin role is refused by the API server's RBAC
// escalation check (the operator cannot grant what it does not hold) and
// goes Stalled with that reason before anything is created; a Ready Tenant
// switched to cluster-admin is Stalled with its bindings left as they were;
// switched back, it is Ready again.
func TestTenantAskingForClusterAdminIsRefusedByTheAPIServer(t *testing.T) {
	ctx := e2etest.Context(t, 2*time.Minute)
	op := startOperator(t, 2)
	greedy := op.tenant(unique("greedy"), tenancyv1.Admins{Users: []string{"mallory"}})
	greedy.Spec.Namespaces = []tenancyv1.Namespace{tenancyv1.Namespace(greedy.Name + "-a"), tenancyv1.Namespace(greedy.Name + "-b")}
	greedy.Spec.AdminRole = "cluster-admin"
	create(ctx, t, greedy)
	msg := waitStalled(ctx, t, greedy, controller.ReasonRoleNotGrantable)
	if !containsAll(msg, "cluster-admin", "attempting to grant RBAC permissions not currently held") {
		t.Errorf("the Stalled message does not carry the API server's escalation refusal: %q", msg)
	}
	for _, ns := range greedy.Spec.Namespaces {
		if ok, err := gone(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: string(ns)}}); !ok {
			t.Errorf("namespace %s was created for a refused Tenant (%v)", ns, err)
		}
	}
	var rbs rbacv1.RoleBindingList
	if err := env.Client.List(ctx, &rbs, client.MatchingLabels{ensure.LabelOwnerUID: string(greedy.UID)}); err != nil || len(rbs.Items) != 0 {
		t.Errorf("RoleBindings of the refused Tenant: %d (%v)", len(rbs.Items), err)
	}
	// No hot loop: a terminal refusal is not retried until the Tenant changes.
	op.requests.Reset()
	time.Sleep(2 * time.Second)
	if n := op.requests.Count("create", "rolebindings.rbac.authorization.k8s.io"); n != 0 {
		t.Errorf("the refused binding was tried %d more times without any change", n)
	}

	// A working Tenant asking for more later keeps what it had.
	ok := op.tenant(unique("ok"), tenancyv1.Admins{Users: []string{"erin"}})
	ns := ok.Name + "-a"
	ok.Spec.Namespaces = []tenancyv1.Namespace{tenancyv1.Namespace(ns)}
	create(ctx, t, ok)
	waitReady(ctx, t, ok)
	mutate(ctx, t, ok, func(tn *tenancyv1.Tenant) { tn.Spec.AdminRole = "cluster-admin" })
	waitStalled(ctx, t, ok, controller.ReasonRoleNotGrantable)
	checkNamespace(ctx, t, ok, ns, controller.DefaultAdminRole)
	forbidden(t, "erin lists Secrets", as(t, "erin").List(ctx, &corev1.SecretList{}, client.InNamespace(ns)))
	mutate(ctx, t, ok, func(tn *tenancyv1.Tenant) { tn.Spec.AdminRole = "" })
	waitReady(ctx, t, ok)
}

// TestTenantEditorCannotUseTheOperatorToReachAnotherNamespace (confused
// deputy): a user who may edit Tenants but holds no RBAC rights cannot bind
// anyone in a namespace herself, nor get the operator to do it — not in
// another tenant's namespace, not in an existing namespace nobody manages,
// not in kube-system: the Tenant goes Stalled (NamespaceNotOwned), nothing is
// written there, and its admins stay locked out.
func TestTenantEditorCannotUseTheOperatorToReachAnotherNamespace(t *testing.T) {
	ctx := e2etest.Context(t, 2*time.Minute)
	op := startOperator(t, 2)
	victim := op.tenant(unique("victim"), tenancyv1.Admins{Users: []string{"victor"}})
	victimNS := victim.Name + "-prod"
	victim.Spec.Namespaces = []tenancyv1.Namespace{tenancyv1.Namespace(victimNS)}
	mine := op.tenant(unique("mine"), tenancyv1.Admins{Users: []string{"eve"}})
	mineNS := mine.Name + "-dev"
	mine.Spec.Namespaces = []tenancyv1.Namespace{tenancyv1.Namespace(mineNS)}
	create(ctx, t, victim, mine)
	waitReady(ctx, t, victim)
	waitReady(ctx, t, mine)
	unmanaged := env.Namespace(t)

	editorRole := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: unique("tenant-editor")},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{tenancyv1.GroupVersion.Group}, Resources: []string{"tenants"},
			Verbs: []string{"get", "list", "watch", "update", "patch"},
		}},
	}
	e2etest.Must(struct{}{}, env.Client.Create(ctx, editorRole))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), editorRole) })
	editorBinding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: editorRole.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: editorRole.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "eve-editor"}},
	}
	e2etest.Must(struct{}{}, env.Client.Create(ctx, editorBinding))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), editorBinding) })
	editor, eve := as(t, "eve-editor"), as(t, "eve")

	// On her own, the editor cannot grant anything anywhere.
	forbidden(t, "the editor binds eve in the victim's namespace herself", editor.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: victimNS, Name: "eve"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: controller.DefaultAdminRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "eve"}},
	}))

	for _, target := range []string{victimNS, unmanaged, "kube-system"} {
		before := &corev1.Namespace{}
		e2etest.Must(struct{}{}, env.Client.Get(ctx, client.ObjectKey{Name: target}, before))
		patch := `{"spec":{"namespaces":["` + mineNS + `","` + target + `"]}}`
		allowed(t, "the editor adds "+target+" to her Tenant", editor.Patch(ctx, mine.DeepCopy(), mergePatch(patch)))
		msg := waitStalled(ctx, t, mine, controller.ReasonNamespaceNotOwned)
		if !strings.Contains(msg, target) || phases(mine)[target] != tenancyv1.NamespaceRefused {
			t.Errorf("refusal of %s: message %q, status %v", target, msg, phases(mine))
		}
		after := &corev1.Namespace{}
		e2etest.Must(struct{}{}, env.Client.Get(ctx, client.ObjectKey{Name: target}, after))
		if after.ResourceVersion != before.ResourceVersion || after.Labels[ensure.LabelOwnerUID] == string(mine.UID) {
			t.Errorf("namespace %s was changed by the refused Tenant: labels %v", target, after.Labels)
		}
		var rbs rbacv1.RoleBindingList
		e2etest.Must(struct{}{}, env.Client.List(ctx, &rbs, client.InNamespace(target), client.MatchingLabels{ensure.LabelOwnerUID: string(mine.UID)}))
		if len(rbs.Items) != 0 {
			t.Errorf("the operator bound %v in %s for the editor's Tenant", rbs.Items, target)
		}
		forbidden(t, "eve lists Pods in "+target, eve.List(ctx, &corev1.PodList{}, client.InNamespace(target)))
		// Back to her own namespace: Ready again.
		allowed(t, "the editor restores her Tenant", editor.Patch(ctx, mine.DeepCopy(), mergePatch(`{"spec":{"namespaces":["`+mineNS+`"]}}`)))
		waitReady(ctx, t, mine)
	}
	checkNamespace(ctx, t, victim, victimNS, controller.DefaultAdminRole)
}

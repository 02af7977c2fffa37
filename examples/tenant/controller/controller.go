// Package controller is the tenant example operator's logic, composed from
// opkit's packages through the reconciler builder: a cluster-scoped Tenant
// owns namespaces and, in each, a ResourceQuota, a LimitRange, a default-deny
// and an allow-within-tenant NetworkPolicy, and a RoleBinding of its admins;
// a finalizer deletes the namespaces and lets the Tenant go only once they are
// gone.
//
// How the children are linked. The Tenant is cluster-scoped, so ensure gives
// every child — the Namespaces and the objects in them — a controller
// ownerReference to it (an ownerReference may point from any namespace to a
// cluster-scoped owner) as well as ensure's owner labels. The labels are what
// the operator works with: its caches of the namespaced kinds hold only objects
// carrying its manager label, children are found through the owner index
// (prune, status), and a child's event reaches its Tenant through the
// ownerReference. The ownerReferences are the garbage collector's backstop:
// were the finalizer removed by hand, the namespaces would still go with the
// Tenant.
//
// Security rules the operator keeps:
//
//   - A namespace that exists and was not created by this Tenant is never
//     adopted: the Tenant goes Stalled (NamespaceNotOwned) and nothing is
//     written, so a person who can edit a Tenant cannot use the operator to
//     reach into someone else's namespace.
//   - The operator holds no bind, escalate or impersonate permission. Before
//     it creates a RoleBinding of a role it has not bound yet, it asks the API
//     server with a dry-run create, which runs RBAC's escalation check: a role
//     granting anything the operator does not hold itself (cluster-admin) is
//     refused there, and the Tenant goes Stalled (RoleNotGrantable) before
//     anything is created.
//   - A namespace removed from spec.namespaces is deleted, with everything in
//     it, only behind the tenancy.example.com/allow-namespace-deletion gate.
package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/ensure"
	tenancyv1 "github.com/opkit/opkit/examples/tenant/api/v1alpha1"
	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/reconciler"
)

// Name is the controller's name: field owner, ensure's manager label, event
// source, metrics label.
const Name = "tenant"

// FinalizerName guards the deletion of the tenant's namespaces.
const FinalizerName = "tenancy.example.com/delete-namespaces"

// DefaultAdminRole is the ClusterRole bound to a Tenant's admins when its
// spec.adminRole is empty (config/rbac/tenant_admin_role.yaml).
const DefaultAdminRole = "tenant-admin"

// Reasons of the Tenant's conditions.
const (
	// ReasonNamespaceNotOwned (Stalled): a listed namespace exists and this Tenant did not create it.
	ReasonNamespaceNotOwned = "NamespaceNotOwned"
	// ReasonRoleNotGrantable (Stalled): the API server refused to let the operator bind the admin role.
	ReasonRoleNotGrantable = "RoleNotGrantable"
	// ReasonNamespaceDeletionBlocked (Stalled): a namespace removed from the list is kept behind the deletion gate.
	ReasonNamespaceDeletionBlocked = "NamespaceDeletionBlocked"
	// ReasonNamespacesTerminating (Reconciling=True, Ready=False): namespaces are being deleted.
	ReasonNamespacesTerminating = "NamespacesTerminating"
)

// Options configure [Setup].
type Options struct {
	// Observability, when set, wires metrics, traces and events.
	Observability *observability.Observability
	// DefaultAdminRole replaces [DefaultAdminRole] for Tenants without spec.adminRole.
	DefaultAdminRole string
	// Concurrency is MaxConcurrentReconciles (default 4).
	Concurrency int
}

// CacheOptions returns the manager cache options the operator needs: the
// Tenants selector picks (everything when nil: an operator can serve a
// labelled subset, as the tests do), managedFields stripped
// (reconciler.CacheOptions), and the namespaced child kinds cached only where
// they carry the operator's manager label — a platform operator watches
// RoleBindings and NetworkPolicies cluster-wide, and caching everyone's would
// cost memory for nothing. Namespaces are cached whole: the operator must
// see a namespace it did not create to refuse it.
func CacheOptions(tenants labels.Selector) cache.Options {
	o := reconciler.CacheOptions()
	mine := labels.SelectorFromSet(labels.Set{ensure.LabelManager: Name})
	o.ByObject = map[client.Object]cache.ByObject{
		&corev1.ResourceQuota{}:       {Label: mine},
		&corev1.LimitRange{}:          {Label: mine},
		&networkingv1.NetworkPolicy{}: {Label: mine},
		&rbacv1.RoleBinding{}:         {Label: mine},
	}
	if tenants != nil {
		o.ByObject[&tenancyv1.Tenant{}] = cache.ByObject{Label: tenants}
	}
	return o
}

// The operator's own rights.
// +kubebuilder:rbac:groups=tenancy.example.com,resources=tenants,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=tenancy.example.com,resources=tenants/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=tenancy.example.com,resources=tenants/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces;resourcequotas;limitranges,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// What the tenant-admin ClusterRole grants (config/rbac/tenant_admin_role.yaml).
// The operator holds no bind verb, so the API server lets it bind tenant-admin
// only because it holds each of these rules itself; a test checks that the
// two stay in step.
// +kubebuilder:rbac:groups="",resources=pods;services;configmaps;persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/log;events,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=get;list;watch;create;update;patch;delete

// Setup registers the tenant controller with mgr, whose cache should be
// configured with [CacheOptions].
func Setup(mgr manager.Manager, o Options) error {
	if o.DefaultAdminRole == "" {
		o.DefaultAdminRole = DefaultAdminRole
	}
	if o.Concurrency == 0 {
		o.Concurrency = 4
	}
	r := &tenants{client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), defaultRole: o.DefaultAdminRole}
	return reconciler.For(mgr, Name, func() *tenancyv1.Tenant { return &tenancyv1.Tenant{} }).
		Owns(&corev1.Namespace{}).
		Owns(&corev1.ResourceQuota{}).
		Owns(&corev1.LimitRange{}).
		Owns(&networkingv1.NetworkPolicy{}).
		// roleRef is immutable: a new admin role replaces the binding.
		Owns(&rbacv1.RoleBinding{}, reconciler.WithRecreateOnChange("roleRef")).
		Finalizer(FinalizerName, finalizer.WithStep("delete-namespaces", r.deleteNamespaces)).
		Children(r.desired).
		Status(r.status).
		Observability(o.Observability).
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: o.Concurrency}).
		Complete()
}

type tenants struct {
	client      client.Client // the manager's: reads from the cache
	apiReader   client.Reader // uncached: to verify deletion
	defaultRole string
}

func (r *tenants) role(t *tenancyv1.Tenant) string {
	if t.Spec.AdminRole != "" {
		return t.Spec.AdminRole
	}
	return r.defaultRole
}

// owned lists, from the cache, the namespaces carrying t's owner label.
func (r *tenants) owned(ctx context.Context, t *tenancyv1.Tenant) ([]corev1.Namespace, error) {
	var list corev1.NamespaceList
	if err := r.client.List(ctx, &list, client.MatchingLabels{ensure.LabelOwnerUID: string(t.UID)}); err != nil {
		return nil, fmt.Errorf("list the namespaces of Tenant %s: %w", t.Name, err)
	}
	return list.Items, nil
}

func gateOpen(t *tenancyv1.Tenant) bool {
	return t.Annotations[tenancyv1.AllowNamespaceDeletionAnnotation] == "true"
}

// desired is the children of every namespace t lists and of every namespace
// it no longer lists but must keep (deletion gate closed). It writes nothing
// and, when nothing needs checking, sends no request: a listed namespace that
// exists without t's owner label is refused (terminal, nothing ensured), and a
// role not yet bound is tried first with a dry-run.
func (r *tenants) desired(ctx context.Context, t *tenancyv1.Tenant) ([]client.Object, error) {
	var refused []string
	for _, ns := range t.Spec.Namespaces {
		var live corev1.Namespace
		err := r.client.Get(ctx, client.ObjectKey{Name: string(ns)}, &live)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, err
		case live.Labels[ensure.LabelOwnerUID] != string(t.UID):
			refused = append(refused, string(ns))
		}
	}
	owned, err := r.owned(ctx, t)
	if err != nil {
		return nil, err
	}
	if len(refused) > 0 {
		t.Status.Namespaces = observe(t, owned, refused)
		return nil, outcome.Terminal(ReasonNamespaceNotOwned, fmt.Errorf(
			"namespace %s exists and was not created by this Tenant; a Tenant never adopts an existing namespace: "+
				"remove it from spec.namespaces or choose another name", strings.Join(refused, ", ")))
	}
	keep := names(t.Spec.Namespaces)
	if !gateOpen(t) {
		for _, ns := range owned {
			if !slices.Contains(keep, ns.Name) && ns.DeletionTimestamp.IsZero() {
				keep = append(keep, ns.Name)
			}
		}
	}
	role := r.role(t)
	if err := r.checkGrantable(ctx, t, keep, role); err != nil {
		return nil, err
	}
	var objs []client.Object
	for _, ns := range keep {
		objs = append(objs, Children(t, ns, role)...)
	}
	return objs, nil
}

// checkGrantable asks the API server whether the operator may bind role to
// t's admins, unless every namespace in nss already has that binding: a
// server-side dry-run create of the RoleBinding in namespace default, which
// always exists. The dry-run runs RBAC's escalation check exactly as the real
// create would — the operator's rights come from a ClusterRoleBinding, so the
// answer is the same in every namespace — and persists nothing. A refusal is
// terminal: nothing of the Tenant is created or changed until its spec (or
// the role) changes.
func (r *tenants) checkGrantable(ctx context.Context, t *tenancyv1.Tenant, nss []string, role string) error {
	subjects := Subjects(t)
	if len(subjects) == 0 {
		return nil
	}
	bound := true
	for _, ns := range nss {
		var rb rbacv1.RoleBinding
		err := r.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: AdminBindingName}, &rb)
		if apierrors.IsNotFound(err) || err == nil && rb.RoleRef.Name != role {
			bound = false
			break
		}
		if err != nil {
			return err
		}
	}
	if bound {
		return nil
	}
	check := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, GenerateName: checkBindingPrefix},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   subjects,
	}
	err := r.client.Create(ctx, check, client.DryRunAll)
	if apierrors.IsForbidden(err) {
		return outcome.Terminal(ReasonRoleNotGrantable, fmt.Errorf(
			"the API server refuses to let the operator bind ClusterRole %s (the operator can grant only what it holds itself): %w", role, err))
	}
	return err
}

// status records each namespace's phase, and Ready once every listed
// namespace is in place and nothing is left to delete.
func (r *tenants) status(ctx context.Context, t *tenancyv1.Tenant, _ reconciler.Observed) error {
	owned, err := r.owned(ctx, t)
	if err != nil {
		return err
	}
	t.Status.Namespaces = observe(t, owned, nil)
	var retained, terminating []string
	for _, s := range t.Status.Namespaces {
		switch s.Phase {
		case tenancyv1.NamespaceRetained:
			retained = append(retained, s.Name)
		case tenancyv1.NamespaceTerminating:
			terminating = append(terminating, s.Name)
		}
	}
	if len(retained) > 0 {
		return outcome.Terminal(ReasonNamespaceDeletionBlocked, fmt.Errorf(
			"namespace %s was removed from spec.namespaces and is kept with everything in it: deleting it deletes its workloads and data. "+
				"Annotate the Tenant %s=true to delete it, or list it again", strings.Join(retained, ", "), tenancyv1.AllowNamespaceDeletionAnnotation))
	}
	if len(terminating) > 0 {
		msg := fmt.Sprintf("waiting for namespace %s to be deleted", strings.Join(terminating, ", "))
		// Ready says so too, rather than keep the reason of what came before.
		if err := conditions.Set(t, metav1.Condition{Type: conditions.Ready, Status: metav1.ConditionFalse, Reason: ReasonNamespacesTerminating, Message: msg}); err != nil {
			return err
		}
		return outcome.DependencyNotReady(ReasonNamespacesTerminating, msg, 5*time.Second)
	}
	return conditions.MarkReady(t, conditions.ReasonSucceeded, fmt.Sprintf("%d namespaces ready", len(t.Spec.Namespaces)))
}

// observe returns the phase of every namespace t lists or owns: listed ones
// in spec order, then the others by name. It is called after the children
// were ensured (a listed namespace not refused is then Ready unless it is
// terminating) or, with refused, instead of ensuring them (a listed namespace
// not yet created is then Pending).
func observe(t *tenancyv1.Tenant, owned []corev1.Namespace, refused []string) []tenancyv1.NamespaceStatus {
	byName := map[string]*corev1.Namespace{}
	for i := range owned {
		byName[owned[i].Name] = &owned[i]
	}
	var out []tenancyv1.NamespaceStatus
	listed := names(t.Spec.Namespaces)
	for _, n := range listed {
		st := tenancyv1.NamespaceStatus{Name: n, Phase: tenancyv1.NamespaceReady}
		switch ns, ok := byName[n]; {
		case slices.Contains(refused, n):
			st.Phase, st.Message = tenancyv1.NamespaceRefused, "exists and was not created by this Tenant"
		case ok && !ns.DeletionTimestamp.IsZero():
			st.Phase = tenancyv1.NamespaceTerminating
		case !ok && refused != nil:
			st.Phase = tenancyv1.NamespacePending
		}
		out = append(out, st)
	}
	var rest []tenancyv1.NamespaceStatus
	for _, ns := range owned {
		if slices.Contains(listed, ns.Name) {
			continue
		}
		st := tenancyv1.NamespaceStatus{Name: ns.Name, Phase: tenancyv1.NamespaceTerminating}
		if ns.DeletionTimestamp.IsZero() && !gateOpen(t) {
			st.Phase = tenancyv1.NamespaceRetained
			st.Message = "removed from spec.namespaces; kept until the Tenant carries " + tenancyv1.AllowNamespaceDeletionAnnotation + "=true"
		}
		rest = append(rest, st)
	}
	slices.SortFunc(rest, func(a, b tenancyv1.NamespaceStatus) int { return strings.Compare(a.Name, b.Name) })
	return append(out, rest...)
}

// deleteNamespaces is the finalizer's step: it deletes every namespace
// carrying t's owner label (the namespace controller deletes what is in
// them) and is done only once an uncached list finds none left.
func (r *tenants) deleteNamespaces(ctx context.Context, t *tenancyv1.Tenant) (finalizer.StepResult, error) {
	var list corev1.NamespaceList
	if err := r.apiReader.List(ctx, &list, client.MatchingLabels{ensure.LabelOwnerUID: string(t.UID)}); err != nil {
		return finalizer.StepResult{}, err
	}
	if len(list.Items) == 0 {
		return finalizer.Done(), nil
	}
	var errs []error
	for i := range list.Items {
		ns := &list.Items[i]
		if !ns.DeletionTimestamp.IsZero() {
			continue
		}
		uid := ns.UID
		if err := r.client.Delete(ctx, ns, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete namespace %s: %w", ns.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return finalizer.StepResult{}, err
	}
	// Each namespace's deletion reconciles the Tenant (Owns); the wait is a backstop.
	return finalizer.RequeueAfter(10 * time.Second), nil
}

func names(nss []tenancyv1.Namespace) []string {
	out := make([]string, len(nss))
	for i, n := range nss {
		out[i] = string(n)
	}
	return out
}

package controller

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/opkit/opkit/examples/tenant/api/v1alpha1"
)

// Names of the objects the operator creates in every tenant namespace.
const (
	QuotaName          = "tenant-quota"
	LimitRangeName     = "tenant-limits"
	DenyPolicyName     = "tenant-default-deny"
	AllowPolicyName    = "tenant-allow-same-tenant"
	AdminBindingName   = "tenant-admins"
	checkBindingPrefix = "tenant-grant-check-"
)

// LabelTenant is set on every tenant namespace to the Tenant's name. The
// allow-within-tenant NetworkPolicy selects the tenant's namespaces by it; only
// the operator (and cluster administrators) can change a Namespace's labels,
// so a tenant cannot claim another tenant's label.
const LabelTenant = "tenancy.example.com/tenant"

// LabelPodSecurity is the Pod Security Admission level every tenant
// namespace enforces (baseline: no privileged pods, host namespaces or host
// paths), so a tenant admin cannot break out of the namespace through a pod.
const LabelPodSecurity = "pod-security.kubernetes.io/enforce"

// Defaults for a Tenant that leaves spec.quota or spec.limits out.
var (
	DefaultQuota = corev1.ResourceList{
		corev1.ResourcePods:           resource.MustParse("20"),
		corev1.ResourceRequestsCPU:    resource.MustParse("4"),
		corev1.ResourceRequestsMemory: resource.MustParse("8Gi"),
		corev1.ResourceLimitsMemory:   resource.MustParse("16Gi"),
	}
	DefaultRequest = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	DefaultLimit   = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
	DefaultMax     = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}
)

// Children declares everything t has in namespace ns: the Namespace itself
// first (so a refused namespace stops the rest), then its ResourceQuota,
// LimitRange, default-deny and allow-within-tenant NetworkPolicies and, when
// t has admins, the RoleBinding of role to them.
func Children(t *tenancyv1.Tenant, ns, role string) []client.Object {
	objs := []client.Object{
		&corev1.Namespace{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
				LabelTenant:      t.Name,
				LabelPodSecurity: "baseline",
			}},
		},
		&corev1.ResourceQuota{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: QuotaName},
			Spec:       corev1.ResourceQuotaSpec{Hard: or(t.Spec.Quota, DefaultQuota)},
		},
		&corev1.LimitRange{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "LimitRange"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: LimitRangeName},
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
				Type:           corev1.LimitTypeContainer,
				DefaultRequest: or(t.Spec.Limits.DefaultRequest, DefaultRequest),
				Default:        or(t.Spec.Limits.Default, DefaultLimit),
				Max:            or(t.Spec.Limits.Max, DefaultMax),
			}}},
		},
		&networkingv1.NetworkPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: DenyPolicyName},
			// Every pod, no ingress rule: nothing may connect unless another policy allows it.
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
		},
		&networkingv1.NetworkPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: AllowPolicyName},
			Spec: networkingv1.NetworkPolicySpec{
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelTenant: t.Name}},
				}}}},
			},
		},
	}
	if subjects := Subjects(t); len(subjects) > 0 {
		objs = append(objs, &rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: AdminBindingName},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   subjects,
		})
	}
	return objs
}

// Subjects are t's admins as RBAC subjects: users, then groups.
func Subjects(t *tenancyv1.Tenant) []rbacv1.Subject {
	var s []rbacv1.Subject
	for _, u := range t.Spec.Admins.Users {
		s = append(s, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u})
	}
	for _, g := range t.Spec.Admins.Groups {
		s = append(s, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g})
	}
	return s
}

func or(l, def corev1.ResourceList) corev1.ResourceList {
	if len(l) > 0 {
		return l
	}
	return def.DeepCopy()
}

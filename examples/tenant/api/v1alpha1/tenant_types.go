package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AllowNamespaceDeletionAnnotation is the destructive-delete gate: a
// namespace removed from spec.namespaces is deleted — with everything in it —
// only while the Tenant carries this annotation with the exact value "true".
// Without it the namespace is kept as it is (status phase Retained) and the
// Tenant is Stalled with reason NamespaceDeletionBlocked until the annotation
// is added or the namespace is listed again. The gate stays open while the
// annotation is there: remove it after the deletion you meant.
const AllowNamespaceDeletionAnnotation = "tenancy.example.com/allow-namespace-deletion"

// Namespace is the name of a namespace a Tenant owns.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
type Namespace string

// Admins are the people who administer the tenant's namespaces.
type Admins struct {
	// Users are user names, as the API server authenticates them.
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MinLength=1
	// +listType=set
	// +optional
	Users []string `json:"users,omitempty"`
	// Groups are group names, as the API server authenticates them.
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MinLength=1
	// +listType=set
	// +optional
	Groups []string `json:"groups,omitempty"`
}

// ContainerLimits are the LimitRange of every tenant namespace, for each
// container: defaults for containers that set none, and a maximum.
type ContainerLimits struct {
	// DefaultRequest is the request of a container that sets none.
	// Left out: cpu 100m, memory 128Mi.
	// +optional
	DefaultRequest corev1.ResourceList `json:"defaultRequest,omitempty"`
	// Default is the limit of a container that sets none.
	// Left out: memory 256Mi.
	// +optional
	Default corev1.ResourceList `json:"default,omitempty"`
	// Max is the most a container may request or be limited to.
	// Left out: memory 4Gi.
	// +optional
	Max corev1.ResourceList `json:"max,omitempty"`
}

// TenantSpec is what a platform administrator declares for a tenant.
type TenantSpec struct {
	// Namespaces the tenant owns. The operator creates each one; a namespace
	// that already exists and was not created by this Tenant is never
	// adopted (the Tenant goes Stalled, reason NamespaceNotOwned). Removing a
	// name deletes that namespace only behind the
	// tenancy.example.com/allow-namespace-deletion annotation.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=set
	Namespaces []Namespace `json:"namespaces"`
	// Admins get AdminRole in each of the tenant's namespaces, and nowhere else.
	// +optional
	Admins Admins `json:"admins,omitempty"`
	// AdminRole is the ClusterRole bound to Admins in each namespace (a
	// RoleBinding per namespace, so it holds only there). Left out: the
	// operator's default, tenant-admin. The operator holds no bind or
	// escalate permission: the API server lets it bind only a role whose
	// every rule the operator itself holds, and refuses anything more (the
	// Tenant goes Stalled, reason RoleNotGrantable, with nothing created).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	AdminRole string `json:"adminRole,omitempty"`
	// Quota is the ResourceQuota of each namespace (spec.hard). Left out:
	// pods 20, requests.cpu 4, requests.memory 8Gi, limits.memory 16Gi.
	// +optional
	Quota corev1.ResourceList `json:"quota,omitempty"`
	// Limits is the LimitRange of each namespace.
	// +optional
	Limits ContainerLimits `json:"limits,omitempty"`
}

// NamespacePhase is where one of a tenant's namespaces stands.
// +kubebuilder:validation:Enum=Pending;Ready;Terminating;Retained;Refused
type NamespacePhase string

const (
	// NamespacePending means listed, but not yet created with all its objects.
	NamespacePending NamespacePhase = "Pending"
	// NamespaceReady means created, with its quota, limits, network policies and admin binding.
	NamespaceReady NamespacePhase = "Ready"
	// NamespaceTerminating means it is being deleted (removed from the list with the
	// deletion gate open, or the Tenant is being deleted); it leaves the
	// status once it is gone.
	NamespaceTerminating NamespacePhase = "Terminating"
	// NamespaceRetained means removed from the list, and kept as it was because
	// the deletion gate is closed.
	NamespaceRetained NamespacePhase = "Retained"
	// NamespaceRefused means listed, but it exists and this Tenant did not create
	// it, so it is left alone.
	NamespaceRefused NamespacePhase = "Refused"
)

// NamespaceStatus is one namespace the Tenant lists or still owns.
type NamespaceStatus struct {
	// Name of the namespace.
	Name string `json:"name"`
	// Phase of the namespace.
	Phase NamespacePhase `json:"phase"`
	// Message says why, for the phases that need it.
	// +optional
	Message string `json:"message,omitempty"`
}

// TenantStatus is what the operator observed.
type TenantStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Namespaces lists each namespace the Tenant lists or still owns.
	// +listType=map
	// +listMapKey=name
	// +optional
	Namespaces []NamespaceStatus `json:"namespaces,omitempty"`
	// Conditions: Ready, Reconciling, Stalled (kstatus-compatible).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Tenant is a team's share of the cluster: namespaces with a quota, default
// container limits, network isolation from everyone else, and its admins
// bound to a role in those namespaces only.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Namespaces",type=string,JSONPath=`.spec.namespaces`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Tenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TenantSpec   `json:"spec,omitempty"`
	Status TenantStatus `json:"status,omitempty"`
}

// TenantList is a list of Tenants.
//
// +kubebuilder:object:root=true
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tenant `json:"items"`
}

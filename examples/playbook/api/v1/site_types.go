package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SiteSpec is what a Site asks for. The operator passes it to its playbook
// as variables, field names in snake_case (message, replicas, http_port).
type SiteSpec struct {
	// Message is the page the site serves; it lands in the site's ConfigMap.
	// +kubebuilder:validation:MinLength=1
	Message string `json:"message"`
	// Replicas of the site's Deployment.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// HTTPPort is the Service's port (the playbook variable http_port).
	// +kubebuilder:default=8080
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	HTTPPort int32 `json:"httpPort,omitempty"`
}

// SiteStatus is what the operator reports: Running, Successful and Failed
// from the last playbook run (package ansible), Ready, Reconciling and
// Stalled from its outcome (kstatus).
type SiteStatus struct {
	// Conditions: Ready, Reconciling, Stalled, Running, Successful, Failed,
	// FinalizerCleanup.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Site is a small web site, made of a ConfigMap, a Deployment and a Service
// by an Ansible playbook.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Last run",type=string,JSONPath=`.status.conditions[?(@.type=="Running")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Site struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SiteSpec   `json:"spec,omitempty"`
	Status SiteStatus `json:"status,omitempty"`
}

// SiteList is a list of Sites.
//
// +kubebuilder:object:root=true
type SiteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Site `json:"items"`
}

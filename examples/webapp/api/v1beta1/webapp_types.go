package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/opkit/opkit/examples/webapp/api/v1"
)

// Container is the web server's container.
type Container struct {
	// Image is the container image reference (v1: spec.image).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._/:-]*[a-z0-9])?(@sha256:[a-f0-9]{64})?$`
	Image string `json:"image"`

	// Port is the container port the server listens on (v1: spec.port).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=8080
	// +optional
	Port int32 `json:"port,omitempty"`
}

// WebAppSpec is the v1beta1 shape of v1.WebAppSpec.
type WebAppSpec struct {
	// Container is the web server's image and port.
	Container Container `json:"container"`

	// Replicas is the desired number of pods (as v1).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Config becomes the data of the WebApp's ConfigMap (as v1).
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Config map[string]string `json:"config,omitempty"`
}

// WebApp is a stateless web application, v1beta1 shape; the operator works
// with apps.example.com/v1.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=wa,categories=all
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.container.image`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WebApp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec WebAppSpec `json:"spec"`
	// Status is the same in both versions.
	Status v1.WebAppStatus `json:"status,omitempty"`
}

// WebAppList is a list of WebApps.
//
// +kubebuilder:object:root=true
type WebAppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WebApp `json:"items"`
}

package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WebAppSpec is what the user asks for: a stateless web server with its
// configuration, run as a Deployment behind a Service.
type WebAppSpec struct {
	// Image is the container image reference, e.g. "nginx:1.27" or
	// "registry.example.com/team/app@sha256:…".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._/:-]*[a-z0-9])?(@sha256:[a-f0-9]{64})?$`
	Image string `json:"image"`

	// Replicas is the desired number of pods. Leave it unset when a
	// HorizontalPodAutoscaler scales the Deployment: the operator then never
	// touches the Deployment's replicas.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Port is the container port the server listens on; the Service exposes it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=8080
	// +optional
	Port int32 `json:"port,omitempty"`

	// Config becomes the data of the WebApp's ConfigMap, mounted at /etc/webapp.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Config map[string]string `json:"config,omitempty"`

	// Headless makes the Service headless (clusterIP: None).
	// +optional
	Headless bool `json:"headless,omitempty"`

	// EnvFrom names a ConfigMap in the WebApp's namespace whose keys become
	// environment variables of the web container. The operator watches it:
	// a change to its data rolls the pods (environment variables are read
	// only at start), and until it exists the WebApp waits, Reconciling.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	EnvFrom string `json:"envFrom,omitempty"`
}

// WebAppStatus is what the operator observed.
type WebAppStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas mirrors the Deployment's status.replicas (pods that exist, of
	// any version); the scale subresource reports it as status.replicas.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas mirrors the Deployment's ready replicas.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Selector is the label selector of the WebApp's pods, in the string
	// form (app.kubernetes.io/name=…,…) the scale subresource reports, so a
	// HorizontalPodAutoscaler targeting the WebApp finds the pods' metrics.
	// +optional
	Selector string `json:"selector,omitempty"`

	// Phase is a summary for humans; Conditions are the truth.
	// +optional
	Phase string `json:"phase,omitempty"`

	// URL is the in-cluster address of the Service.
	// +optional
	URL string `json:"url,omitempty"`

	// LastHandledReconcileAt is the value of the annotation
	// opkit.dev/reconcile-requested-at the operator last handled
	// (`kubectl annotate webapp NAME opkit.dev/reconcile-requested-at="$(date +%s)" --overwrite`).
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`

	// Conditions: Ready, Reconciling, Stalled, Degraded (kstatus-compatible),
	// and Available mirrored from the Deployment.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// WebApp is a stateless web application: a ConfigMap, a Deployment and a Service.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=wa,categories=all
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WebApp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WebAppSpec   `json:"spec"`
	Status WebAppStatus `json:"status,omitempty"`
}

// WebAppList is a list of WebApps.
//
// +kubebuilder:object:root=true
type WebAppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WebApp `json:"items"`
}

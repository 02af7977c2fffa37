package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// QueueSpec is the message queue the user asks for.
type QueueSpec struct {
	// FIFO makes the queue keep message order. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="fifo is immutable"
	// +optional
	FIFO bool `json:"fifo,omitempty"`
	// RetentionSeconds is how long a message is kept. Left out, the cloud's
	// default is written back here once the queue exists.
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=1209600
	// +optional
	RetentionSeconds *int32 `json:"retentionSeconds,omitempty"`
	// VisibilityTimeoutSeconds is how long a received message stays hidden.
	// Left out, the cloud's default is written back here.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=43200
	// +optional
	VisibilityTimeoutSeconds *int32 `json:"visibilityTimeoutSeconds,omitempty"`
	// CredentialsSecretRef names the Secret (keys accessKeyId and
	// secretAccessKey) whose cloud account owns the queue.
	CredentialsSecretRef SecretReference `json:"credentialsSecretRef"`
	// DeletionPolicy: Delete (default) deletes the queue before the Queue
	// goes; Orphan leaves it.
	// +kubebuilder:default=Delete
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// QueueStatus is what the operator observed. The queue's access token is
// only in the connection Secret "<name>-queue".
type QueueStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// URL is where the queue is used.
	// +optional
	URL string `json:"url,omitempty"`
	// Conditions: Ready, Reconciling, Stalled (kstatus-compatible).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Queue is a message queue in the cloud, managed from Kubernetes.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=all
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Queue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   QueueSpec   `json:"spec"`
	Status QueueStatus `json:"status,omitempty"`
}

// QueueList is a list of Queues.
//
// +kubebuilder:object:root=true
type QueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Queue `json:"items"`
}

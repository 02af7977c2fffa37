package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations the operator (opkit's external package, whose constants of
// the same names these are) writes on a Bucket to make its external create
// crash-safe. They are written to the API server BEFORE the cloud call they
// describe (external-name, create-pending) or right after it returned
// (create-succeeded), so a process that dies between the cloud's answer and
// the status write leaves enough on the object for the next one to find the
// bucket instead of creating another.
const (
	// AnnotationExternalName is the bucket's name in the cloud, fixed before
	// the first create and never changed afterwards.
	AnnotationExternalName = "external.opkit.dev/name"
	// AnnotationCreatePending holds the RFC 3339 time a create was about to
	// be sent. While it is present without AnnotationCreateSucceeded, the
	// bucket may or may not exist: the next reconcile looks it up by name and
	// request token before creating.
	AnnotationCreatePending = "external.opkit.dev/create-pending"
	// AnnotationCreateSucceeded holds the RFC 3339 time the operator knew the
	// bucket existed (its create returned, or a lookup found it after an
	// interrupted create). It replaces AnnotationCreatePending.
	AnnotationCreateSucceeded = "external.opkit.dev/create-succeeded"
)

// DeletionPolicy says what happens to the cloud bucket when its Bucket is deleted.
// +kubebuilder:validation:Enum=Delete;Orphan
type DeletionPolicy string

const (
	// DeletionDelete deletes the cloud bucket, and lets the Bucket go only once it is gone.
	DeletionDelete DeletionPolicy = "Delete"
	// DeletionOrphan leaves the cloud bucket as it is.
	DeletionOrphan DeletionPolicy = "Orphan"
)

// SecretReference names a Secret in the Bucket's namespace.
type SecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// BucketSpec is the bucket the user asks for.
//
// +kubebuilder:validation:XValidation:rule="has(oldSelf.bucketName) == has(self.bucketName)",message="bucketName cannot be added or removed after creation"
type BucketSpec struct {
	// BucketName is the bucket's name in the cloud. Left out, the operator
	// generates one from the namespace, the name and the UID. The cloud has
	// naming rules of its own beyond this schema (reserved prefixes and
	// suffixes, no IP addresses): a name it rejects makes the Bucket Stalled.
	// Immutable.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="bucketName is immutable"
	// +optional
	BucketName string `json:"bucketName,omitempty"`
	// Region the bucket lives in. Immutable.
	// +kubebuilder:validation:Enum=eu-west-1;us-east-1;ap-south-1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="region is immutable"
	Region string `json:"region"`
	// Versioning keeps every version of every object.
	// +optional
	Versioning bool `json:"versioning,omitempty"`
	// QuotaClass is the bucket's storage quota.
	// +kubebuilder:validation:Enum=small;standard;large
	// +kubebuilder:default=standard
	// +optional
	QuotaClass string `json:"quotaClass,omitempty"`
	// CredentialsSecretRef names the Secret (keys accessKeyId and
	// secretAccessKey) whose cloud account owns the bucket. Left out, the
	// operator's default credentials (--credentials-secret) are used.
	// +optional
	CredentialsSecretRef *SecretReference `json:"credentialsSecretRef,omitempty"`
	// DeletionPolicy: Delete (default) deletes the cloud bucket before the
	// Bucket goes; Orphan leaves it.
	// +kubebuilder:default=Delete
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// BucketStatus is what the operator observed. It never holds credentials:
// those are in the connection Secret.
type BucketStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ExternalName is the bucket's name in the cloud.
	// +optional
	ExternalName string `json:"externalName,omitempty"`
	// Endpoint is the URL the bucket's data is served at.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// ConnectionSecretName is the Secret in the Bucket's namespace holding
	// endpoint, bucket, region, accessKeyId and secretAccessKey.
	// +optional
	ConnectionSecretName string `json:"connectionSecretName,omitempty"`
	// Conditions: Ready, Reconciling, Stalled (kstatus-compatible).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Bucket is an object-storage bucket in the cloud, managed from Kubernetes.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=all
// +kubebuilder:printcolumn:name="External",type=string,JSONPath=`.status.externalName`
// +kubebuilder:printcolumn:name="Region",type=string,JSONPath=`.spec.region`
// +kubebuilder:printcolumn:name="Versioning",type=boolean,JSONPath=`.spec.versioning`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Bucket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BucketSpec   `json:"spec"`
	Status BucketStatus `json:"status,omitempty"`
}

// BucketList is a list of Buckets.
//
// +kubebuilder:object:root=true
type BucketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Bucket `json:"items"`
}

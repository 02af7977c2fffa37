// Package v1 is the storage.example.com/v1 API of the bucket example operator.
//
// +kubebuilder:object:generate=true
// +groupName=storage.example.com
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "storage.example.com", Version: "v1"}
	// SchemeBuilder registers this API's types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Bucket{}, &BucketList{}, &Queue{}, &QueueList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

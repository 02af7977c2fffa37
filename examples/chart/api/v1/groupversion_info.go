// Package v1 is the examples.opkit.dev/v1 API of the chart example operator.
//
// +kubebuilder:object:generate=true
// +groupName=examples.opkit.dev
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "examples.opkit.dev", Version: "v1"}
	// SchemeBuilder registers this API's types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ChartApp{}, &ChartAppList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Package v1beta1 is the apps.example.com/v1beta1 API of the webapp example
// operator: the version before v1, still served (and converted to and from
// v1 by the operator's conversion webhook) so that objects written at
// v1beta1 keep working while they are migrated to v1 storage. It differs
// from v1 in shape: the image and port sit under spec.container, and it
// has no spec.headless or spec.envFrom (a v1 object read at v1beta1 keeps
// them in an annotation, so nothing is lost either way).
//
// +kubebuilder:object:generate=true
// +groupName=apps.example.com
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "apps.example.com", Version: "v1beta1"}

	// SchemeBuilder registers this API's types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &WebApp{}, &WebAppList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

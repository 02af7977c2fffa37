// Package v1 is the hub and storage version of the test Gizmo kind.
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opkit/opkit/webhook/internal/gizmo"
)

// GroupVersion is test.opkit.dev/v1.
var GroupVersion = schema.GroupVersion{Group: gizmo.Group, Version: "v1"}

// AddToScheme registers Gizmo and GizmoList.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Gizmo{}, &GizmoList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Gizmo is the hub version.
type Gizmo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GizmoSpec `json:"spec,omitempty"`
}

// GizmoSpec is Gizmo's desired state.
type GizmoSpec struct {
	// Size is defaulted to 1 and must be within 1..10.
	Size *int32 `json:"size,omitempty"`
	// Color is defaulted to "blue".
	Color string `json:"color,omitempty"`
	// Region is immutable after create.
	Region string `json:"region,omitempty"`
	// Source must set exactly one of Git and Image.
	Source GizmoSource `json:"source,omitempty"`
	// ConfigMapRef names a ConfigMap in the Gizmo's namespace that must exist.
	ConfigMapRef string `json:"configMapRef,omitempty"`
	// Tier exists only in v1: v1alpha1 cannot hold it.
	Tier string `json:"tier,omitempty"`
	// Legacy is deprecated: setting it is allowed with a warning.
	Legacy string `json:"legacy,omitempty"`
}

// GizmoSource is a one-of.
type GizmoSource struct {
	Git   string `json:"git,omitempty"`
	Image string `json:"image,omitempty"`
}

// GizmoList is a list of Gizmos.
type GizmoList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gizmo `json:"items"`
}

// Hub marks v1 as the conversion hub.
func (*Gizmo) Hub() {}

// DeepCopyInto copies g into out.
func (g *Gizmo) DeepCopyInto(out *Gizmo) {
	*out = *g
	out.TypeMeta = g.TypeMeta
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if g.Spec.Size != nil {
		v := *g.Spec.Size
		out.Spec.Size = &v
	}
}

// DeepCopy returns a copy of g.
func (g *Gizmo) DeepCopy() *Gizmo {
	if g == nil {
		return nil
	}
	out := new(Gizmo)
	g.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (g *Gizmo) DeepCopyObject() runtime.Object { return g.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *GizmoList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := new(GizmoList)
	*out = *l
	l.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Gizmo, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

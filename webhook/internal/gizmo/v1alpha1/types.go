// Package v1alpha1 is a spoke version of the test Gizmo kind: it spells
// color "colour", keeps the source flat, and has no tier.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	opconv "github.com/opkit/opkit/webhook/conversion"
	"github.com/opkit/opkit/webhook/internal/gizmo"
	v1 "github.com/opkit/opkit/webhook/internal/gizmo/v1"
)

// GroupVersion is test.opkit.dev/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: gizmo.Group, Version: "v1alpha1"}

// AddToScheme registers Gizmo and GizmoList.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Gizmo{}, &GizmoList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Gizmo is the spoke version.
type Gizmo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GizmoSpec `json:"spec,omitempty"`
}

// GizmoSpec is Gizmo's desired state in v1alpha1.
type GizmoSpec struct {
	Size         *int32 `json:"size,omitempty"`
	Colour       string `json:"colour,omitempty"`
	Region       string `json:"region,omitempty"`
	Git          string `json:"git,omitempty"`
	Image        string `json:"image,omitempty"`
	ConfigMapRef string `json:"configMapRef,omitempty"`
	Legacy       string `json:"legacy,omitempty"`
}

// GizmoList is a list of Gizmos.
type GizmoList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gizmo `json:"items"`
}

// v1Only holds the hub fields v1alpha1 cannot represent.
type v1Only struct {
	Tier string `json:"tier,omitempty"`
}

// ConvertTo converts g to the hub, restoring stashed v1-only fields.
func (g *Gizmo) ConvertTo(h conversion.Hub) error {
	dst := h.(*v1.Gizmo)
	g.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Spec = v1.GizmoSpec{
		Color:        g.Spec.Colour,
		Region:       g.Spec.Region,
		Source:       v1.GizmoSource{Git: g.Spec.Git, Image: g.Spec.Image},
		ConfigMapRef: g.Spec.ConfigMapRef,
		Legacy:       g.Spec.Legacy,
	}
	if g.Spec.Size != nil {
		v := *g.Spec.Size
		dst.Spec.Size = &v
	}
	var lost v1Only
	if _, err := opconv.Restore(&dst.ObjectMeta, &lost); err != nil {
		return err
	}
	dst.Spec.Tier = lost.Tier
	return nil
}

// ConvertFrom converts the hub to g, stashing v1-only fields.
func (g *Gizmo) ConvertFrom(h conversion.Hub) error {
	src := h.(*v1.Gizmo)
	src.ObjectMeta.DeepCopyInto(&g.ObjectMeta)
	g.Spec = GizmoSpec{
		Colour:       src.Spec.Color,
		Region:       src.Spec.Region,
		Git:          src.Spec.Source.Git,
		Image:        src.Spec.Source.Image,
		ConfigMapRef: src.Spec.ConfigMapRef,
		Legacy:       src.Spec.Legacy,
	}
	if src.Spec.Size != nil {
		v := *src.Spec.Size
		g.Spec.Size = &v
	}
	return opconv.Stash(&g.ObjectMeta, v1Only{Tier: src.Spec.Tier})
}

// DeepCopyInto copies g into out.
func (g *Gizmo) DeepCopyInto(out *Gizmo) {
	*out = *g
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

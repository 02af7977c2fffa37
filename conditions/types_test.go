package conditions_test

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Gizmo is the Go type of testdata/gizmos.yaml: the common layout, found by
// reflection, with no condition accessors.
type Gizmo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GizmoSpec   `json:"spec,omitempty"`
	Status            GizmoStatus `json:"status,omitempty"`
}

type GizmoSpec struct {
	Mode string `json:"mode,omitempty"`
	Size int64  `json:"size,omitempty"`
}

type GizmoStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

func (g *Gizmo) DeepCopyObject() runtime.Object {
	out := *g
	g.DeepCopyInto(&out.ObjectMeta)
	out.Status.Conditions = slices.Clone(g.Status.Conditions)
	return &out
}

type GizmoList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gizmo `json:"items"`
}

func (l *GizmoList) DeepCopyObject() runtime.Object {
	out := *l
	out.Items = make([]Gizmo, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*Gizmo)
	}
	return &out
}

var gizmoGV = schema.GroupVersion{Group: "conditions.test.opkit.dev", Version: "v1"}

func addGizmo(s *runtime.Scheme) error {
	s.AddKnownTypes(gizmoGV, &Gizmo{}, &GizmoList{})
	metav1.AddToGroupVersion(s, gizmoGV)
	return nil
}

// pointerStatus keeps its status behind a pointer and has no observedGeneration.
type pointerStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            *struct {
		Conditions []metav1.Condition `json:"conditions,omitempty"`
	} `json:"status,omitempty"`
}

func (p *pointerStatus) DeepCopyObject() runtime.Object {
	out := *p
	p.DeepCopyInto(&out.ObjectMeta)
	if p.Status != nil {
		s := *p.Status
		s.Conditions = slices.Clone(p.Status.Conditions)
		out.Status = &s
	}
	return &out
}

// custom keeps its conditions somewhere unusual and says so with the
// Accessor interfaces.
type custom struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	State             struct {
		Health   []metav1.Condition `json:"health,omitempty"`
		Observed int64              `json:"observed,omitempty"`
	} `json:"state"`
}

func (c *custom) DeepCopyObject() runtime.Object {
	out := *c
	c.DeepCopyInto(&out.ObjectMeta)
	out.State.Health = slices.Clone(c.State.Health)
	return &out
}

func (c *custom) GetConditions() []metav1.Condition   { return c.State.Health }
func (c *custom) SetConditions(cs []metav1.Condition) { c.State.Health = cs }
func (c *custom) GetObservedGeneration() int64        { return c.State.Observed }
func (c *custom) SetObservedGeneration(g int64)       { c.State.Observed = g }

// noStatus has metadata but nothing this package can use.
type noStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct{} `json:"spec"`
}

func (n *noStatus) DeepCopyObject() runtime.Object {
	out := *n
	n.DeepCopyInto(&out.ObjectMeta)
	return &out
}

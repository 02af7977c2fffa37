package reconciler_test

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var gadgetGV = schema.GroupVersion{Group: "test.opkit.dev", Version: "v1"}

type GadgetSpec struct {
	Value     string `json:"value,omitempty"`
	Gate      string `json:"gate,omitempty"`
	SecretRef string `json:"secretRef,omitempty"`
	Schedule  string `json:"schedule,omitempty"`
}

type GadgetStatus struct {
	ObservedGeneration  int64              `json:"observedGeneration,omitempty"`
	Phase               string             `json:"phase,omitempty"`
	LastHandled         string             `json:"lastHandledReconcileAt,omitempty"`
	PhaseTransitionTime *metav1.Time       `json:"phaseTransitionTime,omitempty"`
	Conditions          []metav1.Condition `json:"conditions,omitempty"`
}

type Gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GadgetSpec   `json:"spec,omitempty"`
	Status            GadgetStatus `json:"status,omitempty"`
}

type GadgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gadget `json:"items"`
}

func (g *Gadget) DeepCopyObject() runtime.Object {
	out := *g
	g.DeepCopyInto(&out.ObjectMeta)
	out.Status.Conditions = append([]metav1.Condition(nil), g.Status.Conditions...)
	if g.Status.PhaseTransitionTime != nil {
		t := *g.Status.PhaseTransitionTime
		out.Status.PhaseTransitionTime = &t
	}
	return &out
}

func (l *GadgetList) DeepCopyObject() runtime.Object {
	out := *l
	out.Items = make([]Gadget, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*Gadget)
	}
	return &out
}

func addGadgets(s *runtime.Scheme) error {
	s.AddKnownTypes(gadgetGV, &Gadget{}, &GadgetList{})
	metav1.AddToGroupVersion(s, gadgetGV)
	return nil
}

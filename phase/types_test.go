package phase_test

import (
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Pipeline is the Go type of testdata/pipelines.yaml: the default layout,
// found by reflection, with no accessors.
type Pipeline struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PipelineSpec   `json:"spec,omitempty"`
	Status            PipelineStatus `json:"status,omitempty"`
}

type PipelineSpec struct {
	Gate string `json:"gate,omitempty"`
}

// PipelinePhase shows that any string type works for the phase field.
type PipelinePhase string

type PipelineStatus struct {
	Phase               PipelinePhase      `json:"phase,omitempty"`
	PhaseTransitionTime *metav1.Time       `json:"phaseTransitionTime,omitempty"`
	ObservedGeneration  int64              `json:"observedGeneration,omitempty"`
	Conditions          []metav1.Condition `json:"conditions,omitempty"`
}

func (p *Pipeline) DeepCopyObject() runtime.Object {
	out := *p
	p.DeepCopyInto(&out.ObjectMeta)
	out.Status.Conditions = slices.Clone(p.Status.Conditions)
	if p.Status.PhaseTransitionTime != nil {
		t := *p.Status.PhaseTransitionTime
		out.Status.PhaseTransitionTime = &t
	}
	return &out
}

type PipelineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Pipeline `json:"items"`
}

func (l *PipelineList) DeepCopyObject() runtime.Object {
	out := *l
	out.Items = make([]Pipeline, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*Pipeline)
	}
	return &out
}

var pipelineGV = schema.GroupVersion{Group: "phase.test.opkit.dev", Version: "v1"}

func addPipeline(s *runtime.Scheme) error {
	s.AddKnownTypes(pipelineGV, &Pipeline{}, &PipelineList{})
	metav1.AddToGroupVersion(s, pipelineGV)
	return nil
}

// custom keeps its phase elsewhere and says so with phase.Accessor.
type custom struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	State             struct {
		Step       string             `json:"step"`
		Since      metav1.Time        `json:"since"`
		Conditions []metav1.Condition `json:"conditions,omitempty"`
	} `json:"state"`
}

func (c *custom) DeepCopyObject() runtime.Object {
	out := *c
	c.DeepCopyInto(&out.ObjectMeta)
	out.State.Conditions = slices.Clone(c.State.Conditions)
	return &out
}

func (c *custom) GetPhase() (string, metav1.Time)     { return c.State.Step, c.State.Since }
func (c *custom) SetPhase(p string, t metav1.Time)    { c.State.Step, c.State.Since = p, t }
func (c *custom) GetConditions() []metav1.Condition   { return c.State.Conditions }
func (c *custom) SetConditions(cs []metav1.Condition) { c.State.Conditions = cs }

// noPhase has status conditions but no phase fields.
type noPhase struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            struct {
		Conditions []metav1.Condition `json:"conditions,omitempty"`
	} `json:"status"`
}

func (n *noPhase) DeepCopyObject() runtime.Object {
	out := *n
	n.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// event is one recorded event.
type event struct {
	Type, Reason, Action, Note string
}

// recorder collects events; it satisfies events.EventRecorder.
type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) Eventf(_, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{eventtype, reason, action, sprintf(note, args...)})
}

func (r *recorder) take() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

// transition is one observer call.
type transition struct {
	From, To string
	InFrom   string
}

type observer struct {
	mu  sync.Mutex
	got []transition
}

var _ client.Object = (*Pipeline)(nil)

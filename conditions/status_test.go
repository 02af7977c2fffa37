package conditions_test

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/outcome"
)

// embeddedStatus keeps its phase fields in an embedded struct (promoted by
// encoding/json) and behind an embedded pointer; the accessor must follow
// both as encoding/json does.
type embeddedStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            *embeddedStatusBody `json:"status,omitempty"`
}

type CommonStatus struct {
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
}

type PhaseFields struct {
	Phase   string       `json:"phase,omitempty"`
	Entered *metav1.Time `json:"enteredAt,omitempty"`
}

type embeddedStatusBody struct {
	CommonStatus `json:",inline"`
	*PhaseFields
	Message string `json:"message,omitempty"`
}

func (e *embeddedStatus) DeepCopyObject() runtime.Object { c := *e; return &c }

func TestStatusFollowsEmbeddedStructsAsEncodingJSONDoes(t *testing.T) {
	obj := &embeddedStatus{ObjectMeta: metav1.ObjectMeta{Name: "e", Generation: 3}}
	st, err := conditions.StatusOf(obj)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Writable() {
		t.Fatal("conditions in an embedded struct are not writable")
	}
	if p, ok, err := st.String("phase"); err != nil || ok || p != "" {
		t.Fatalf("unset phase behind a nil embedded pointer: %q %v %v", p, ok, err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 500, time.UTC)
	if err := st.SetString("phase", "Running"); err != nil {
		t.Fatal(err)
	}
	if err := st.SetTime("enteredAt", at); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkReady("Up", "all good"); err != nil {
		t.Fatal(err)
	}
	if obj.Status.Phase != "Running" || !obj.Status.Entered.Equal(&metav1.Time{Time: at.Truncate(time.Second)}) {
		t.Fatalf("fields not written through the embedded pointer: %+v", obj.Status.PhaseFields)
	}
	if len(obj.Status.Conditions) != 1 || obj.Status.ObservedGeneration != 3 {
		t.Fatalf("conditions/observedGeneration not written into the embedded struct: %+v", obj.Status.CommonStatus)
	}
	if got, ok, _ := st.Time("enteredAt"); !ok || !got.Equal(at.Truncate(time.Second)) {
		t.Fatalf("Time read back %v %v", got, ok)
	}
	for _, bad := range []string{"message2", "conditions"} {
		if _, _, err := st.String(bad); !errors.Is(err, conditions.ErrNoStatusField) {
			t.Errorf("String(%q) = %v, want ErrNoStatusField", bad, err)
		}
	}
	// The same layout through unstructured content, as the API returns it.
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: content}
	ust, _ := conditions.StatusOf(u)
	if p, _, _ := ust.String("phase"); p != "Running" {
		t.Fatalf("unstructured phase %q", p)
	}
	if !ust.IsTrue(conditions.Ready) {
		t.Fatal("unstructured Ready not True")
	}
}

func TestStatusOfObjectWithoutConditions(t *testing.T) {
	st, err := conditions.StatusOf(&corev1.ConfigMap{})
	if err != nil {
		t.Fatalf("a ConfigMap must resolve (it just has no conditions): %v", err)
	}
	if st.HasConditions() || st.Writable() {
		t.Fatal("ConfigMap reported conditions")
	}
	if err := st.MarkReady("A", "b"); !errors.Is(err, conditions.ErrNoConditions) {
		t.Fatalf("MarkReady on a ConfigMap: %v", err)
	}
	if _, err := conditions.StatusOf(nil); !errors.Is(err, conditions.ErrNoConditions) {
		t.Fatalf("nil: %v", err)
	}
}

// TestApplyOutcomeClearsWhatItSet: an operator whose summary is its own
// condition type gets that type from the taxonomy, never a Ready, and after
// recovering is not left with a stale summary; a summary the caller wrote
// is kept.
func TestApplyOutcomeClearsWhatItSet(t *testing.T) {
	terminal := outcome.Terminal("InvalidSpec", errors.New("spec.size must be at most 10"))
	for _, summary := range []string{conditions.Ready, "Available"} {
		t.Run(summary, func(t *testing.T) {
			opt := conditions.WithSummaryType(summary)
			g := gizmo(2)
			if err := conditions.ApplyOutcome(g, terminal, opt); err != nil {
				t.Fatal(err)
			}
			if c := conditions.Get(g, summary); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "InvalidSpec" {
				t.Fatalf("Terminal: %s = %+v", summary, c)
			}
			if summary != conditions.Ready && conditions.Get(g, conditions.Ready) != nil {
				t.Fatal("Terminal with WithSummaryType wrote Ready")
			}
			// Recovered, and the caller wrote no summary this time.
			if err := conditions.ApplyOutcome(g, nil, opt); err != nil {
				t.Fatal(err)
			}
			if cs, _ := conditions.List(g); len(cs) != 0 {
				t.Fatalf("after recovery the taxonomy's conditions remain: %+v", cs)
			}
			// A transient error, then recovery with the caller's own summary.
			if err := conditions.ApplyOutcome(g, errors.New("connection refused"), opt); err != nil {
				t.Fatal(err)
			}
			if c := conditions.Get(g, summary); c == nil || c.Status != metav1.ConditionUnknown {
				t.Fatalf("Transient on a new object: %s = %+v", summary, c)
			}
			mustSet(t, g, cond(summary, metav1.ConditionFalse, "ReplicasUnavailable", "0 of 3"))
			if err := conditions.ApplyOutcome(g, nil, opt); err != nil {
				t.Fatal(err)
			}
			if c := conditions.Get(g, summary); c == nil || c.Reason != "ReplicasUnavailable" {
				t.Fatalf("the caller's summary was removed: %+v", c)
			}
			if conditions.Get(g, conditions.Reconciling) != nil || conditions.Get(g, conditions.Stalled) != nil {
				t.Fatal("Success left Reconciling or Stalled")
			}
		})
	}
}

func TestValidateIsTheAPIServersRule(t *testing.T) {
	for _, c := range []metav1.Condition{
		{Type: "Ready", Status: "True", Reason: "A"},
		{Type: "example.com/DatabaseReady", Status: "Unknown", Reason: "Waiting_For,db:x"},
	} {
		if err := conditions.Validate(c); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	for _, c := range []metav1.Condition{
		{Type: "", Status: "True", Reason: "A"},
		{Type: "has space", Status: "True", Reason: "A"},
		{Type: "Ready", Status: "Yes", Reason: "A"},
		{Type: "Ready", Status: "True", Reason: ""},
		{Type: "Ready", Status: "True", Reason: "9lives"},
		{Type: "Ready", Status: "True", Reason: "A", ObservedGeneration: -1},
	} {
		if err := conditions.Validate(c); !errors.Is(err, conditions.ErrInvalidCondition) {
			t.Errorf("%+v: %v, want ErrInvalidCondition", c, err)
		}
	}
}

package phase

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
)

// Accessor is implemented by objects that keep their phase somewhere other
// than status.<phase field> and status.<entered-at field>. When an object
// implements it, it is used instead of the status fields, always. GetPhase
// returns "" and a zero time for an object that has never entered a phase.
type Accessor interface {
	GetPhase() (phase string, enteredAt metav1.Time)
	SetPhase(phase string, enteredAt metav1.Time)
}

// fields reads and writes one object's phase and entered-at time, through
// its [Accessor] or through the object's [conditions.Status] (opkit's one
// status accessor: typed by reflection or unstructured), resolved once per
// Step.
type fields struct {
	acc        Accessor
	st         *conditions.Status
	phaseField string
	timeField  string
}

func (m *machineCore) fieldsFor(obj client.Object) (*fields, *conditions.Status, error) {
	st, err := conditions.StatusOf(obj)
	if err != nil {
		return nil, nil, err
	}
	f := &fields{st: st, phaseField: m.opts.phaseField, timeField: m.opts.timeField}
	if a, ok := obj.(Accessor); ok {
		f.acc = a
		return f, st, nil
	}
	// Check the layout once, so a type without the fields fails before any
	// handler runs, with a message naming both fields.
	if _, _, err := st.String(f.phaseField); err != nil {
		return nil, nil, fmt.Errorf("%w: %w (implement phase.Accessor for other layouts)", ErrNoPhaseField, err)
	}
	if _, _, err := st.Time(f.timeField); err != nil {
		return nil, nil, fmt.Errorf("%w: %w (implement phase.Accessor for other layouts)", ErrNoPhaseField, err)
	}
	return f, st, nil
}

func (f *fields) get() (Phase, time.Time, error) {
	if f.acc != nil {
		p, t := f.acc.GetPhase()
		return Phase(p), t.Time, nil
	}
	p, _, err := f.st.String(f.phaseField)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: %w", ErrNoPhaseField, err)
	}
	t, _, err := f.st.Time(f.timeField)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: %w", ErrNoPhaseField, err)
	}
	return Phase(p), t, nil
}

// set writes the phase and its entered-at time. For unstructured objects the
// CRD schema must declare both fields: the API server prunes unknown fields,
// and a phase that is never persisted makes every Step start over.
func (f *fields) set(p Phase, t time.Time) error {
	if f.acc != nil {
		f.acc.SetPhase(string(p), metav1.NewTime(t))
		return nil
	}
	if err := f.st.SetString(f.phaseField, string(p)); err != nil {
		return fmt.Errorf("%w: %w", ErrNoPhaseField, err)
	}
	if err := f.st.SetTime(f.timeField, t); err != nil {
		return fmt.Errorf("%w: %w", ErrNoPhaseField, err)
	}
	return nil
}

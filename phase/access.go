package phase

import (
	"fmt"
	"reflect"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/internal/jsonfield"
)

// Accessor is implemented by objects that keep their phase somewhere other
// than status.<phase field> and status.<entered-at field>. When an object
// implements it, it is used instead of reflection or unstructured paths,
// always. GetPhase returns "" and a zero time for an object that has never
// entered a phase.
type Accessor interface {
	GetPhase() (phase string, enteredAt metav1.Time)
	SetPhase(phase string, enteredAt metav1.Time)
}

// fields reads and writes one object's phase and entered-at time.
type fields struct {
	get func() (Phase, time.Time, error)
	set func(Phase, time.Time) error
}

// layout is where a Go type keeps its phase fields. It depends only on the
// type (and the machine's field names), so it is computed once per type.
type layout struct {
	status    int
	statusPtr bool
	phase     int
	time      int
	timePtr   bool
	err       error
}

var timeType = reflect.TypeFor[metav1.Time]()

// layoutCache memoises layouts per reflect.Type for one machine. Machines
// are usually generic over a concrete pointer type, so it holds one entry.
type layoutCache struct{ m sync.Map }

func (c *layoutCache) of(t reflect.Type, phaseField, timeField string) *layout {
	if l, ok := c.m.Load(t); ok {
		return l.(*layout)
	}
	l, _ := c.m.LoadOrStore(t, computeLayout(t, phaseField, timeField))
	return l.(*layout)
}

func computeLayout(t reflect.Type, phaseField, timeField string) *layout {
	l := &layout{}
	fail := func(format string, args ...any) *layout {
		l.err = fmt.Errorf("%w: %v: %s (implement phase.Accessor for other layouts)", ErrNoPhaseField, t, fmt.Sprintf(format, args...))
		return l
	}
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return fail("not a pointer to a struct")
	}
	sf, ok := jsonfield.ByName(t.Elem(), "status")
	if !ok {
		return fail("no status field")
	}
	st := sf.Type
	if st.Kind() == reflect.Pointer {
		st, l.statusPtr = st.Elem(), true
	}
	if st.Kind() != reflect.Struct {
		return fail("status is %v, not a struct", sf.Type)
	}
	l.status = sf.Index[0]
	pf, ok := jsonfield.ByName(st, phaseField)
	if !ok || pf.Type.Kind() != reflect.String {
		return fail("status has no string field with JSON name %q", phaseField)
	}
	l.phase = pf.Index[0]
	tf, ok := jsonfield.ByName(st, timeField)
	switch {
	case ok && tf.Type == timeType:
	case ok && tf.Type.Kind() == reflect.Pointer && tf.Type.Elem() == timeType:
		l.timePtr = true
	default:
		return fail("status has no metav1.Time field with JSON name %q", timeField)
	}
	l.time = tf.Index[0]
	return l
}

func (m *machineCore) fieldsFor(obj client.Object) (*fields, error) {
	if a, ok := obj.(Accessor); ok {
		return &fields{
			get: func() (Phase, time.Time, error) {
				p, t := a.GetPhase()
				return Phase(p), t.Time, nil
			},
			set: func(p Phase, t time.Time) error {
				a.SetPhase(string(p), metav1.NewTime(t))
				return nil
			},
		}, nil
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return m.unstructuredFields(u), nil
	}
	l := m.layouts.of(reflect.TypeOf(obj), m.opts.phaseField, m.opts.timeField)
	if l.err != nil {
		return nil, l.err
	}
	v := reflect.ValueOf(obj).Elem()
	status := func(create bool) (reflect.Value, bool) {
		f := v.Field(l.status)
		if !l.statusPtr {
			return f, true
		}
		if f.IsNil() {
			if !create {
				return reflect.Value{}, false
			}
			f.Set(reflect.New(f.Type().Elem()))
		}
		return f.Elem(), true
	}
	return &fields{
		get: func() (Phase, time.Time, error) {
			s, ok := status(false)
			if !ok {
				return "", time.Time{}, nil
			}
			p := Phase(s.Field(l.phase).String())
			tf := s.Field(l.time)
			if l.timePtr {
				if tf.IsNil() {
					return p, time.Time{}, nil
				}
				tf = tf.Elem()
			}
			return p, tf.Interface().(metav1.Time).Time, nil
		},
		set: func(p Phase, t time.Time) error {
			s, _ := status(true)
			s.Field(l.phase).SetString(string(p))
			mt := reflect.ValueOf(metav1.NewTime(t))
			if l.timePtr {
				ptr := reflect.New(timeType)
				ptr.Elem().Set(mt)
				s.Field(l.time).Set(ptr)
				return nil
			}
			s.Field(l.time).Set(mt)
			return nil
		},
	}, nil
}

// unstructuredFields reads status.<phase> and status.<time>. The CRD schema
// must declare both fields: the API server prunes unknown fields, and a phase
// that is never persisted makes every Step start over.
func (m *machineCore) unstructuredFields(u *unstructured.Unstructured) *fields {
	pf, tf := m.opts.phaseField, m.opts.timeField
	return &fields{
		get: func() (Phase, time.Time, error) {
			p, _, err := unstructured.NestedString(u.Object, "status", pf)
			if err != nil {
				return "", time.Time{}, fmt.Errorf("%w: status.%s: %w", ErrNoPhaseField, pf, err)
			}
			ts, found, err := unstructured.NestedString(u.Object, "status", tf)
			if err != nil {
				return "", time.Time{}, fmt.Errorf("%w: status.%s: %w", ErrNoPhaseField, tf, err)
			}
			var t metav1.Time
			if found && ts != "" {
				if err := t.UnmarshalQueryParameter(ts); err != nil {
					return "", time.Time{}, fmt.Errorf("%w: status.%s: %w", ErrNoPhaseField, tf, err)
				}
			}
			return Phase(p), t.Time, nil
		},
		set: func(p Phase, t time.Time) error {
			if err := unstructured.SetNestedField(u.Object, string(p), "status", pf); err != nil {
				return fmt.Errorf("%w: status.%s: %w", ErrNoPhaseField, pf, err)
			}
			if err := unstructured.SetNestedField(u.Object, t.UTC().Format(time.RFC3339), "status", tf); err != nil {
				return fmt.Errorf("%w: status.%s: %w", ErrNoPhaseField, tf, err)
			}
			return nil
		},
	}
}

package conditions

import (
	"errors"
	"fmt"
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/internal/jsonfield"
)

// Accessor is implemented by objects whose conditions do not live in a
// status.conditions field of type []metav1.Condition. When an object
// implements it, it is used instead of the built-in access, always.
// GetConditions may return the object's own slice: this package copies it
// before changing anything.
type Accessor interface {
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
}

// ObservedGenerationAccessor is implemented by objects whose
// status.observedGeneration is not an int64 field named observedGeneration in
// their status struct; it wins over the built-in access, like [Accessor].
type ObservedGenerationAccessor interface {
	GetObservedGeneration() int64
	SetObservedGeneration(int64)
}

// ErrNoConditions is wrapped by the error returned for an object that has no
// conditions this package can read or write.
var ErrNoConditions = errors.New("object has no status.conditions of type []metav1.Condition")

// access reads and writes one object's conditions and, when it has one,
// status.observedGeneration.
type access struct {
	get func() ([]metav1.Condition, error)
	// set is nil when the conditions can be read but not written (a foreign
	// condition type such as appsv1.DeploymentCondition).
	set func([]metav1.Condition)
	// observed returns status.observedGeneration and whether the object has it.
	observed func() (int64, bool)
	// setObserved is nil when the object has no status.observedGeneration.
	setObserved func(int64)
}

func objectName(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

func describe(obj client.Object) string {
	return fmt.Sprintf("%T %s", obj, objectName(obj))
}

// accessFor picks, in order: the Accessor interface, *unstructured.Unstructured,
// a typed struct with a status.conditions []metav1.Condition field found by
// reflection, and finally a read-only view of any other status.conditions
// through runtime.DefaultUnstructuredConverter.
func accessFor(obj client.Object) (*access, error) {
	if obj == nil || reflect.ValueOf(obj).Kind() == reflect.Pointer && reflect.ValueOf(obj).IsNil() {
		return nil, fmt.Errorf("conditions: nil object: %w", ErrNoConditions)
	}
	a := &access{}
	if g, ok := obj.(Accessor); ok {
		a.get = func() ([]metav1.Condition, error) { return g.GetConditions(), nil }
		a.set = g.SetConditions
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if a.get == nil {
			a.get = func() ([]metav1.Condition, error) { return readConditions(u.Object) }
			a.set = func(cs []metav1.Condition) { writeUnstructured(u, cs) }
		}
		a.observed = func() (int64, bool) {
			v, found, err := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			return v, found && err == nil
		}
		a.setObserved = func(g int64) { _ = unstructured.SetNestedField(u.Object, g, "status", "observedGeneration") }
	} else if err := reflectAccess(obj, a); err != nil {
		return nil, err
	}
	if og, ok := obj.(ObservedGenerationAccessor); ok {
		a.observed = func() (int64, bool) { return og.GetObservedGeneration(), true }
		a.setObserved = og.SetObservedGeneration
	}
	return a, nil
}

// layout is where a Go type keeps its conditions. It depends only on the type,
// so it is computed once per type and cached.
type layout struct {
	status      int  // index of the status field in the object struct
	statusPtr   bool // the status field is a pointer to a struct
	conditions  int  // index of conditions in the status struct, -1 if not []metav1.Condition
	foreign     bool // status.conditions exists with another element type
	observedGen int  // index of observedGeneration (int64) in the status struct, -1 if none
	err         error
}

var conditionSliceType = reflect.TypeFor[[]metav1.Condition]()

// layouts caches layout per reflect.Type. It is write-once memoisation of
// facts derived from the type alone (never configuration), so it cannot make
// two callers observe different behaviour; sync.Map makes it safe for
// concurrent reconcilers.
var layouts sync.Map

func layoutOf(t reflect.Type) *layout {
	if l, ok := layouts.Load(t); ok {
		return l.(*layout)
	}
	l := computeLayout(t)
	actual, _ := layouts.LoadOrStore(t, l)
	return actual.(*layout)
}

func computeLayout(t reflect.Type) *layout {
	l := &layout{conditions: -1, observedGen: -1}
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		l.err = fmt.Errorf("%v is not a pointer to a struct", t)
		return l
	}
	sf, ok := jsonfield.ByName(t.Elem(), "status")
	if !ok || len(sf.Index) != 1 {
		l.err = fmt.Errorf("%v has no status field", t)
		return l
	}
	st := sf.Type
	if st.Kind() == reflect.Pointer {
		st, l.statusPtr = st.Elem(), true
	}
	if st.Kind() != reflect.Struct {
		l.err = fmt.Errorf("%v: status is %v, not a struct", t, sf.Type)
		return l
	}
	l.status = sf.Index[0]
	if cf, ok := jsonfield.ByName(st, "conditions"); ok {
		if cf.Type == conditionSliceType {
			l.conditions = cf.Index[0]
		} else {
			l.foreign = true
		}
	}
	if of, ok := jsonfield.ByName(st, "observedGeneration"); ok && of.Type.Kind() == reflect.Int64 {
		l.observedGen = of.Index[0]
	}
	if l.conditions < 0 && !l.foreign {
		l.err = fmt.Errorf("%v: status has no conditions field", t)
	}
	return l
}

func reflectAccess(obj client.Object, a *access) error {
	l := layoutOf(reflect.TypeOf(obj))
	if l.err != nil {
		if a.get != nil { // Accessor implemented: status layout does not matter
			return nil
		}
		return fmt.Errorf("conditions: %s: %w (%w)", describe(obj), ErrNoConditions, l.err)
	}
	v := reflect.ValueOf(obj).Elem()
	// status returns the status struct; with create it allocates a nil *Status.
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
	if a.get == nil {
		switch {
		case l.conditions >= 0:
			a.get = func() ([]metav1.Condition, error) {
				s, ok := status(false)
				if !ok {
					return nil, nil
				}
				return s.Field(l.conditions).Interface().([]metav1.Condition), nil
			}
			a.set = func(cs []metav1.Condition) {
				s, _ := status(true)
				s.Field(l.conditions).Set(reflect.ValueOf(cs))
			}
		case l.foreign:
			a.get = func() ([]metav1.Condition, error) {
				u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
				if err != nil {
					return nil, fmt.Errorf("conditions: %s: %w", describe(obj), err)
				}
				return readConditions(u)
			}
		}
	}
	if l.observedGen >= 0 {
		a.observed = func() (int64, bool) {
			s, ok := status(false)
			if !ok {
				return 0, true
			}
			return s.Field(l.observedGen).Int(), true
		}
		a.setObserved = func(g int64) {
			s, _ := status(true)
			s.Field(l.observedGen).SetInt(g)
		}
	}
	return nil
}

// readConditions reads status.conditions from unstructured content. It is
// lenient about layout, so it also reads condition types other than
// metav1.Condition (e.g. apps/v1 DeploymentCondition): type, status, reason,
// message, lastTransitionTime and observedGeneration are taken when present
// and other fields are ignored. Entries without a type are skipped.
func readConditions(content map[string]any) ([]metav1.Condition, error) {
	raw, found, err := unstructured.NestedSlice(content, "status", "conditions")
	if err != nil {
		return nil, fmt.Errorf("conditions: status.conditions: %w", err)
	}
	if !found {
		return nil, nil
	}
	out := make([]metav1.Condition, 0, len(raw))
	for i, item := range raw {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("conditions: status.conditions[%d] is %T, not an object", i, item)
		}
		var c metav1.Condition
		c.Type, _ = m["type"].(string)
		if c.Type == "" {
			continue
		}
		s, _ := m["status"].(string)
		c.Status = metav1.ConditionStatus(s)
		c.Reason, _ = m["reason"].(string)
		c.Message, _ = m["message"].(string)
		switch g := m["observedGeneration"].(type) {
		case int64:
			c.ObservedGeneration = g
		case float64:
			c.ObservedGeneration = int64(g)
		case int:
			c.ObservedGeneration = int64(g)
		}
		if ts, ok := m["lastTransitionTime"].(string); ok && ts != "" {
			if err := c.LastTransitionTime.UnmarshalQueryParameter(ts); err != nil {
				return nil, fmt.Errorf("conditions: status.conditions[%d].lastTransitionTime: %w", i, err)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

func writeUnstructured(u *unstructured.Unstructured, cs []metav1.Condition) {
	if len(cs) == 0 {
		unstructured.RemoveNestedField(u.Object, "status", "conditions")
		return
	}
	list := make([]any, 0, len(cs))
	for i := range cs {
		c := &cs[i]
		m := map[string]any{
			"type":               c.Type,
			"status":             string(c.Status),
			"reason":             c.Reason,
			"message":            c.Message,
			"lastTransitionTime": c.LastTransitionTime.UTC().Format("2006-01-02T15:04:05Z07:00"),
		}
		if c.ObservedGeneration != 0 {
			m["observedGeneration"] = c.ObservedGeneration
		}
		list = append(list, m)
	}
	_ = unstructured.SetNestedSlice(u.Object, list, "status", "conditions")
}

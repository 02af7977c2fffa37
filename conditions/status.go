package conditions

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// ErrNoStatusField is wrapped by the error returned when a named status field
// ([Status.String], [Status.Time] and their setters) does not exist on the
// object's type or has another type.
var ErrNoStatusField = errors.New("object has no such status field")

// Status is one object's status as opkit reads and writes it: its
// conditions, status.observedGeneration and named status fields (a phase
// machine's status.phase, for instance). It is the one status accessor of
// opkit; every pattern package reads and writes status through it.
//
// [StatusOf] resolves how the object keeps its status once — an [Accessor]
// or [ObservedGenerationAccessor] implementation, *unstructured.Unstructured,
// or a typed struct found by reflection (the layout is computed once per Go
// type) — and every method then works on that resolution. Changes are made to
// the object in memory; nothing here calls the API (see [StatusPatcher]).
//
// A Status is not safe for concurrent use, like the object it wraps.
type Status struct {
	obj  client.Object
	name string
	acc  Accessor
	og   ObservedGenerationAccessor
	u    *unstructured.Unstructured
	v    reflect.Value // the struct behind a typed object's pointer
	l    *layout       // nil for unstructured
}

// StatusOf resolves obj's status accessor. It fails only for a nil object or
// a value that is neither *unstructured.Unstructured nor a pointer to a
// struct; an object without conditions (a ConfigMap) resolves, and the
// condition methods then return errors wrapping [ErrNoConditions].
func StatusOf(obj client.Object) (*Status, error) {
	if obj == nil || reflect.ValueOf(obj).Kind() == reflect.Pointer && reflect.ValueOf(obj).IsNil() {
		return nil, fmt.Errorf("conditions: nil object: %w", ErrNoConditions)
	}
	s := &Status{obj: obj}
	s.acc, _ = obj.(Accessor)
	s.og, _ = obj.(ObservedGenerationAccessor)
	if u, ok := obj.(*unstructured.Unstructured); ok {
		s.u = u
		return s, nil
	}
	rv := reflect.ValueOf(obj)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("conditions: %T is not a pointer to a struct: %w", obj, ErrNoConditions)
	}
	s.v = rv.Elem()
	s.l = layoutOf(rv.Type())
	return s, nil
}

// Object returns the object this Status reads and writes.
func (s *Status) Object() client.Object { return s.obj }

// describe names the object for error messages: its Go type (or kind) and
// namespace/name.
func (s *Status) describe() string {
	if s.name == "" {
		s.name = describe(s.obj)
	}
	return s.name
}

func objectName(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

func describe(obj client.Object) string {
	return fmt.Sprintf("%s %s", kindOf(obj), objectName(obj))
}

// HasConditions reports whether the object's conditions can be read.
func (s *Status) HasConditions() bool {
	return s.acc != nil || s.u != nil || s.l.conditions != nil || s.l.foreign
}

// Writable reports whether the object's conditions can be written: an
// [Accessor], unstructured content, or a typed status.conditions of type
// []metav1.Condition.
func (s *Status) Writable() bool {
	return s.acc != nil || s.u != nil || s.l.conditions != nil
}

// read returns the object's conditions without copying.
func (s *Status) read() ([]metav1.Condition, error) {
	switch {
	case s.acc != nil:
		return s.acc.GetConditions(), nil
	case s.u != nil:
		cs, err := readConditions(s.u.Object)
		if err != nil {
			return nil, fmt.Errorf("conditions: %s: %w", s.describe(), err)
		}
		return cs, nil
	case s.l.conditions != nil:
		f, ok := s.field(s.l.conditions, false)
		if !ok {
			return nil, nil
		}
		return f.Interface().([]metav1.Condition), nil
	case s.l.foreign:
		// Only the status is converted, not the whole object (a
		// Deployment's pod template is most of it).
		st, ok := walkIndex(s.v, s.l.status, false)
		if !ok {
			return nil, nil
		}
		if st.Kind() == reflect.Pointer {
			if st.IsNil() {
				return nil, nil
			}
			st = st.Elem()
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st.Addr().Interface())
		if err != nil {
			return nil, fmt.Errorf("conditions: %s: %w", s.describe(), err)
		}
		cs, err := readConditions(map[string]any{"status": u})
		if err != nil {
			return nil, fmt.Errorf("conditions: %s: %w", s.describe(), err)
		}
		return cs, nil
	}
	return nil, fmt.Errorf("conditions: %s: %w (%w)", s.describe(), ErrNoConditions, s.l.err)
}

// write replaces the object's conditions; the caller checked Writable.
func (s *Status) write(cs []metav1.Condition) {
	switch {
	case s.acc != nil:
		s.acc.SetConditions(cs)
	case s.u != nil:
		writeUnstructured(s.u, cs)
	default:
		f, _ := s.field(s.l.conditions, true)
		f.Set(reflect.ValueOf(cs))
	}
}

func (s *Status) writable() error {
	if s.Writable() {
		return nil
	}
	if s.l.foreign {
		return fmt.Errorf("conditions: %s: status.conditions is not []metav1.Condition and is read-only here (implement conditions.Accessor): %w",
			s.describe(), ErrNoConditions)
	}
	return fmt.Errorf("conditions: %s: %w (%w)", s.describe(), ErrNoConditions, s.l.err)
}

// ObservedGeneration returns status.observedGeneration and whether the object
// has that field (an [ObservedGenerationAccessor], a typed int64 status field,
// or, for unstructured content, a field that is present).
func (s *Status) ObservedGeneration() (int64, bool) {
	switch {
	case s.og != nil:
		return s.og.GetObservedGeneration(), true
	case s.u != nil:
		v, found, err := unstructured.NestedInt64(s.u.Object, "status", "observedGeneration")
		return v, found && err == nil
	case s.l.observedGen != nil:
		f, ok := s.field(s.l.observedGen, false)
		if !ok {
			return 0, true
		}
		return f.Int(), true
	}
	return 0, false
}

// SetObservedGeneration sets status.observedGeneration to the object's
// metadata.generation. It fails for an object that has no such field: a
// typed status without an int64 observedGeneration field and no
// [ObservedGenerationAccessor]. For *unstructured.Unstructured it always
// writes the field; the caller asserts the schema has it.
func (s *Status) SetObservedGeneration() error {
	if !s.observe(true) {
		return fmt.Errorf("conditions: %s has no status.observedGeneration: %w", s.describe(), ErrNoConditions)
	}
	return nil
}

// observe records status.observedGeneration. Implicitly (explicit=false) it
// writes unstructured content only where the field already exists: a field
// the schema lacks would be pruned by the API server and re-added by every
// reconcile.
func (s *Status) observe(explicit bool) bool {
	gen := s.obj.GetGeneration()
	switch {
	case s.og != nil:
		s.og.SetObservedGeneration(gen)
	case s.u != nil:
		if !explicit {
			if _, found, _ := unstructured.NestedFieldNoCopy(s.u.Object, "status", "observedGeneration"); !found {
				return false
			}
		}
		_ = unstructured.SetNestedField(s.u.Object, gen, "status", "observedGeneration")
	case s.l.observedGen != nil:
		f, _ := s.field(s.l.observedGen, true)
		f.SetInt(gen)
	default:
		return false
	}
	return true
}

// String reads the string status field (of type string, or any type whose
// kind is string) with JSON name name (status.<name>).
// It returns "" and false when the field is unset. It fails with
// [ErrNoStatusField] when a typed object's status has no such string field.
func (s *Status) String(name string) (string, bool, error) {
	if s.u != nil {
		v, found, err := unstructured.NestedString(s.u.Object, "status", name)
		if err != nil {
			return "", false, fmt.Errorf("conditions: %s: status.%s: %w", s.describe(), name, err)
		}
		return v, found && v != "", nil
	}
	idx, err := s.named(name, stringType, false)
	if err != nil {
		return "", false, err
	}
	f, ok := s.field(idx, false)
	if !ok || f.String() == "" {
		return "", false, nil
	}
	return f.String(), true, nil
}

// SetString writes the string status field with JSON name name. For
// unstructured content the CRD schema must declare the field: the API server
// prunes unknown fields.
func (s *Status) SetString(name, value string) error {
	if s.u != nil {
		return unstructured.SetNestedField(s.u.Object, value, "status", name)
	}
	idx, err := s.named(name, stringType, false)
	if err != nil {
		return err
	}
	f, _ := s.field(idx, true)
	f.SetString(value)
	return nil
}

// Time reads the metav1.Time (or *metav1.Time) status field with JSON name
// name. An unset field is the zero time and false.
func (s *Status) Time(name string) (time.Time, bool, error) {
	if s.u != nil {
		ts, found, err := unstructured.NestedString(s.u.Object, "status", name)
		if err != nil {
			return time.Time{}, false, fmt.Errorf("conditions: %s: status.%s: %w", s.describe(), name, err)
		}
		if !found || ts == "" {
			return time.Time{}, false, nil
		}
		var t metav1.Time
		if err := t.UnmarshalQueryParameter(ts); err != nil {
			return time.Time{}, false, fmt.Errorf("conditions: %s: status.%s: %w", s.describe(), name, err)
		}
		return t.Time, true, nil
	}
	idx, err := s.named(name, timeType, true)
	if err != nil {
		return time.Time{}, false, err
	}
	f, ok := s.field(idx, false)
	if !ok {
		return time.Time{}, false, nil
	}
	if f.Kind() == reflect.Pointer {
		if f.IsNil() {
			return time.Time{}, false, nil
		}
		f = f.Elem()
	}
	t := f.Interface().(metav1.Time).Time
	return t, !t.IsZero(), nil
}

// SetTime writes the metav1.Time status field with JSON name name, truncated
// to seconds (what survives the API's RFC 3339 serialisation).
func (s *Status) SetTime(name string, t time.Time) error {
	mt := metav1.NewTime(t).Rfc3339Copy()
	if s.u != nil {
		return unstructured.SetNestedField(s.u.Object, mt.UTC().Format(time.RFC3339), "status", name)
	}
	idx, err := s.named(name, timeType, true)
	if err != nil {
		return err
	}
	f, _ := s.field(idx, true)
	if f.Kind() == reflect.Pointer {
		f.Set(reflect.ValueOf(&mt))
		return nil
	}
	f.Set(reflect.ValueOf(mt))
	return nil
}

// named finds status.<name> of type want (or *want when ptrOK).
func (s *Status) named(name string, want reflect.Type, ptrOK bool) ([]int, error) {
	if s.l.statusType == nil {
		return nil, fmt.Errorf("conditions: %s: status.%s: %w (%w)", s.describe(), name, ErrNoStatusField, s.l.err)
	}
	idx, typ, ok := s.l.lookup(name)
	matches := typ == want || want == stringType && typ != nil && typ.Kind() == reflect.String // a named string type too
	if !ok || !matches && (!ptrOK || typ.Kind() != reflect.Pointer || typ.Elem() != want) {
		return nil, fmt.Errorf("conditions: %s: status.%s: %w (want a %v field with JSON name %q)", s.describe(), name, ErrNoStatusField, want, name)
	}
	return idx, nil
}

// field returns the status field at idx (relative to the status struct). With
// create it allocates a nil status pointer and nil embedded struct pointers on
// the way; without, it reports false when one of them is nil.
func (s *Status) field(idx []int, create bool) (reflect.Value, bool) {
	return walkIndex(s.v, append(slices.Clone(s.l.status), idx...), create)
}

func walkIndex(v reflect.Value, idx []int, create bool) (reflect.Value, bool) {
	for _, i := range idx {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				if !create {
					return reflect.Value{}, false
				}
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	return v, true
}

var (
	conditionSliceType = reflect.TypeFor[[]metav1.Condition]()
	stringType         = reflect.TypeFor[string]()
	timeType           = reflect.TypeFor[metav1.Time]()
)

// layout is where a Go type keeps its status. It depends only on the type.
type layout struct {
	status      []int        // index path of the status field; its type may be a pointer
	statusType  reflect.Type // the status struct type, nil when there is none
	conditions  []int        // within status; nil when not []metav1.Condition
	foreign     bool         // status.conditions exists with another element type
	observedGen []int        // within status; nil when not int64
	err         error        // why conditions are missing, for messages

	mu     sync.Mutex
	fields map[string]fieldRef // status fields by JSON name, filled on demand
}

type fieldRef struct {
	index []int
	typ   reflect.Type
	ok    bool
}

// layouts memoises layout per reflect.Type. It is write-once memoisation of
// facts derived from the type alone (never configuration), so it cannot make
// two callers observe different behaviour.
var layouts sync.Map

func layoutOf(t reflect.Type) *layout {
	if l, ok := layouts.Load(t); ok {
		return l.(*layout)
	}
	l, _ := layouts.LoadOrStore(t, computeLayout(t))
	return l.(*layout)
}

func computeLayout(t reflect.Type) *layout {
	l := &layout{fields: map[string]fieldRef{}}
	sf, ok := fieldByJSONName(t.Elem(), "status")
	if !ok {
		l.err = fmt.Errorf("%v has no status field", t)
		return l
	}
	st := sf.Type
	if st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	if st.Kind() != reflect.Struct {
		l.err = fmt.Errorf("%v: status is %v, not a struct", t, sf.Type)
		return l
	}
	l.status, l.statusType = sf.Index, st
	if cf, ok := fieldByJSONName(st, "conditions"); ok {
		if cf.Type == conditionSliceType {
			l.conditions = cf.Index
		} else {
			l.foreign = true
		}
	}
	if of, ok := fieldByJSONName(st, "observedGeneration"); ok && of.Type.Kind() == reflect.Int64 {
		l.observedGen = of.Index
	}
	if l.conditions == nil && !l.foreign {
		l.err = fmt.Errorf("%v: status has no conditions field", t)
	}
	return l
}

func (l *layout) lookup(name string) ([]int, reflect.Type, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.fields[name]
	if !ok {
		f, found := fieldByJSONName(l.statusType, name)
		r = fieldRef{index: f.Index, typ: f.Type, ok: found}
		l.fields[name] = r
	}
	return r.index, r.typ, r.ok
}

// jsonName is the name encoding/json gives f, and whether its fields are
// promoted into the parent (an embedded struct without a JSON name).
func jsonName(f reflect.StructField) (name string, inline bool) {
	tag, hasTag := f.Tag.Lookup("json")
	name, opts, _ := strings.Cut(tag, ",")
	if tag == "-" {
		return "", false
	}
	ft := f.Type
	if ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
	}
	if f.Anonymous && ft.Kind() == reflect.Struct && (name == "" || strings.Contains(opts, "inline")) {
		return "", true
	}
	if !hasTag || name == "" {
		return f.Name, false
	}
	return name, false
}

// fieldByJSONName finds the field encoding/json serialises as name in struct
// type t, following embedded structs as encoding/json does (a shallower field
// wins; fields of embedded structs are searched breadth-first). Index is the
// path for reflect's FieldByIndex.
func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	type level struct {
		t     reflect.Type
		index []int
	}
	current := []level{{t: t}}
	seen := map[reflect.Type]bool{}
	for len(current) > 0 {
		var next []level
		for _, lv := range current {
			if seen[lv.t] {
				continue
			}
			seen[lv.t] = true
			for i := range lv.t.NumField() {
				f := lv.t.Field(i)
				n, inline := jsonName(f)
				idx := append(slices.Clone(lv.index), i)
				if inline {
					ft := f.Type
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					next = append(next, level{t: ft, index: idx})
					continue
				}
				if f.IsExported() && n == name {
					f.Index = idx
					return f, true
				}
			}
		}
		current = next
	}
	return reflect.StructField{}, false
}

// readConditions reads status.conditions from unstructured content. It is
// lenient about layout, so it also reads condition types other than
// metav1.Condition (e.g. apps/v1 DeploymentCondition): type, status, reason,
// message, lastTransitionTime and observedGeneration are taken when present
// and other fields are ignored. Entries without a type are skipped.
func readConditions(content map[string]any) ([]metav1.Condition, error) {
	raw, found, err := unstructured.NestedSlice(content, "status", "conditions")
	if err != nil {
		return nil, fmt.Errorf("status.conditions: %w", err)
	}
	if !found {
		return nil, nil
	}
	out := make([]metav1.Condition, 0, len(raw))
	for i, item := range raw {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("status.conditions[%d] is %T, not an object", i, item)
		}
		var c metav1.Condition
		c.Type, _ = m["type"].(string)
		if c.Type == "" {
			continue
		}
		st, _ := m["status"].(string)
		c.Status = metav1.ConditionStatus(st)
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
				return nil, fmt.Errorf("status.conditions[%d].lastTransitionTime: %w", i, err)
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
			"lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339),
		}
		if c.ObservedGeneration != 0 {
			m["observedGeneration"] = c.ObservedGeneration
		}
		list = append(list, m)
	}
	_ = unstructured.SetNestedSlice(u.Object, list, "status", "conditions")
}

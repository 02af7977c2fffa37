package ensure

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// A tree is an object in its JSON form (map[string]any, []any, string, int64,
// float64, bool), as unstructured.Unstructured holds it.

// declared returns the fields obj declares: for an *unstructured.Unstructured
// every non-null field; for a typed object every field that is set, where a
// nil pointer, a nil or empty map or slice, and a zero value that is not
// behind a pointer count as unset. That last rule is what makes typed objects
// usable as partial declarations: `Replicas *int32` left nil is "not mine",
// `ptr.To[int32](0)` is "scale to zero", and a required int left at zero is
// indistinguishable from a forgotten one, so it is treated as unset (sending it
// would fight the API server's defaulting every reconcile). Status is never
// part of a declaration, and of metadata only name, namespace, labels,
// annotations, ownerReferences and finalizers are kept.
func declared(obj runtime.Object) (map[string]any, error) {
	var tree map[string]any
	if u, ok := obj.(runtime.Unstructured); ok {
		t, _ := copyDeclared(u.UnstructuredContent())
		tree, _ = t.(map[string]any)
	} else {
		v, set := walk(reflect.ValueOf(obj), false)
		if set {
			tree, _ = v.(map[string]any)
		}
	}
	if tree == nil {
		tree = map[string]any{}
	}
	delete(tree, "status")
	if md, ok := tree["metadata"].(map[string]any); ok {
		for k := range md {
			switch k {
			case "name", "namespace", "labels", "annotations", "ownerReferences", "finalizers":
			default:
				delete(md, k)
			}
		}
	}
	return tree, nil
}

// copyDeclared copies a JSON-like value without its nulls, normalizing Go
// integer types to int64 (users build unstructured objects with plain ints,
// which runtime.DeepCopyJSON refuses); it reports whether anything is left.
func copyDeclared(v any) (any, bool) {
	switch t := v.(type) {
	case nil:
		return nil, false
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			if c, ok := copyDeclared(e); ok {
				out[k] = c
			}
		}
		return out, true
	case []any:
		out := make([]any, 0, len(t))
		for _, e := range t {
			if c, ok := copyDeclared(e); ok {
				out = append(out, c)
			}
		}
		return out, true
	case int:
		return int64(t), true
	case int32:
		return int64(t), true
	case int16:
		return int64(t), true
	case int8:
		return int64(t), true
	case uint32:
		return int64(t), true
	case float32:
		return float64(t), true
	default:
		return v, true
	}
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

// walk converts a typed value to its tree, following encoding/json's field
// naming. explicit says the value was reached through a pointer, a map value or
// a list element, where even a zero value was deliberately set.
func walk(v reflect.Value, explicit bool) (any, bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil, false
		}
		return walk(v.Elem(), true)
	case reflect.Invalid:
		return nil, false
	}
	if v.Kind() == reflect.Struct && infoOf(v.Type()).marshaler {
		// Quantity, Time, IntOrString, RawExtension…: leaves in JSON form.
		if v.IsZero() && !explicit {
			return nil, false
		}
		return marshalLeaf(v)
	}
	switch v.Kind() {
	case reflect.Struct:
		out := map[string]any{}
		walkStruct(v, out)
		if len(out) == 0 && !explicit {
			return nil, false
		}
		return out, true
	case reflect.Map:
		if v.Len() == 0 && !explicit {
			return nil, false
		}
		out := make(map[string]any, v.Len())
		iter := v.MapRange()
		for iter.Next() {
			if e, ok := walk(iter.Value(), true); ok {
				out[fmt.Sprint(iter.Key().Interface())] = e
			}
		}
		return out, true
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			if v.Len() == 0 && !explicit {
				return nil, false
			}
			return marshalLeaf(v)
		}
		if v.Len() == 0 && !explicit {
			return nil, false
		}
		out := make([]any, 0, v.Len())
		for i := range v.Len() {
			if e, ok := walk(v.Index(i), true); ok {
				out = append(out, e)
			}
		}
		return out, true
	case reflect.Bool:
		if !v.Bool() && !explicit {
			return nil, false
		}
		return v.Bool(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Int() == 0 && !explicit {
			return nil, false
		}
		return v.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if v.Uint() == 0 && !explicit {
			return nil, false
		}
		return int64(v.Uint()), true //nolint:gosec // API integers fit in int64
	case reflect.Float32, reflect.Float64:
		if v.Float() == 0 && !explicit {
			return nil, false
		}
		return v.Float(), true
	case reflect.String:
		if v.String() == "" && !explicit {
			return nil, false
		}
		return v.String(), true
	default:
		return nil, false
	}
}

func walkStruct(v reflect.Value, out map[string]any) {
	for _, f := range infoOf(v.Type()).fields {
		fv := v.Field(f.index)
		if f.inline {
			for fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					break
				}
				fv = fv.Elem()
			}
			if fv.Kind() == reflect.Struct {
				walkStruct(fv, out)
			}
			continue
		}
		if e, ok := walk(fv, false); ok {
			out[f.name] = e
		}
	}
}

// typeInfo is what walk needs to know of a Go type, read once per type:
// whether it marshals itself to JSON, and its fields by JSON name.
type typeInfo struct {
	marshaler bool
	fields    []fieldInfo
}

type fieldInfo struct {
	index  int
	name   string
	inline bool
}

// typeInfos memoises typeInfo per reflect.Type. It holds facts derived from
// the type alone (never configuration or objects), written once per type,
// so it cannot make two callers observe different behaviour; it grows only
// with the number of Go types declared.
var typeInfos sync.Map

func infoOf(t reflect.Type) *typeInfo {
	if ti, ok := typeInfos.Load(t); ok {
		return ti.(*typeInfo)
	}
	ti := &typeInfo{marshaler: t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler)}
	if t.Kind() == reflect.Struct {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) {
				ti.fields = append(ti.fields, fieldInfo{index: i, inline: true})
				continue
			}
			if name == "" {
				name = f.Name
			}
			ti.fields = append(ti.fields, fieldInfo{index: i, name: name})
		}
	}
	actual, _ := typeInfos.LoadOrStore(t, ti)
	return actual.(*typeInfo)
}

func marshalLeaf(v reflect.Value) (any, bool) {
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return nil, false
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, false
	}
	if f, ok := out.(float64); ok && f == float64(int64(f)) {
		return int64(f), true
	}
	return out, out != nil
}

// listMode says how lists are compared.
type listMode int

const (
	// lists keyed by the schema (x-kubernetes-list-type: map or set) may hold
	// extra live items (another actor's sidecar, env var, port, finalizer);
	// atomic lists must have exactly the declared items, in order.
	keyedSubset listMode = iota
	// every list must have exactly the declared items, as a JSON merge patch
	// replaces lists whole ([Ensurer.CreateOrPatch]).
	exactLists
)

// subset reports whether every field declared in d has the same value in
// live, sh being d's schema. Fields d does not declare are ignored — that is
// how server defaults, other actors' fields and status never cause a write.
// Items of keyed lists are matched by their schema keys, whatever their order;
// a map the schema calls atomic must have exactly the declared keys (its
// removed keys are a change), a struct it calls atomic only the declared
// fields (the server may default others, as fieldRef.apiVersion).
func subset(d, live any, sh shape, mode listMode) bool {
	switch dv := d.(type) {
	case map[string]any:
		lv, ok := live.(map[string]any)
		if !ok {
			return len(dv) == 0 && live == nil
		}
		for k, e := range dv {
			if !subset(e, lv[k], sh.field(k), mode) {
				return false
			}
		}
		if atomic, isStruct := sh.atomicMap(); atomic && !isStruct {
			for k, e := range lv {
				if _, declared := dv[k]; !declared && e != nil {
					return false
				}
			}
		}
		return true
	case []any:
		lv, ok := live.([]any)
		if !ok {
			return len(dv) == 0 && live == nil
		}
		kind, keys := sh.list()
		if kind == atomicList || mode == exactLists {
			if len(dv) != len(lv) {
				return false
			}
		}
		if kind == atomicList {
			for i := range dv {
				if !subset(dv[i], lv[i], sh.elem(), mode) {
					return false
				}
			}
			return true
		}
		index := indexItems(sh, kind, keys, lv)
		for _, de := range dv {
			pe, ok := sh.itemKey(kind, keys, de)
			if !ok {
				return false
			}
			le, found := index.Get(pe)
			if !found || !subset(de, le, sh.elem(), mode) {
				return false
			}
		}
		return true
	default:
		return scalarEqual(d, live)
	}
}

// indexItems maps each identifiable item of a keyed list to its value (the
// first, when the live list holds duplicates).
func indexItems(sh shape, kind listKind, keys []string, items []any) *fieldpath.PathElementMap {
	m := fieldpath.MakePathElementMap(len(items))
	for _, it := range items {
		pe, ok := sh.itemKey(kind, keys, it)
		if !ok {
			continue
		}
		if _, dup := m.Get(pe); !dup {
			m.Insert(pe, it)
		}
	}
	return &m
}

func scalarEqual(a, b any) bool {
	if x, ok := toFloat(a); ok {
		y, ok := toFloat(b)
		return ok && x == y
	}
	return a == b
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// mergePatch returns the JSON merge patch that makes live hold d: only the
// declared fields that differ, and no null except for the keys d dropped from
// a map the schema calls atomic (a merge patch null deletes, and deleting is
// how a wholesale spec assignment fights the API server's defaults). Lists
// are replaced whole, which replacedList reports so the caller can add an
// optimistic lock. This is [Ensurer.CreateOrPatch]'s patch; [Ensurer.Ensure]
// uses [recordedPatch].
func mergePatch(d, live map[string]any, sh shape) (patch map[string]any, replacedList bool) {
	patch = map[string]any{}
	for k, dv := range d {
		lv := live[k]
		if subset(dv, lv, sh.field(k), exactLists) {
			continue
		}
		dm, dIsMap := dv.(map[string]any)
		lm, lIsMap := lv.(map[string]any)
		if dIsMap && lIsMap {
			sub, rl := mergePatch(dm, lm, sh.field(k))
			if atomic, isStruct := sh.field(k).atomicMap(); atomic && !isStruct {
				// The declaration owns the whole map: keys it dropped go.
				for lk, le := range lm {
					if _, declared := dm[lk]; !declared && le != nil {
						sub[lk] = nil
					}
				}
			}
			patch[k] = sub
			replacedList = replacedList || rl
			continue
		}
		patch[k] = dv
		if hasList(dv) {
			replacedList = true
		}
	}
	return patch, replacedList
}

func hasList(v any) bool {
	switch t := v.(type) {
	case []any:
		return true
	case map[string]any:
		for _, e := range t {
			if hasList(e) {
				return true
			}
		}
	}
	return false
}

// liveTree returns obj's JSON form: an unstructured object's own map, or
// what runtime.DefaultUnstructuredConverter.ToUnstructured returns for a
// typed one (see toTree).
func liveTree(obj runtime.Object) (map[string]any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object, nil
	}
	return toTree(obj)
}

package ensure

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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
	if v.Kind() == reflect.Struct && (v.Type().Implements(jsonMarshaler) || reflect.PointerTo(v.Type()).Implements(jsonMarshaler)) {
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
	t := v.Type()
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
		fv := v.Field(i)
		if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) {
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
		if name == "" {
			name = f.Name
		}
		if e, ok := walk(fv, false); ok {
			out[name] = e
		}
	}
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
	// lists with a merge key may hold extra live elements (another actor's
	// sidecar, env var, port); lists without one must match exactly.
	keyedSubset listMode = iota
	// every list must have exactly the declared elements, as a JSON merge
	// patch replaces lists whole.
	exactLists
)

// subset reports whether every field declared in d has the same value in
// live. Fields d does not declare are ignored — that is how server defaults,
// other actors' fields and status never cause a write.
func subset(d, live any, mode listMode) bool {
	switch dv := d.(type) {
	case map[string]any:
		lv, ok := live.(map[string]any)
		if !ok {
			return len(dv) == 0 && live == nil
		}
		for k, e := range dv {
			if !subset(e, lv[k], mode) {
				return false
			}
		}
		return true
	case []any:
		lv, ok := live.([]any)
		if !ok {
			return len(dv) == 0 && live == nil
		}
		key := listKey(dv)
		if key == "" || mode == exactLists {
			if len(dv) != len(lv) {
				return false
			}
		}
		if key == "" {
			for i := range dv {
				if !subset(dv[i], lv[i], mode) {
					return false
				}
			}
			return true
		}
		for _, de := range dv {
			le := findByKey(lv, de.(map[string]any), key)
			if le == nil || !subset(de, le, mode) {
				return false
			}
		}
		return true
	default:
		return scalarEqual(d, live)
	}
}

// listKeys are the merge keys of the Kubernetes API's associative lists, in
// the order tried: ownerReferences by uid; containers, env, volumes, ports…
// by name; ports by number; volumeMounts by mountPath.
var listKeys = []string{"uid", "name", "containerPort", "port", "mountPath", "devicePath"}

// listKey returns the field that identifies the elements of a declared list
// of objects, or "" when the list is compared by position.
func listKey(l []any) string {
	if len(l) == 0 {
		return ""
	}
	for _, k := range listKeys {
		seen := make(map[any]bool, len(l))
		ok := true
		for _, e := range l {
			m, isMap := e.(map[string]any)
			if !isMap {
				return ""
			}
			v, has := m[k]
			if !has || seen[fmt.Sprint(v)] {
				ok = false
				break
			}
			seen[fmt.Sprint(v)] = true
		}
		if ok {
			return k
		}
	}
	return ""
}

func findByKey(live []any, d map[string]any, key string) map[string]any {
	for _, e := range live {
		m, ok := e.(map[string]any)
		if !ok || !scalarEqual(d[key], m[key]) {
			continue
		}
		// A port is identified by number and protocol; protocol defaults to TCP.
		if p, ok := d["protocol"]; ok && (key == "port" || key == "containerPort") && !scalarEqual(p, m["protocol"]) {
			continue
		}
		return m
	}
	return nil
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
// declared fields that differ, never a null (a merge patch null deletes, and
// deleting is how a wholesale spec assignment fights the API server's
// defaults). Lists are replaced whole, which replacedList reports so the
// caller can add an optimistic lock.
func mergePatch(d, live map[string]any) (patch map[string]any, replacedList bool) {
	patch = map[string]any{}
	for k, dv := range d {
		lv := live[k]
		if subset(dv, lv, exactLists) {
			continue
		}
		dm, dIsMap := dv.(map[string]any)
		lm, lIsMap := lv.(map[string]any)
		if dIsMap && lIsMap {
			sub, rl := mergePatch(dm, lm)
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

// liveTree returns obj's JSON form.
func liveTree(obj runtime.Object) (map[string]any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object, nil
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

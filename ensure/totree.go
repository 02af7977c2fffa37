package ensure

import (
	"encoding/base64"
	"errors"
	"math"
	"reflect"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// toTree returns what runtime.DefaultUnstructuredConverter.ToUnstructured
// returns for obj, a pointer to a typed object, built in about half the
// time with 40% less garbage (BenchmarkLiveTree: a cached Deployment,
// 37µs and 15 KiB → 18µs and 9 KiB): it follows the converter's rules
// exactly (json field names; omitempty as the converter reads it, so a
// zero field without it stays, a nil one as null; omitzero; anonymous
// fields inlined; the converter's custom leaves — Time, Quantity,
// IntOrString… — converted by the same structured-merge-diff entry; []byte
// as base64) but reads each struct's field facts once per type, not once
// per field per call, and builds each map and list directly rather than
// through reflect.Value. Anything it does not convert exactly as the
// converter does (an array, a map with non-string keys, an unexported
// field, an inlined field that is not a struct, a channel or func, an
// unsigned value above MaxInt64) makes it hand the whole object to the
// converter, which then answers (or fails) as it always did.
func toTree(obj runtime.Object) (map[string]any, error) {
	v := reflect.ValueOf(obj)
	if v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Kind() == reflect.Struct {
		if ci := convOf(v.Elem().Type()); !ci.custom {
			out := map[string]any{}
			if err := convStruct(v.Elem(), ci, out); err == nil {
				return out, nil
			}
		}
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

// errConvFallback: the value is one toTree leaves to the converter.
var errConvFallback = errors.New("ensure: not converted exactly as runtime.DefaultUnstructuredConverter does")

// convInfo is what toTree needs to know of a Go type, read once per type.
type convInfo struct {
	// custom: the converter converts the type with its structured-merge-diff
	// reflect entry (it implements ToUnstructured or json.Marshaler).
	custom bool
	entry  *value.TypeReflectCacheEntry
	// fields of a struct type, in declaration order; unsupported says a
	// field of it makes toTree fall back.
	fields      []convField
	unsupported bool
}

type convField struct {
	index     int
	name      string // "" for an inlined (anonymous, untagged name) field
	omitempty bool
	omitzero  func(reflect.Value) bool
}

// convInfos memoises convInfo per reflect.Type. Like typeInfos it holds
// facts derived from the type alone, written once per type; it grows only
// with the number of Go types converted.
var convInfos sync.Map

func convOf(t reflect.Type) *convInfo {
	if ci, ok := convInfos.Load(t); ok {
		return ci.(*convInfo)
	}
	entry := value.TypeReflectEntryOf(t)
	ci := &convInfo{custom: entry.CanConvertToUnstructured(), entry: entry}
	if t.Kind() == reflect.Struct {
		for i := range t.NumField() {
			f := t.Field(i)
			// As the converter names fields (fieldInfoFromField, Go < 1.27).
			tag, tagged := f.Tag.Lookup("json")
			var fi convField
			if !tagged || tag == "" {
				if !f.Anonymous {
					fi.name = f.Name
				}
			} else {
				items := strings.Split(tag, ",")
				fi.name = items[0]
				if fi.name == "" && !f.Anonymous {
					fi.name = f.Name
				}
				for _, it := range items[1:] {
					switch it {
					case "omitempty":
						fi.omitempty = true
					case "omitzero":
						fi.omitzero = value.OmitZeroFunc(f.Type)
					}
				}
			}
			if fi.name == "-" {
				continue
			}
			if !f.IsExported() {
				ci.unsupported = true
			}
			fi.index = i
			ci.fields = append(ci.fields, fi)
		}
	}
	actual, _ := convInfos.LoadOrStore(t, ci)
	return actual.(*convInfo)
}

// convStruct adds the fields of struct v to out, as structToUnstructured.
func convStruct(v reflect.Value, ci *convInfo, out map[string]any) error {
	if ci.unsupported {
		return errConvFallback
	}
	for _, f := range ci.fields {
		fv := v.Field(f.index)
		if f.omitempty && convEmpty(fv) || f.omitzero != nil && f.omitzero(fv) {
			continue
		}
		if f.name == "" {
			iv, ici, err := inlined(fv)
			if err != nil {
				return err
			}
			if ici != nil {
				if err := convStruct(iv, ici, out); err != nil {
					return err
				}
			}
			continue
		}
		e, err := convFieldValue(fv)
		if err != nil {
			return err
		}
		out[f.name] = e
	}
	return nil
}

// inlined is the struct an anonymous, untagged field fv inlines (through
// pointers) and its convInfo; a nil convInfo when a pointer on the way is
// nil (the converter stores nothing), errConvFallback when it is not a
// struct toTree converts itself.
func inlined(fv reflect.Value) (reflect.Value, *convInfo, error) {
	for fv.Kind() == reflect.Pointer {
		if fv.IsNil() {
			return fv, nil, nil
		}
		fv = fv.Elem()
	}
	ci := convOf(fv.Type())
	if fv.Kind() != reflect.Struct || ci.custom {
		return fv, nil, errConvFallback
	}
	return fv, ci, nil
}

// convFieldValue converts the value of a struct's named field, as
// structToUnstructured: the converter takes a scalar field's value as is,
// before it looks for a custom conversion of its type.
func convFieldValue(fv reflect.Value) (any, error) {
	if e, ok, err := convScalar(fv); ok {
		return e, err
	}
	return convValue(fv)
}

// convScalar converts a string, bool, integer or float value as the
// converter does; ok is false for any other kind.
func convScalar(v reflect.Value) (_ any, ok bool, _ error) {
	switch v.Kind() {
	case reflect.String:
		return v.String(), true, nil
	case reflect.Bool:
		return v.Bool(), true, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int(), true, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if v.Uint() > math.MaxInt64 {
			return nil, true, errConvFallback
		}
		return int64(v.Uint()), true, nil //nolint:gosec // at most MaxInt64, checked above
	case reflect.Float32, reflect.Float64:
		return v.Float(), true, nil
	}
	return nil, false, nil
}

// convValue converts one value, as toUnstructured.
func convValue(v reflect.Value) (any, error) {
	ci := convOf(v.Type())
	if ci.custom {
		return ci.entry.ToUnstructured(v)
	}
	if e, ok, err := convScalar(v); ok {
		return e, err
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil, nil
		}
		return convValue(v.Elem())
	case reflect.Map:
		if v.IsNil() {
			return nil, nil
		}
		if v.Type().Key().Kind() != reflect.String {
			return nil, errConvFallback
		}
		out := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			e, err := convValue(it.Value())
			if err != nil {
				return nil, err
			}
			out[it.Key().String()] = e
		}
		return out, nil
	case reflect.Slice:
		if v.IsNil() {
			return nil, nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return base64.StdEncoding.EncodeToString(v.Bytes()), nil
		}
		out := make([]any, v.Len())
		for i := range out {
			e, err := convValue(v.Index(i))
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	case reflect.Struct:
		out := map[string]any{}
		if err := convStruct(v, ci, out); err != nil {
			return nil, err
		}
		return out, nil
	default:
		return nil, errConvFallback
	}
}

// convEmpty is the converter's isEmpty (what omitempty skips).
func convEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Map, reflect.Slice:
		return v.IsNil() || v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// toTreeWithin returns the part of toTree(obj) that want names: at each
// level of a struct, only the fields whose JSON names are keys of want, each
// with exactly the value toTree gives it, except that a field whose want
// value is itself a map and whose value is a struct (through pointers) toTree
// converts field by field is taken only as far as that map names (the same
// rule one level down), unless sh (the field's schema) makes it an atomic
// map that is not a struct, whose every key subset reads. So subset(d, live,
// sh, mode) answers the same on toTreeWithin(obj, want, sh) as on
// toTree(obj) whenever want names every key d has, at every level: subset
// reads no key of live that d lacks, but those of an atomic non-struct map.
// ok is false when toTree would hand obj to the converter (see toTree); the
// caller then converts the whole object.
func toTreeWithin(obj runtime.Object, want map[string]any, sh shape) (map[string]any, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	ci := convOf(v.Elem().Type())
	if ci.custom {
		return nil, false
	}
	out := map[string]any{}
	if err := convStructWithin(v.Elem(), ci, out, want, sh); err != nil {
		return nil, false
	}
	return out, true
}

// convStructWithin adds to out the fields of struct v that want names, as
// toTreeWithin describes and as convStruct converts them.
func convStructWithin(v reflect.Value, ci *convInfo, out, want map[string]any, sh shape) error {
	if ci.unsupported {
		return errConvFallback
	}
	for _, f := range ci.fields {
		fv := v.Field(f.index)
		if f.name == "" {
			if f.omitempty && convEmpty(fv) || f.omitzero != nil && f.omitzero(fv) {
				continue
			}
			// Inlined: its fields are this level's, as convStruct reads them.
			iv, ici, err := inlined(fv)
			if err != nil {
				return err
			}
			if ici != nil {
				if err := convStructWithin(iv, ici, out, want, sh); err != nil {
					return err
				}
			}
			continue
		}
		w, named := want[f.name]
		if !named {
			continue
		}
		if f.omitempty && convEmpty(fv) || f.omitzero != nil && f.omitzero(fv) {
			continue
		}
		if sub, ok := w.(map[string]any); ok {
			if e, done, err := convWithin(fv, sub, sh.field(f.name)); err != nil {
				return err
			} else if done {
				out[f.name] = e
				continue
			}
		}
		e, err := convFieldValue(fv)
		if err != nil {
			return err
		}
		out[f.name] = e
	}
	return nil
}

// convWithin converts the field value fv as far as want names, when fv is
// a struct toTree converts field by field (through nil-checked pointers
// that have no custom conversion either) and sh is not an atomic non-struct
// map; done is false otherwise (the caller converts fv whole).
func convWithin(fv reflect.Value, want map[string]any, sh shape) (_ any, done bool, _ error) {
	if atomic, isStruct := sh.atomicMap(); atomic && !isStruct {
		return nil, false, nil
	}
	for {
		ci := convOf(fv.Type())
		if ci.custom {
			return nil, false, nil
		}
		switch fv.Kind() {
		case reflect.Pointer:
			if fv.IsNil() {
				return nil, true, nil // as convValue: a nil pointer is null
			}
			fv = fv.Elem()
			continue
		case reflect.Struct:
			m := map[string]any{}
			if err := convStructWithin(fv, ci, m, want, sh); err != nil {
				return nil, false, err
			}
			return m, true, nil
		}
		return nil, false, nil
	}
}

package ensure

import (
	"context"
	"fmt"
	"maps"
	"math"
	"reflect"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// declaredOnlyMemo bounds how many distinct records a [DeclaredOnly] keeps
// parsed. A record holds field paths and list keys, not values, so an
// operator's children share a handful of them; past the bound the memo
// starts again (a parse costs a few microseconds).
const declaredOnlyMemo = 1024

// DeclaredOnly is a cache transform (its [DeclaredOnly.Transform] goes into
// cache.Options.ByObject[…].Transform) that keeps, of each cached child
// [Ensurer.Ensure] wrote, only what Ensure compares: apiVersion, kind, the
// whole metadata, the whole status, and of everything else only the fields
// the child's [AnnotationDeclared] record lists — each recorded leaf, atomic
// list or atomic map whole, each recorded map key and keyed-list item with
// its recorded fields. Fields the operator never declared (server defaults
// such as a PodSpec's dnsPolicy, schedulerName and a container's
// terminationMessagePath; a Service's clusterIP; other actors' keyed-list
// items) are dropped from the cached copy; they stay on the API server.
//
// Guarantees:
//
//   - What Ensure compares is unchanged: a declared field holds the value
//     the API server sent, so a declared field that drifted is a difference
//     and is corrected, and a no-op Ensure stays free.
//   - An object without a record (not written by Ensure, or written before
//     records existed), with a record that cannot be parsed, or that is not
//     a metav1.Object passes through unchanged. A list item that cannot be
//     matched against the record for certain (a key field missing or not a
//     scalar) is kept whole.
//   - Cost per object the informer receives: one lookup of the record
//     string in a memo of parsed records (a parse only for a record not seen
//     before), then one walk of the object's spec; no conversion to or from
//     unstructured.
//
// What it changes for readers: every reader of the cache (a status step, a
// mapping function, [Ensurer.CreateOrPatch]) sees children of the kind
// without their undeclared fields, and with [AnnotationTrimmed] set. Use it
// only for kinds whose undeclared fields nobody reads from the cache. The
// Ensurer needs no option for it: a cached child carrying
// [AnnotationTrimmed] is read past the cache ([WithAPIReader], which must be
// an uncached reader) before a [MergePatch] write (a merge patch sends keyed
// lists whole, built from the live object) and before
// [Ensurer.CreateOrPatch]'s mutate function sees it, so fields and keyed-list
// items others set stay; a changed child costs one GET more, a no-op still
// costs nothing. Never write a trimmed cached copy back with an Update.
//
// A DeclaredOnly is safe for concurrent use by several informers.
type DeclaredOnly struct {
	keep    *fieldpath.Set
	mu      sync.Mutex
	records map[string]*parsedRecord
}

// parsedRecord is a memo entry of a [DeclaredOnly]: a record's field set
// (nil when the record is not one) and the annotations map it last marked
// for an object with that record.
type parsedRecord struct {
	set    *fieldpath.Set
	marked map[string]string // guarded by DeclaredOnly.mu
}

// NewDeclaredOnly returns a [DeclaredOnly] that also keeps, whole, the
// fields at keep (dot-separated field names from the object's root, e.g.
// "spec.replicas", as in [WithCreateOnly]) whether or not the record
// declares them: undeclared fields a reader of the cache needs (a status
// step reading the replicas an autoscaler set).
func NewDeclaredOnly(keep ...string) *DeclaredOnly {
	d := &DeclaredOnly{keep: &fieldpath.Set{}, records: map[string]*parsedRecord{}}
	for _, p := range splitPaths(keep) {
		path := make(fieldpath.Path, 0, len(p))
		for _, f := range p {
			path = append(path, fieldpath.PathElement{FieldName: &f})
		}
		d.keep.Insert(path)
	}
	return d
}

// Transform trims obj in place to what its record declares, as
// [DeclaredOnly] describes, sets [AnnotationTrimmed] on it and returns it.
// The annotations map with the mark is a new map, or the one the previous
// object with the same record got when that one holds exactly the same
// annotations: cached objects are read-only, so equal maps can be one. It
// never returns an error.
func (d *DeclaredOnly) Transform(obj any) (any, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	rec := m.GetAnnotations()[AnnotationDeclared]
	if rec == "" {
		return obj, nil
	}
	pr := d.parsed(rec)
	set := pr.set
	if set == nil {
		return obj, nil
	}
	m.SetAnnotations(d.mark(pr, m.GetAnnotations()))
	if u, ok := obj.(*unstructured.Unstructured); ok {
		for k, v := range u.Object {
			switch k {
			case "apiVersion", "kind", "metadata", "status":
				continue
			}
			if kept, keep := trimTree(v, set, k); keep {
				u.Object[k] = kept
			} else {
				delete(u.Object, k)
			}
		}
		return obj, nil
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return obj, nil
	}
	trimStruct(v.Elem(), set, true)
	return obj, nil
}

// parsed returns the memo entry of rec, parsing rec once per distinct
// string; its set is nil when rec is not a field set.
func (d *DeclaredOnly) parsed(rec string) *parsedRecord {
	d.mu.Lock()
	pr, ok := d.records[rec]
	d.mu.Unlock()
	if ok {
		return pr
	}
	pr = &parsedRecord{set: &fieldpath.Set{}}
	if err := pr.set.FromJSON(strings.NewReader(rec)); err != nil {
		pr.set = nil
	} else if !d.keep.Empty() {
		pr.set = pr.set.Union(d.keep)
	}
	d.mu.Lock()
	if len(d.records) >= declaredOnlyMemo {
		clear(d.records)
	}
	d.records[rec] = pr
	d.mu.Unlock()
	return pr
}

// mark returns annotations with [AnnotationTrimmed] set, as a new map or as
// the map it returned for the previous object with the same record when
// that map holds exactly these annotations and the mark: siblings of
// different owners whose annotations are only ensure's record (the usual
// child) then share one map in the cache instead of one each.
func (d *DeclaredOnly) mark(pr *parsedRecord, annotations map[string]string) map[string]string {
	d.mu.Lock()
	last := pr.marked
	d.mu.Unlock()
	if isMarked(last, annotations) {
		return last
	}
	marked := make(map[string]string, len(annotations)+1)
	maps.Copy(marked, annotations)
	marked[AnnotationTrimmed] = "true"
	d.mu.Lock()
	pr.marked = marked
	d.mu.Unlock()
	return marked
}

// isMarked reports whether marked holds exactly annotations with
// [AnnotationTrimmed] set to "true".
func isMarked(marked, annotations map[string]string) bool {
	if marked == nil || marked[AnnotationTrimmed] != "true" {
		return false
	}
	n := len(annotations)
	if _, ok := annotations[AnnotationTrimmed]; !ok {
		n++
	}
	if len(marked) != n {
		return false
	}
	for k, v := range annotations {
		if k == AnnotationTrimmed {
			continue
		}
		if w, ok := marked[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// trimTree trims the JSON value at field name of a map whose declared
// fields are set; keep is false when nothing of it is declared.
func trimTree(v any, set *fieldpath.Set, name string) (kept any, keep bool) {
	pe := fieldpath.PathElement{FieldName: &name}
	if set.Members.Has(pe) {
		return v, true
	}
	sub, ok := set.Children.Get(pe)
	if !ok {
		return nil, false
	}
	return trimValue(v, sub), true
}

// trimValue trims a JSON value whose declared fields (relative to it) are set.
func trimValue(v any, set *fieldpath.Set) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if kept, keep := trimTree(e, set, k); keep {
				t[k] = kept
			} else {
				delete(t, k)
			}
		}
		return t
	case []any:
		out := t[:0]
		for _, it := range t {
			pe, known := itemElement(set, func(name string) (any, bool) {
				m, ok := it.(map[string]any)
				if !ok {
					return nil, false
				}
				f, ok := m[name]
				return f, ok && f != nil
			}, it)
			switch {
			case !known:
				out = append(out, it) // cannot tell: keep it whole
			case pe == nil:
				// not declared: drop
			default:
				if sub, ok := set.Children.Get(*pe); ok {
					it = trimValue(it, sub)
				}
				out = append(out, it)
			}
		}
		clear(t[len(out):])
		return out
	}
	return v
}

// itemElement finds the path element of set (a list's declared items) that
// names a list item: field reads one of the item's key fields, scalar is the
// item itself. It returns nil, true when the item is certainly not declared,
// and known false when the item cannot be matched for certain.
func itemElement(set *fieldpath.Set, field func(string) (any, bool), scalar any) (pe *fieldpath.PathElement, known bool) {
	known = true
	try := func(e fieldpath.PathElement) bool {
		switch {
		case e.Key != nil:
			for _, f := range *e.Key {
				got, ok := field(f.Name)
				if !ok {
					known = false
					return false
				}
				gv, ok := scalarValue(got)
				if !ok {
					known = false
					return false
				}
				if !value.Equals(gv, f.Value) {
					return false
				}
			}
			return true
		case e.Value != nil:
			sv, ok := scalarValue(scalar)
			if !ok {
				known = false
				return false
			}
			return value.Equals(sv, *e.Value)
		default:
			// An index (not written by ensure): cannot tell.
			known = false
			return false
		}
	}
	var found *fieldpath.PathElement
	visit := func(e fieldpath.PathElement) {
		if found == nil && try(e) {
			found = &e
		}
	}
	set.Members.Iterate(visit)
	set.Children.Iterate(visit)
	if found != nil {
		return found, true
	}
	return nil, known
}

// scalarValue is v as a structured-merge-diff value when it is a scalar
// (numbers normalised as ensure's record does).
func scalarValue(v any) (value.Value, bool) {
	if rv, ok := v.(reflect.Value); ok {
		for rv.Kind() == reflect.Pointer {
			if rv.IsNil() {
				return nil, false
			}
			rv = rv.Elem()
		}
		switch rv.Kind() {
		case reflect.String:
			v = rv.String()
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			v = rv.Int()
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			u := rv.Uint()
			if u > math.MaxInt64 {
				return nil, false
			}
			v = int64(u)
		case reflect.Bool:
			v = rv.Bool()
		case reflect.Float32, reflect.Float64:
			v = rv.Float()
		default:
			return nil, false
		}
	}
	switch v.(type) {
	case map[string]any, []any, nil:
		return nil, false
	}
	return value.NewValueInterface(normalizeNumber(v)), true
}

// trimStruct trims a typed struct whose declared fields are set; top keeps
// an object's apiVersion, kind, metadata and status whole.
func trimStruct(v reflect.Value, set *fieldpath.Set, top bool) {
	t := v.Type()
	for _, fi := range infoOf(t).fields {
		fv := v.Field(fi.index)
		if fi.inline {
			if top && t.Field(fi.index).Type == reflect.TypeFor[metav1.TypeMeta]() {
				continue
			}
			for fv.Kind() == reflect.Pointer && !fv.IsNil() {
				fv = fv.Elem()
			}
			if fv.Kind() == reflect.Struct {
				trimStruct(fv, set, false)
			}
			continue
		}
		name := fi.name
		if top {
			switch name {
			case "apiVersion", "kind", "metadata", "status":
				continue
			}
		}
		pe := fieldpath.PathElement{FieldName: &name}
		if set.Members.Has(pe) {
			continue
		}
		sub, ok := set.Children.Get(pe)
		if !ok {
			if !fv.IsZero() {
				fv.Set(reflect.Zero(fv.Type()))
			}
			continue
		}
		trimReflect(fv, sub)
	}
}

// trimReflect trims a typed value (settable) whose declared fields are set.
func trimReflect(v reflect.Value, set *fieldpath.Set) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			trimReflect(v.Elem(), set)
		}
	case reflect.Struct:
		if v.Type().Implements(jsonMarshaler) || reflect.PointerTo(v.Type()).Implements(jsonMarshaler) {
			return // a leaf in JSON form (Quantity, Time, IntOrString…)
		}
		trimStruct(v, set, false)
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		iter := v.MapRange()
		var drop []reflect.Value
		for iter.Next() {
			k := iter.Key().String()
			pe := fieldpath.PathElement{FieldName: &k}
			if set.Members.Has(pe) {
				continue
			}
			sub, ok := set.Children.Get(pe)
			if !ok {
				drop = append(drop, iter.Key())
				continue
			}
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(iter.Value())
			trimReflect(e, sub)
			v.SetMapIndex(iter.Key(), e)
		}
		for _, k := range drop {
			v.SetMapIndex(k, reflect.Value{})
		}
	case reflect.Slice:
		n := 0
		for i := range v.Len() {
			it := v.Index(i)
			pe, known := itemElement(set, func(name string) (any, bool) {
				f, ok := fieldByJSONName(it, name)
				return f, ok
			}, it)
			switch {
			case !known:
			case pe == nil:
				continue // not declared: drop
			default:
				if sub, ok := set.Children.Get(*pe); ok {
					trimReflect(it, sub)
				}
			}
			if n != i {
				v.Index(n).Set(it)
			}
			n++
		}
		if n == v.Len() {
			return
		}
		// A new backing array, so the dropped items are not kept alive.
		out := reflect.MakeSlice(v.Type(), n, n)
		reflect.Copy(out, v.Slice(0, n))
		if n == 0 {
			out = reflect.Zero(v.Type())
		}
		v.Set(out)
	}
}

// fieldByJSONName returns the field of struct v (through pointers and
// inline structs) that encoding/json names name, as a reflect.Value; ok is
// false when there is none or it holds its zero value.
func fieldByJSONName(v reflect.Value, name string) (any, bool) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil, false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil, false
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "" && (f.Anonymous || strings.Contains(opts, "inline")) {
			if got, ok := fieldByJSONName(v.Field(i), name); ok {
				return got, true
			}
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			fv := v.Field(i)
			if fv.IsZero() {
				// A nil pointer, or a zero value encoding/json may omit:
				// ensure's record then named the item by the schema's
				// default, which a typed object does not show.
				return nil, false
			}
			return fv, true
		}
	}
	return nil, false
}

// AnnotationTrimmed marks a cached copy that [DeclaredOnly] trimmed. It is
// set by the cache transform on the cache's copy only and never written to
// the API server; an Ensurer that finds it on a cached child reads the
// child past the cache before a write computed from the whole object.
const AnnotationTrimmed = "ensure.opkit.dev/trimmed"

// trimmedLive returns live, or, when live is a copy [DeclaredOnly] trimmed
// (it carries [AnnotationTrimmed]), the object read past the cache.
func (e *Ensurer) trimmedLive(ctx context.Context, t *target, live map[string]any) (map[string]any, error) {
	if live == nil {
		return live, nil
	}
	if s, _, _ := unstructured.NestedString(live, "metadata", "annotations", AnnotationTrimmed); s == "" {
		return live, nil
	}
	fresh, err := e.readLive(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("get %s (its cached copy holds only declared fields): %w", t, err)
	}
	return fresh, nil
}

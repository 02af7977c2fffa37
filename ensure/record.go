package ensure

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// AnnotationDeclared records, on every child [Ensurer.Ensure] writes, which
// fields its last write declared: a field set in the notation of
// managedFields' fieldsV1 (`{"f:data":{"f:extra.txt":{}}}`: each leaf, map
// key and keyed list item, an atomic list or map as one entry), without the
// owner link ensure always sets. It is how ensure knows, with nothing but the
// cached object, what the operator set and no longer declares — and so must
// remove — while every field it never declared (server defaults, other
// actors' labels, an HPA's replicas) stays untouched. Deleting the annotation
// makes ensure forget what it set before: the next write records the current
// declaration again, and a field dropped meanwhile is left as it is.
const AnnotationDeclared = "ensure.opkit.dev/declared"

// fieldSet returns the fields tree declares, sh being its schema: every
// scalar leaf; every key of a map (not the fields of a struct) as a member;
// every item of a keyed list, as a member and with its own fields; an atomic
// list, an atomic map, an empty map or list as one leaf.
func fieldSet(tree any, sh shape) *fieldpath.Set {
	set := &fieldpath.Set{}
	addFields(set, fieldpath.Path{}, tree, sh)
	return set
}

func addFields(set *fieldpath.Set, path fieldpath.Path, v any, sh shape) {
	switch t := v.(type) {
	case map[string]any:
		atomic, _ := sh.atomicMap()
		if atomic || len(t) == 0 {
			set.Insert(path)
			return
		}
		a, known := sh.atom()
		for k, e := range t {
			p := append(path.Copy(), fieldpath.PathElement{FieldName: &k})
			addFields(set, p, e, sh.field(k))
			isField := false
			if known && a.Map != nil {
				_, isField = a.FindField(k)
			}
			if !isField {
				set.Insert(p)
			}
		}
	case []any:
		kind, keys := sh.list()
		if kind == atomicList || len(t) == 0 {
			set.Insert(path)
			return
		}
		for _, it := range t {
			pe, ok := sh.itemKey(kind, keys, it)
			if !ok {
				// An item without its key cannot be merged; own the list whole.
				set.Insert(path)
				continue
			}
			p := append(path.Copy(), pe)
			set.Insert(p)
			if kind == mapList {
				addFields(set, p, it, sh.elem())
			}
		}
	default:
		set.Insert(path)
	}
}

// recordOf reads the record a previous write left on live; nil when there is
// none (a child written before ensure kept records, or by someone else) or
// it cannot be read — then nothing is removed.
func recordOf(live map[string]any) *fieldpath.Set {
	s, _, _ := unstructured.NestedString(live, "metadata", "annotations", AnnotationDeclared)
	if s == "" {
		return nil
	}
	set := &fieldpath.Set{}
	if err := set.FromJSON(strings.NewReader(s)); err != nil {
		return nil
	}
	return set
}

// merged returns live with the fields in rm removed and decl laid over it, as
// the API server would merge an apply of decl by a manager that owned rm and
// decl's fields before: map keys and keyed list items nobody declared (other
// actors', the server's) are kept; atomic lists and maps are replaced whole.
// live is not modified (it may be shared with a cache record).
func merged(live, decl any, rm *fieldpath.Set, sh shape) any {
	switch dv := decl.(type) {
	case map[string]any:
		lv, ok := live.(map[string]any)
		if atomic, _ := sh.atomicMap(); atomic || !ok {
			return runtime.DeepCopyJSONValue(dv)
		}
		out := removed(lv, rm, sh, dv).(map[string]any)
		for k, e := range dv {
			out[k] = merged(lv[k], e, rm.WithPrefix(fieldpath.PathElement{FieldName: &k}), sh.field(k))
		}
		return out
	case []any:
		lv, ok := live.([]any)
		kind, keys := sh.list()
		if kind == atomicList || !ok {
			return runtime.DeepCopyJSONValue(dv)
		}
		return mergedList(lv, dv, rm, sh, kind, keys)
	default:
		return decl
	}
}

// mergedList merges a keyed list. Items keep live's order: declared items
// take the places of live's declared items in declaration order, items only
// others declared stay where they are, new items go last.
func mergedList(lv, dv []any, rm *fieldpath.Set, sh shape, kind listKind, keys []string) []any {
	declaredAt := fieldpath.MakePathElementMap(len(dv))
	for _, d := range dv {
		if pe, ok := sh.itemKey(kind, keys, d); ok {
			declaredAt.Insert(pe, d)
		}
	}
	liveAt := indexItems(sh, kind, keys, lv)
	out := make([]any, 0, len(lv)+len(dv))
	next := 0
	take := func() {
		d := dv[next]
		next++
		dpe, _ := sh.itemKey(kind, keys, d)
		lItem, _ := liveAt.Get(dpe)
		out = append(out, mergedItem(lItem, d, rm.WithPrefix(dpe), sh.elem(), kind))
	}
	for _, l := range lv {
		pe, ok := sh.itemKey(kind, keys, l)
		if !ok {
			out = append(out, l)
			continue
		}
		if _, mine := declaredAt.Get(pe); mine {
			// A slot for the next declared item (none left: a live duplicate).
			if next < len(dv) {
				take()
			}
			continue
		}
		if rm.Members.Has(pe) {
			continue // declared before, not any more
		}
		if kind == mapList {
			if sub := rm.WithPrefix(pe); !sub.Empty() {
				l = removed(l, sub, sh.elem(), nil)
			}
		}
		out = append(out, l)
	}
	for next < len(dv) {
		take()
	}
	return out
}

func mergedItem(live, decl any, rm *fieldpath.Set, sh shape, kind listKind) any {
	if kind == setList || live == nil {
		return runtime.DeepCopyJSONValue(decl)
	}
	return merged(live, decl, rm, sh)
}

// removed returns v without the fields in rm that decl (the declaration at
// the same place, nil when there is none) does not declare again. Maps left
// empty by a removal are returned as nil, for the caller to drop.
func removed(v any, rm *fieldpath.Set, sh shape, decl map[string]any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = e
		}
		if rm == nil || rm.Empty() {
			return out
		}
		rm.Members.Iterate(func(pe fieldpath.PathElement) {
			if pe.FieldName == nil {
				return
			}
			if _, again := decl[*pe.FieldName]; !again {
				delete(out, *pe.FieldName)
			}
		})
		rm.Children.Iterate(func(pe fieldpath.PathElement) {
			if pe.FieldName == nil {
				return
			}
			k := *pe.FieldName
			if _, again := decl[k]; again {
				return // merged handles it, with the declared value
			}
			cur, ok := out[k]
			if !ok {
				return
			}
			if r := removed(cur, rm.WithPrefix(pe), sh.field(k), nil); isEmptyContainer(r) && !isEmptyContainer(cur) {
				delete(out, k)
			} else {
				out[k] = r
			}
		})
		return out
	case []any:
		kind, keys := sh.list()
		if kind == atomicList || rm == nil || rm.Empty() {
			return t
		}
		out := make([]any, 0, len(t))
		for _, it := range t {
			pe, ok := sh.itemKey(kind, keys, it)
			switch {
			case !ok:
			case rm.Members.Has(pe):
				continue
			case kind == mapList:
				if sub := rm.WithPrefix(pe); !sub.Empty() {
					it = removed(it, sub, sh.elem(), nil)
				}
			}
			out = append(out, it)
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return v
}

func isEmptyContainer(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

// recordedPatch returns the JSON merge patch that turns live into want: a
// null for each key live has and want does not, changed values for the rest,
// lists replaced whole (replacedList reports that, for the caller's
// optimistic lock).
func recordedPatch(live, want map[string]any) (patch map[string]any, replacedList bool) {
	patch = map[string]any{}
	for k, lv := range live {
		if _, ok := want[k]; !ok && lv != nil {
			patch[k] = nil
		}
	}
	for k, wv := range want {
		lv := live[k]
		if equalTree(lv, wv) {
			continue
		}
		wm, wIsMap := wv.(map[string]any)
		lm, lIsMap := lv.(map[string]any)
		if wIsMap && lIsMap {
			sub, rl := recordedPatch(lm, wm)
			patch[k] = sub
			replacedList = replacedList || rl
			continue
		}
		patch[k] = wv
		if hasList(wv) {
			replacedList = true
		}
	}
	return patch, replacedList
}

// equalTree compares two JSON trees, numbers by value.
func equalTree(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, e := range x {
			f, ok := y[k]
			if !ok || !equalTree(e, f) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalTree(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return scalarEqual(a, b)
}

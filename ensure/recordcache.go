package ensure

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// maxRecordShapes bounds an Ensurer's cache of records (recordCache): the
// distinct declaration shapes it keeps. An operator has a handful per kind
// (a WebApp's Deployment with or without a sidecar…), so the bound is only
// reached by declarations whose keys vary per owner (a label per owner):
// the cache then starts over, and costs what computing the record costs.
const maxRecordShapes = 256

// recordCache remembers the record ([AnnotationDeclared]) of each
// declaration shape an Ensurer saw. A record lists field paths only, never
// values: it is a function of the kind's schema and of the declaration's
// shape (its map keys, which values are maps, lists or scalars, and the key
// of each item of a keyed list). Thousands of owners declare their children
// in one shape with different values, so the field set is built once per
// shape instead of once per child and reconcile. The cached sets are shared
// and never modified.
type recordCache struct {
	mu      sync.Mutex
	entries map[string]cachedRecord
}

type cachedRecord struct {
	set *fieldpath.Set
	rec string
}

// get returns the record of decl (linked to owner by [Ensurer.link]) and
// its field set, computing it with build when the shape is new.
func (c *recordCache) get(gvk schema.GroupVersionKind, owner types.UID, decl map[string]any, sh shape,
	build func() (*fieldpath.Set, string, error)) (*fieldpath.Set, string, error) {
	var b strings.Builder
	b.WriteString(gvk.String())
	b.WriteByte('|')
	writeShape(&b, decl, sh, string(owner), atRoot)
	key := b.String()
	c.mu.Lock()
	r, ok := c.entries[key]
	c.mu.Unlock()
	if ok {
		return r.set, r.rec, nil
	}
	set, rec, err := build()
	if err != nil {
		return nil, "", err
	}
	c.mu.Lock()
	if c.entries == nil || len(c.entries) >= maxRecordShapes {
		c.entries = make(map[string]cachedRecord, 16)
	}
	c.entries[key] = cachedRecord{set: set, rec: rec}
	c.mu.Unlock()
	return set, rec, nil
}

// Where writeShape is: the object, its metadata, anywhere else.
const (
	atRoot = iota
	atMetadata
	elsewhere
)

// writeShape writes everything of v that fieldSet (addFields) reads, and
// nothing else: map keys in order, which values are containers, list item
// keys. The owner's own ownerReference (uid owner, added by link and
// removed from the record again with the rest of the link) is written as a
// placeholder, so the shape does not depend on which owner it is.
func writeShape(b *strings.Builder, v any, sh shape, owner string, at int) {
	switch t := v.(type) {
	case map[string]any:
		if atomic, _ := sh.atomicMap(); atomic || len(t) == 0 {
			b.WriteByte('.')
			return
		}
		var buf [16]string
		keys := buf[:0]
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for _, k := range keys {
			b.WriteString(strconv.Itoa(len(k)))
			b.WriteByte(':')
			b.WriteString(k)
			fsh := sh.field(k)
			switch {
			case at == atRoot && k == "metadata":
				writeShape(b, t[k], fsh, owner, atMetadata)
			case at == atMetadata && k == "ownerReferences":
				writeOwnerRefs(b, t[k], fsh, owner)
			default:
				writeShape(b, t[k], fsh, owner, elsewhere)
			}
		}
		b.WriteByte('}')
	case []any:
		kind, keys := sh.list()
		if kind == atomicList || len(t) == 0 {
			b.WriteByte('.')
			return
		}
		b.WriteByte('[')
		for _, it := range t {
			writeItem(b, it, sh, kind, keys, owner)
		}
		b.WriteByte(']')
	default:
		b.WriteByte('.')
	}
}

func writeItem(b *strings.Builder, it any, sh shape, kind listKind, keys []string, owner string) {
	if !writeItemID(b, it, sh, kind, keys) {
		b.WriteString("!,")
		return
	}
	if kind == mapList {
		writeShape(b, it, sh.elem(), owner, elsewhere)
	}
	b.WriteByte(',')
}

// writeItemID writes what identifies it in its list (itemKey's path
// element); false, with nothing written, when itemKey cannot identify it.
func writeItemID(b *strings.Builder, it any, sh shape, kind listKind, keys []string) bool {
	if writeItemKey(b, it, sh, kind, keys) {
		return true
	}
	pe, ok := sh.itemKey(kind, keys, it)
	if !ok {
		return false
	}
	s := pe.String()
	b.WriteByte('P')
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
	return true
}

// writeItemKey writes what itemKey would return for it — the same key
// fields, defaults and values — without building the path element and its
// string (fmt and JSON, a fifth of writeShape). It writes nothing and
// returns false when a key value is not a string, integer, float or bool,
// the item has no key, or its list has more than four key fields;
// writeItemID then writes the path element's string, under a different
// prefix.
func writeItemKey(b *strings.Builder, it any, sh shape, kind listKind, keys []string) bool {
	switch kind {
	case setList:
		v := normalizeNumber(it)
		if !scalarKey(v) {
			return false
		}
		b.WriteByte('v')
		writeScalar(b, v)
		return true
	case mapList:
		m, ok := it.(map[string]any)
		if !ok || len(keys) > 4 {
			return false
		}
		var vals [4]any // normalized key values, nil where absent
		present := false
		for i, k := range keys {
			v, has := m[k]
			if !has || v == nil {
				v = sh.keyDefault(k)
			}
			if v == nil {
				continue
			}
			if v = normalizeNumber(v); !scalarKey(v) {
				return false
			}
			vals[i], present = v, true
		}
		if !present {
			return false
		}
		// itemKey sorts its fields by name; keys are written in that order.
		idx := [4]int{0, 1, 2, 3}
		order := idx[:len(keys)]
		slices.SortFunc(order, func(x, y int) int { return strings.Compare(keys[x], keys[y]) })
		b.WriteByte('k')
		for _, i := range order {
			if vals[i] == nil {
				continue
			}
			writeLen(b, keys[i])
			writeScalar(b, vals[i])
		}
		return true
	}
	return false
}

// scalarKey reports whether v, a normalized key value, is written by type
// and value (writeScalar), not by the path element's string.
func scalarKey(v any) bool {
	switch v.(type) {
	case string, int64, float64, bool:
		return true
	}
	return false
}

// writeOwnerRefs is writeShape for metadata.ownerReferences, with the
// owner's own reference as a placeholder.
func writeOwnerRefs(b *strings.Builder, v any, sh shape, owner string) {
	l, ok := v.([]any)
	kind, keys := sh.list()
	if !ok || kind == atomicList || len(l) == 0 {
		// Not the list link writes: no placeholder.
		writeShape(b, v, sh, owner, elsewhere)
		return
	}
	b.WriteByte('[')
	for _, it := range l {
		if m, ok := it.(map[string]any); ok && m["uid"] == owner && owner != "" {
			b.WriteString("owner")
			writeShape(b, it, sh.elem(), owner, elsewhere)
			b.WriteByte(',')
			continue
		}
		writeItem(b, it, sh, kind, keys, owner)
	}
	b.WriteByte(']')
}

package ensure

import (
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/openapi"
	"k8s.io/kube-openapi/pkg/spec3"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// shape is the schema of one value in an object: which of its lists are
// maps keyed by which fields, sets or atomic, and which maps are atomic. The
// zero shape describes a value the schema does not know (a field the server
// is newer than, or an untyped subtree): its lists are atomic.
type shape struct {
	s  *smdschema.Schema
	tr smdschema.TypeRef
}

func (sh shape) atom() (smdschema.Atom, bool) {
	if sh.s == nil {
		return smdschema.Atom{}, false
	}
	return sh.s.Resolve(sh.tr)
}

// field is the shape of a map's member name.
func (sh shape) field(name string) shape {
	a, ok := sh.atom()
	if !ok || a.Map == nil {
		return shape{}
	}
	if f, ok := a.FindField(name); ok {
		return shape{s: sh.s, tr: f.Type}
	}
	if a.Map.ElementType == (smdschema.TypeRef{}) {
		return shape{}
	}
	return shape{s: sh.s, tr: a.Map.ElementType}
}

// elem is the shape of a list's elements.
func (sh shape) elem() shape {
	a, ok := sh.atom()
	if !ok || a.List == nil {
		return shape{}
	}
	return shape{s: sh.s, tr: a.List.ElementType}
}

type listKind int

const (
	atomicList listKind = iota // replaced and compared whole, by position
	mapList                    // x-kubernetes-list-type: map; items identified by keys
	setList                    // x-kubernetes-list-type: set; scalar items identified by value
)

// list says how the list at sh is merged, and by which key fields.
func (sh shape) list() (listKind, []string) {
	a, ok := sh.atom()
	if !ok || a.List == nil || a.List.ElementRelationship != smdschema.Associative {
		return atomicList, nil
	}
	if len(a.Keys) == 0 {
		return setList, nil
	}
	return mapList, a.Keys
}

// atomicMap reports whether the map at sh is owned and replaced as a whole
// (x-kubernetes-map-type: atomic). isStruct tells a struct (fixed fields,
// possibly defaulted by the server) from a map of arbitrary keys.
func (sh shape) atomicMap() (atomic, isStruct bool) {
	a, ok := sh.atom()
	if !ok || a.Map == nil {
		return false, false
	}
	return a.Map.ElementRelationship == smdschema.Atomic, len(a.Fields) > 0
}

// keyDefault is the schema default of key field name of the map-list at sh's
// elements (a container port's protocol is TCP), or nil.
func (sh shape) keyDefault(name string) any {
	a, ok := sh.elem().atom()
	if !ok || a.Map == nil {
		return nil
	}
	f, _ := a.FindField(name)
	return f.Default
}

// itemKey is the path element naming item in the list at sh: its key fields
// (schema defaults standing in for missing ones) for a map-list, its value for
// a set. ok is false when item cannot be identified (no key field at all, or a
// set item that is not a scalar).
func (sh shape) itemKey(kind listKind, keys []string, item any) (fieldpath.PathElement, bool) {
	switch kind {
	case setList:
		switch item.(type) {
		case map[string]any, []any, nil:
			return fieldpath.PathElement{}, false
		}
		v := value.NewValueInterface(normalizeNumber(item))
		return fieldpath.PathElement{Value: &v}, true
	case mapList:
		m, ok := item.(map[string]any)
		if !ok {
			return fieldpath.PathElement{}, false
		}
		fl := make(value.FieldList, 0, len(keys))
		for _, k := range keys {
			v, has := m[k]
			if !has || v == nil {
				v = sh.keyDefault(k)
			}
			if v == nil {
				continue
			}
			fl = append(fl, value.Field{Name: k, Value: value.NewValueInterface(normalizeNumber(v))})
		}
		if len(fl) == 0 {
			return fieldpath.PathElement{}, false
		}
		fl.Sort()
		return fieldpath.PathElement{Key: &fl}, true
	}
	return fieldpath.PathElement{}, false
}

// normalizeNumber makes every JSON number an int64 when it is integral, so
// keys and set items compare equal whatever decoder produced them.
func normalizeNumber(v any) any {
	switch n := v.(type) {
	case float64:
		if n == float64(int64(n)) {
			return int64(n)
		}
	case float32:
		return normalizeNumber(float64(n))
	case int:
		return int64(n)
	case int32:
		return int64(n)
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i
		}
		if f, err := n.Float64(); err == nil {
			return f
		}
	}
	return v
}

// schemas finds and caches the schema of each kind an Ensurer writes. Kinds
// client-go was built with come from its compiled-in schema (no request);
// other kinds (custom resources) from the API server's OpenAPI v3 document of
// their group-version, fetched once per group-version when an [openapi.Client]
// is configured ([WithOpenAPI]); without one, or when the document does not
// describe the kind, lists are treated as atomic (what the API server does for
// a custom resource list without x-kubernetes-list-type).
type schemas struct {
	mu      sync.Mutex
	openapi openapi.Client
	byGVK   map[schema.GroupVersionKind]shape
	byGV    map[schema.GroupVersion]managedfields.TypeConverter
	builtin managedfields.TypeConverter
}

func (s *schemas) shapeOf(gvk schema.GroupVersionKind) (shape, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh, ok := s.byGVK[gvk]; ok {
		return sh, nil
	}
	if s.byGVK == nil {
		s.byGVK = map[schema.GroupVersionKind]shape{}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if s.builtin == nil {
		s.builtin = applyconfigurations.NewTypeConverter(clientgoscheme.Scheme)
	}
	if tv, err := s.builtin.ObjectToTyped(u); err == nil {
		sh := shape{s: tv.Schema(), tr: tv.TypeRef()}
		s.byGVK[gvk] = sh
		return sh, nil
	}
	if s.openapi != nil {
		tc, err := s.fromOpenAPI(gvk.GroupVersion())
		if err != nil {
			return shape{}, err
		}
		if tc != nil {
			if tv, err := tc.ObjectToTyped(u); err == nil {
				sh := shape{s: tv.Schema(), tr: tv.TypeRef()}
				s.byGVK[gvk] = sh
				return sh, nil
			}
		}
	}
	tv, err := managedfields.NewDeducedTypeConverter().ObjectToTyped(u)
	if err != nil {
		return shape{}, err
	}
	sh := shape{s: tv.Schema(), tr: tv.TypeRef()}
	s.byGVK[gvk] = sh
	return sh, nil
}

// fromOpenAPI reads the group-version's OpenAPI v3 document once. A
// group-version the server does not list gives a nil converter (the caller
// falls back); a failed read is an error, so the next reconcile tries again.
func (s *schemas) fromOpenAPI(gv schema.GroupVersion) (managedfields.TypeConverter, error) {
	if tc, ok := s.byGV[gv]; ok {
		return tc, nil
	}
	if s.byGV == nil {
		s.byGV = map[schema.GroupVersion]managedfields.TypeConverter{}
	}
	paths, err := s.openapi.Paths()
	if err != nil {
		return nil, fmt.Errorf("read the API server's OpenAPI paths: %w", err)
	}
	path := "apis/" + gv.Group + "/" + gv.Version
	if gv.Group == "" {
		path = "api/" + gv.Version
	}
	doc, ok := paths[path]
	if !ok {
		s.byGV[gv] = nil
		return nil, nil
	}
	raw, err := doc.Schema("application/json")
	if err != nil {
		return nil, fmt.Errorf("read the OpenAPI schema of %s: %w", gv, err)
	}
	var spec spec3.OpenAPI
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("decode the OpenAPI schema of %s: %w", gv, err)
	}
	if spec.Components == nil {
		s.byGV[gv] = nil
		return nil, nil
	}
	tc, err := managedfields.NewTypeConverter(spec.Components.Schemas, false)
	if err != nil {
		return nil, fmt.Errorf("OpenAPI schema of %s: %w", gv, err)
	}
	s.byGV[gv] = tc
	return tc, nil
}

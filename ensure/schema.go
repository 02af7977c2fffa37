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
//
// A shape is a node of a tree that mirrors the schema and is built as it is
// walked: each node resolves its type once and keeps its struct fields' and
// its elements' nodes, so walking a declaration asks the schema nothing
// twice (resolving a named type and finding a field by name each took a map
// lookup by string, about half of comparing a Deployment with its cached
// copy). Nodes are shared by every goroutine walking the kind and never
// change once built; the tree grows only along paths some object has.
type shape struct {
	n *shapeNode
}

type shapeNode struct {
	s    *smdschema.Schema
	tr   smdschema.TypeRef
	once sync.Once
	// Set by once.
	atom     smdschema.Atom
	resolved bool
	fields   map[string]*shapeNode // a struct's fields, by name
	mapElem  *shapeNode            // a map's element type, nil if none
	listElem *shapeNode            // a list's element type
}

// newShape is the shape of the value of type tr in s.
func newShape(s *smdschema.Schema, tr smdschema.TypeRef) shape {
	if s == nil {
		return shape{}
	}
	return shape{n: &shapeNode{s: s, tr: tr}}
}

// load resolves n's type and makes the nodes of its fields and elements
// (not resolved themselves until they are walked).
func (n *shapeNode) load() *shapeNode {
	n.once.Do(func() {
		n.atom, n.resolved = n.s.Resolve(n.tr)
		if !n.resolved {
			return
		}
		if m := n.atom.Map; m != nil {
			if len(m.Fields) > 0 {
				n.fields = make(map[string]*shapeNode, len(m.Fields))
				for _, f := range m.Fields {
					// The last of duplicate names wins, as in Map.FindField.
					n.fields[f.Name] = &shapeNode{s: n.s, tr: f.Type}
				}
			}
			if m.ElementType != (smdschema.TypeRef{}) {
				n.mapElem = &shapeNode{s: n.s, tr: m.ElementType}
			}
		}
		if l := n.atom.List; l != nil {
			n.listElem = &shapeNode{s: n.s, tr: l.ElementType}
		}
	})
	return n
}

func (sh shape) atom() (smdschema.Atom, bool) {
	if sh.n == nil {
		return smdschema.Atom{}, false
	}
	n := sh.n.load()
	return n.atom, n.resolved
}

// field is the shape of a map's member name.
func (sh shape) field(name string) shape {
	if sh.n == nil {
		return shape{}
	}
	n := sh.n.load()
	if !n.resolved || n.atom.Map == nil {
		return shape{}
	}
	if f, ok := n.fields[name]; ok {
		return shape{n: f}
	}
	return shape{n: n.mapElem}
}

// elem is the shape of a list's elements.
func (sh shape) elem() shape {
	if sh.n == nil {
		return shape{}
	}
	n := sh.n.load()
	if !n.resolved || n.atom.List == nil {
		return shape{}
	}
	return shape{n: n.listElem}
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
		sh := newShape(tv.Schema(), tv.TypeRef())
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
				sh := newShape(tv.Schema(), tv.TypeRef())
				s.byGVK[gvk] = sh
				return sh, nil
			}
		}
	}
	tv, err := managedfields.NewDeducedTypeConverter().ObjectToTyped(u)
	if err != nil {
		return shape{}, err
	}
	sh := newShape(tv.Schema(), tv.TypeRef())
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

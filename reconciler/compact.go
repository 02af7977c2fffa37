package reconciler

import (
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

var stripManagedFields = cache.TransformStripManagedFields()

// CompactMetadata is a cache transform (cache.Options.DefaultTransform or
// ByObject[…].Transform) that makes cached objects smaller without changing
// what any reader sees but managedFields: it strips metadata.managedFields
// (as cache.TransformStripManagedFields) and replaces every label and
// annotation key and value with the canonical copy of that string
// (unique.Make), so that equal strings on many cached objects — the same
// ensure.AnnotationDeclared record on every Deployment an operator writes,
// the same manager label on every child, the same keys everywhere — share
// one copy instead of one per object. Objects that are not metav1.Object
// pass through unchanged. Like every transform, it runs once per object an
// informer receives, before the object is stored; the maps it builds replace
// the decoded ones.
func CompactMetadata(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return obj, err
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	if l := m.GetLabels(); len(l) > 0 {
		m.SetLabels(interned(l))
	}
	if a := m.GetAnnotations(); len(a) > 0 {
		m.SetAnnotations(interned(a))
	}
	return obj, nil
}

// interned returns a copy of in whose keys and values are canonical strings.
func interned(in map[string]string) map[string]string {
	if len(in) == 0 {
		return in
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[unique.Make(k).Value()] = unique.Make(v).Value()
	}
	return out
}

package reconciler

import (
	"reflect"
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

var stripManagedFields = cache.TransformStripManagedFields()

// CompactMetadata is a cache transform (cache.Options.DefaultTransform or
// ByObject[…].Transform) that makes cached objects smaller without changing
// what any reader sees but managedFields:
//
//   - it strips metadata.managedFields (as cache.TransformStripManagedFields);
//   - it replaces every label and annotation key and value, and the
//     apiVersion, kind, name and uid of every ownerReference, with the
//     canonical copy of that string (unique.Make), so that equal strings on
//     many cached objects — the same ensure.AnnotationDeclared record on
//     every Deployment an operator writes, the same manager label on every
//     child, the owner's name and uid on each of its children, the same keys
//     everywhere — share one copy instead of one per object; an
//     ownerReference's controller and blockOwnerDeletion point to one shared
//     true or false instead of one allocation each;
//   - it does the same for the type, status, reason and message of each
//     status condition of a Deployment and of any object whose
//     status.conditions field is a []metav1.Condition (a custom resource's
//     Ready, Reconciling, … conditions repeat their strings on every object).
//
// Objects that are not metav1.Object pass through unchanged; of an
// unstructured.Unstructured only labels and annotations are compacted. Like
// every transform, it runs once per object an informer receives, before the
// object is stored; the maps it builds replace the decoded ones, and the
// strings and booleans it shares are shared by contract only among cached
// objects, which are read-only (readers get deep copies).
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
	if acc, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if om, ok := acc.GetObjectMeta().(*metav1.ObjectMeta); ok {
			for i := range om.OwnerReferences {
				compactRef(&om.OwnerReferences[i])
			}
		}
	}
	if d, ok := obj.(*appsv1.Deployment); ok {
		for i := range d.Status.Conditions {
			c := &d.Status.Conditions[i]
			c.Type, c.Status, c.Reason, c.Message = canon(c.Type), canon(c.Status), canon(c.Reason), canon(c.Message)
		}
		return obj, nil
	}
	for i, conds := 0, statusConditions(obj); i < len(conds); i++ {
		c := &conds[i]
		c.Type, c.Status, c.Reason, c.Message = canon(c.Type), canon(c.Status), canon(c.Reason), canon(c.Message)
	}
	return obj, nil
}

// canon returns the canonical copy of s.
func canon[S ~string](s S) S {
	if s == "" {
		return s
	}
	return S(unique.Make(string(s)).Value())
}

// The values every compacted ownerReference's controller and
// blockOwnerDeletion point to. Never written.
var refTrue, refFalse = true, false

func sharedBool(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return &refTrue
	default:
		return &refFalse
	}
}

func compactRef(r *metav1.OwnerReference) {
	r.APIVersion, r.Kind, r.Name, r.UID = canon(r.APIVersion), canon(r.Kind), canon(r.Name), canon(r.UID)
	r.Controller, r.BlockOwnerDeletion = sharedBool(r.Controller), sharedBool(r.BlockOwnerDeletion)
}

var conditionsType = reflect.TypeFor[[]metav1.Condition]()

// statusConditions returns obj's status.conditions slice (the object's own
// backing array) when obj points to a struct whose Status field is a struct
// with a Conditions field of type []metav1.Condition; nil otherwise.
func statusConditions(obj any) []metav1.Condition {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	st := v.Elem().FieldByName("Status")
	if st.Kind() != reflect.Struct {
		return nil
	}
	c := st.FieldByName("Conditions")
	if !c.IsValid() || c.Type() != conditionsType {
		return nil
	}
	return c.Interface().([]metav1.Condition)
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

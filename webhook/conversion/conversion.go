package conversion

import (
	"encoding/json"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationPrefix is the prefix of every annotation this package writes.
const AnnotationPrefix = "webhook.opkit.dev/"

// DataAnnotation holds, on a spoke version, the JSON of the hub fields that
// spoke cannot represent. It is written by [Stash] during hub→spoke conversion
// and removed by [Restore] during spoke→hub conversion; users should not edit it.
const DataAnnotation = AnnotationPrefix + "conversion-data"

// Stash records v as JSON in obj's [DataAnnotation]. When v is the zero value
// of its type (or nil) the annotation is removed instead, so objects without
// hub-only data carry no annotation. It fails only when v cannot be marshalled.
func Stash(obj metav1.Object, v any) error {
	if v == nil || reflect.ValueOf(v).IsZero() {
		removeAnnotation(obj)
		return nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("conversion: stash for %s: %w", ref(obj), err)
	}
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[DataAnnotation] = string(data)
	obj.SetAnnotations(ann)
	return nil
}

// Restore unmarshals obj's [DataAnnotation] into v (a pointer) and removes the
// annotation from obj. ok is false, and v untouched, when obj has no such
// annotation. Call it on the hub's copy of the metadata, never on the spoke
// being converted (conversion must not change its source). A malformed
// annotation is an error naming the object; the annotation is then kept.
func Restore(obj metav1.Object, v any) (ok bool, err error) {
	data, found := obj.GetAnnotations()[DataAnnotation]
	if !found {
		return false, nil
	}
	if err := json.Unmarshal([]byte(data), v); err != nil {
		return false, fmt.Errorf("conversion: restore for %s: annotation %s: %w", ref(obj), DataAnnotation, err)
	}
	removeAnnotation(obj)
	return true, nil
}

func removeAnnotation(obj metav1.Object) {
	ann := obj.GetAnnotations()
	if _, ok := ann[DataAnnotation]; !ok {
		return
	}
	delete(ann, DataAnnotation)
	if len(ann) == 0 {
		ann = nil
	}
	obj.SetAnnotations(ann)
}

func ref(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

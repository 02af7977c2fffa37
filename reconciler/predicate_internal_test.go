package reconciler

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/opkit/opkit/external"
)

// With an External resource, the external package's bookkeeping
// annotations do not reconcile the object again; every other annotation
// change still does.
func TestDefaultPredicateIgnoresExternalBookkeeping(t *testing.T) {
	p := defaultPredicate(func(k string) bool { return strings.HasPrefix(k, external.AnnotationPrefix) })
	obj := func(anns map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Generation: 1, Annotations: anns, ResourceVersion: "1"}}
	}
	cases := []struct {
		name     string
		old, new map[string]string
		want     bool
	}{
		{"marker added", nil, map[string]string{external.AnnotationCreatePending: "t"}, false},
		{"marker replaced", map[string]string{external.AnnotationCreatePending: "t", "a": "1"},
			map[string]string{external.AnnotationCreateSucceeded: "t", "a": "1"}, false},
		{"user annotation", map[string]string{external.AnnotationExternalName: "x"},
			map[string]string{external.AnnotationExternalName: "x", "a": "1"}, true},
		{"user annotation changed", map[string]string{"a": "1"}, map[string]string{"a": "2"}, true},
		{"user annotation removed", map[string]string{"a": "1"}, nil, true},
	}
	for _, c := range cases {
		if got := p.Update(event.UpdateEvent{ObjectOld: obj(c.old), ObjectNew: obj(c.new)}); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// Without External, any annotation change passes.
	if !DefaultPredicate().Update(event.UpdateEvent{ObjectOld: obj(nil), ObjectNew: obj(map[string]string{external.AnnotationCreatePending: "t"})}) {
		t.Error("DefaultPredicate dropped an annotation change")
	}
}

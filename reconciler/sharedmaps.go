package reconciler

import (
	"hash/maphash"
	"maps"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/opkit/opkit/ensure"
)

// sharedMapsBound is how many distinct maps a [SharedMaps] remembers per
// generation. When the current generation is full it becomes the previous
// one and a new one starts; a map not looked up for two generations is
// forgotten (objects holding it keep it; a new object with the same content
// gets a copy of its own until it is remembered again), so the table never
// keeps alive more than two generations of maps that no cached object holds.
const sharedMapsBound = 1 << 14

// SharedMaps is a cache transform (cache.Options.DefaultTransform or
// ByObject[…].Transform) that does what [CompactMetadata] does and then
// makes equal label maps of cached objects one map: the labels of every
// object, and the label maps in the specs of the kinds operators own most
// (the selector and pod template labels of Deployments, StatefulSets,
// DaemonSets, ReplicaSets and Jobs; a Service's selector). Equal
// ownerReferences lists of one item (an owner's controller reference on
// each of its children) become one list too, and so do equal annotation
// maps of ensure's children (those holding ensure.AnnotationDeclared: a
// child with a controller ownerReference carries ensure's record and
// nothing of its owner's there, so children of one kind written from one
// template have equal annotations). Other annotation maps, often unique to
// their object (a last-applied configuration, a checksum), and those of pod
// templates keep one map per object, their strings shared as
// [CompactMetadata] shares them. An operator that puts one label set on
// every child of an owner (ensure's owner labels, the app labels a
// Deployment also selects by) then caches one copy of it per owner instead
// of one per child and per field, and ensure's record once per kind.
//
// Cached objects are read-only by contract: the cache's readers get deep
// copies, and informer event handlers must not modify the objects they are
// handed — with SharedMaps a handler that did would change other cached
// objects too. It is safe for concurrent use by several informers.
type SharedMaps struct {
	seed       maphash.Seed
	mu         sync.Mutex
	cur, prev  map[uint64][]map[string]string
	curEntries int
	// Single ownerReferences by owner uid, generations as for maps.
	curRefs, prevRefs map[types.UID][]metav1.OwnerReference
}

// NewSharedMaps returns a [SharedMaps] with an empty table.
func NewSharedMaps() *SharedMaps {
	return &SharedMaps{seed: maphash.MakeSeed(), cur: map[uint64][]map[string]string{}, curRefs: map[types.UID][]metav1.OwnerReference{}}
}

// Transform applies [CompactMetadata] to obj and shares its maps as
// [SharedMaps] describes. It returns obj (changed in place).
func (s *SharedMaps) Transform(obj any) (any, error) {
	obj, err := CompactMetadata(obj)
	if err != nil {
		return obj, err
	}
	// Other annotation maps are left one per object: a table entry per map
	// that is never shared would cost more than it saves.
	if m, ok := obj.(metav1.Object); ok {
		if l := m.GetLabels(); len(l) > 0 {
			m.SetLabels(s.shared(l))
		}
		if a := m.GetAnnotations(); a[ensure.AnnotationDeclared] != "" {
			m.SetAnnotations(s.shared(a))
		}
	}
	if acc, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if om, ok := acc.GetObjectMeta().(*metav1.ObjectMeta); ok && len(om.OwnerReferences) == 1 {
			om.OwnerReferences = s.sharedRefs(om.OwnerReferences)
		}
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		s.selector(o.Spec.Selector)
		s.template(&o.Spec.Template)
	case *appsv1.StatefulSet:
		s.selector(o.Spec.Selector)
		s.template(&o.Spec.Template)
	case *appsv1.DaemonSet:
		s.selector(o.Spec.Selector)
		s.template(&o.Spec.Template)
	case *appsv1.ReplicaSet:
		s.selector(o.Spec.Selector)
		s.template(&o.Spec.Template)
	case *batchv1.Job:
		s.selector(o.Spec.Selector)
		s.template(&o.Spec.Template)
	case *corev1.Service:
		o.Spec.Selector = s.shared(o.Spec.Selector)
	}
	return obj, nil
}

func (s *SharedMaps) selector(sel *metav1.LabelSelector) {
	if sel != nil {
		sel.MatchLabels = s.shared(sel.MatchLabels)
	}
}

func (s *SharedMaps) template(t *corev1.PodTemplateSpec) {
	t.Labels = s.shared(interned(t.Labels))
	t.Annotations = interned(t.Annotations)
}

// shared returns the remembered map equal to m, or remembers m. Keys and
// values of m should already be canonical strings (interned), so a
// remembered map holds no string of its own.
func (s *SharedMaps) shared(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	var h uint64
	for k, v := range m {
		// Order-independent: the sum of each pair's hash.
		h += maphash.String(s.seed, k) ^ (maphash.String(s.seed, v) * 0x9e3779b97f4a7c15)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.cur[h] {
		if maps.Equal(c, m) {
			return c
		}
	}
	for _, c := range s.prev[h] {
		if maps.Equal(c, m) {
			s.remember(h, c)
			return c
		}
	}
	s.remember(h, m)
	return m
}

// sharedRefs returns the remembered one-item ownerReferences equal to
// refs, or remembers refs.
func (s *SharedMaps) sharedRefs(refs []metav1.OwnerReference) []metav1.OwnerReference {
	uid := refs[0].UID
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.curRefs[uid]; ok && sameRef(c[0], refs[0]) {
		return c
	}
	if c, ok := s.prevRefs[uid]; ok && sameRef(c[0], refs[0]) {
		refs = c
	}
	if len(s.curRefs) >= sharedMapsBound {
		s.prevRefs, s.curRefs = s.curRefs, map[types.UID][]metav1.OwnerReference{}
	}
	s.curRefs[uid] = refs
	return refs
}

func sameRef(a, b metav1.OwnerReference) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		ptr.Equal(a.Controller, b.Controller) && ptr.Equal(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
}

func (s *SharedMaps) remember(h uint64, m map[string]string) {
	if s.curEntries >= sharedMapsBound {
		s.prev, s.cur, s.curEntries = s.cur, map[uint64][]map[string]string{}, 0
	}
	s.cur[h] = append(s.cur[h], m)
	s.curEntries++
}

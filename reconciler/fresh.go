package reconciler

import (
	"context"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/opkit/opkit/ensure"
)

// writtenKey identifies a child written in this reconcile.
type writtenKey struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

// freshReader is [Observed.Reader]: the cache, except that a Get of a child
// ensure wrote in this reconcile returns the object as the write returned
// it when the cache's copy may be from before the write. So a status step
// never judges a child it just changed by the cache's copy from before the
// change — a Deployment patched to a new spec, read back with the old
// generation and the old Available condition, would pass for rolled out.
//
// The cache's copy is used when it is that write (same resourceVersion) or,
// for a kind with metadata.generation, when its generation is at least the
// written one: then it is that spec or a later one, usually with a newer
// status (the child's controller may already have reported on the write, an
// event this reconcile may have been triggered by, so none would follow).
// A write that changed only metadata keeps the generation, so such a child
// is read from the cache as before. Kinds without a generation (ConfigMap,
// Secret) are read from the write unless the cache holds exactly it.
type freshReader struct {
	client.Reader
	scheme  *runtime.Scheme
	written map[writtenKey]*unstructured.Unstructured
}

// fresh wraps r for the children changes wrote; with no write it is r.
func fresh(r client.Reader, scheme *runtime.Scheme, changes ensure.ChangeSet) client.Reader {
	var written map[writtenKey]*unstructured.Unstructured
	for _, c := range changes {
		if c.Object == nil {
			continue
		}
		if written == nil {
			written = map[writtenKey]*unstructured.Unstructured{}
		}
		written[writtenKey{c.GVK, c.Namespace, c.Name}] = c.Object
	}
	if written == nil || scheme == nil {
		return r
	}
	return &freshReader{Reader: r, scheme: scheme, written: written}
}

// Get reads key into obj from the cache, or from this reconcile's write of it.
func (f *freshReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, f.scheme)
	if err != nil {
		return f.Reader.Get(ctx, key, obj, opts...)
	}
	w := f.written[writtenKey{gvk, key.Namespace, key.Name}]
	if w == nil {
		return f.Reader.Get(ctx, key, obj, opts...)
	}
	err = f.Reader.Get(ctx, key, obj, opts...)
	if err == nil && (obj.GetResourceVersion() == w.GetResourceVersion() ||
		(w.GetGeneration() > 0 && obj.GetGeneration() >= w.GetGeneration())) {
		return nil
	}
	return fill(obj, w)
}

// fill copies the written object w into obj (typed, unstructured or
// metadata-only).
func fill(obj client.Object, w *unstructured.Unstructured) error {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		o.Object = runtime.DeepCopyJSON(w.Object)
		return nil
	case *metav1.PartialObjectMetadata:
		meta := &metav1.PartialObjectMetadata{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(runtime.DeepCopyJSON(w.Object), meta); err != nil {
			return err
		}
		tm := o.TypeMeta
		*o = *meta
		o.TypeMeta = tm
		return nil
	}
	// Start from zero so fields the written object lacks do not linger.
	v := reflect.ValueOf(obj).Elem()
	v.Set(reflect.Zero(v.Type()))
	return runtime.DefaultUnstructuredConverter.FromUnstructured(runtime.DeepCopyJSON(w.Object), obj)
}

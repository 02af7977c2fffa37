package reconciler

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownWriteTTL bounds how long the status of a write is remembered for a
// cache that has not seen it. Informers deliver within milliseconds; an
// entry this old is dropped on the next write.
const ownWriteTTL = time.Minute

// ownWrites is T's read-your-writes: the status the default status step
// last wrote, per object, with the resourceVersion the write returned.
//
// A status write is a JSON merge patch from the status as read to the
// status the reconcile computed. Read from a cache that has not seen the
// previous write yet, a field the reconcile sets back to its old value is
// equal in the stale copy and is left out of the patch, so the server keeps
// the newer value though the write succeeds (or nothing is sent at all).
// With the last write laid over the stale copy, the patch is computed from
// what the server holds, and a reconcile that decides what was last written
// still sends nothing.
//
// The finalizer list is laid over with the status: the write's response
// holds the list as the server had it then, and a stale copy from before the
// finalizer step added this reconciler's finalizer would otherwise claim the
// write's resourceVersion without it, and the finalizer step would send a
// JSON patch whose test fails (422), then re-read and find it there.
type ownWrites struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]ownWrite
	swept   time.Time // when entries older than ownWriteTTL were last dropped
}

// ownWrite is one remembered write: a copy of the object the server
// answered it with (without managedFields; its UID and resourceVersion are
// the write's), whose status and finalizers are taken out only when a stale
// read needs them. Converting the status to JSON values on every write cost
// a reflective conversion of the whole object per status write (about 90 µs
// of a WebApp's converge in the benchmark's profile) for the few reads that
// are ever stale.
type ownWrite struct {
	obj client.Object
	at  time.Time
}

// remember records obj as the server returned it from a write.
func (w *ownWrites) remember(obj client.Object) {
	if obj.GetResourceVersion() == "" {
		return
	}
	written, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return
	}
	written.SetManagedFields(nil)
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.entries == nil {
		w.entries = map[types.NamespacedName]ownWrite{}
	}
	// Expired entries are swept at most every quarter TTL, not on every
	// write: a sweep visits every entry, and at thousands of writes a
	// minute a sweep per write made each write cost O(entries).
	if now.Sub(w.swept) >= ownWriteTTL/4 {
		for k, e := range w.entries {
			if now.Sub(e.at) >= ownWriteTTL {
				delete(w.entries, k)
			}
		}
		w.swept = now
	}
	w.entries[client.ObjectKeyFromObject(obj)] = ownWrite{obj: written, at: now}
}

// forget drops what is remembered of the object at key.
func (w *ownWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.entries, key)
}

// overlay lays the remembered status and finalizers (and their
// resourceVersion) over obj when obj, as read, is older than that write;
// when obj is that write or newer, the entry is dropped. newObject makes an
// empty T for typed objects.
func (w *ownWrites) overlay(obj client.Object, newObject func() client.Object) {
	key := client.ObjectKeyFromObject(obj)
	w.mu.Lock()
	e, ok := w.entries[key]
	w.mu.Unlock()
	if !ok {
		return
	}
	rv := e.obj.GetResourceVersion()
	cmp, err := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), rv)
	if e.obj.GetUID() != obj.GetUID() || err != nil || cmp >= 0 {
		w.mu.Lock()
		if cur, ok := w.entries[key]; ok && cur.obj.GetResourceVersion() == rv {
			delete(w.entries, key)
		}
		w.mu.Unlock()
		return
	}
	// e.obj is shared by every overlay of this entry and only read here:
	// statusOf returns a new tree, the finalizers are cloned.
	status, err := statusOf(e.obj)
	if err == nil && setStatus(obj, status, newObject) == nil {
		obj.SetFinalizers(slices.Clone(e.obj.GetFinalizers()))
		obj.SetResourceVersion(rv)
	}
}

// statusOf returns a deep copy of obj's status as unstructured JSON values.
func statusOf(obj client.Object) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return runtime.DeepCopyJSONValue(u.Object["status"]), nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return content["status"], nil
}

// setStatus replaces obj's status with status.
func setStatus(obj client.Object, status any, newObject func() client.Object) error {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if status == nil {
			delete(u.Object, "status")
		} else {
			u.Object["status"] = status
		}
		return nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	if status == nil {
		delete(content, "status")
	} else {
		content["status"] = status
	}
	fresh := newObject()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, fresh); err != nil {
		return err
	}
	dst, src := reflect.ValueOf(obj), reflect.ValueOf(fresh)
	if dst.Kind() != reflect.Pointer || src.Type() != dst.Type() {
		return fmt.Errorf("reconciler: cannot set the status of %T", obj)
	}
	dst.Elem().Set(src.Elem())
	return nil
}

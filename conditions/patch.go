package conditions

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StatusPatcher writes an object's status with the smallest possible
// request: a JSON merge patch of the status subresource computed from the
// difference between a snapshot and the object, and no request at all when
// the status did not change. Changes outside status (spec, metadata) are
// ignored: they are never sent by Patch.
//
// "Did not change" is decided as the API server would see it: on a typed
// object whose Status field (tagged json:"status") is semantically equal
// (equality.Semantic) to the snapshot's, without converting either; else on
// the JSON form of the two statuses. Values the server does not tell apart
// (a resource.Quantity written as "1" or "1000m", a nil or empty list) are
// no change.
//
// A JSON merge patch replaces a list as a whole, so without
// [WithOptimisticLock] a condition another writer added to the same object
// since the snapshot is lost; with it, such a race fails with a 409 Conflict
// instead, which outcome classifies as Conflict (retried at once, quietly).
type StatusPatcher[T client.Object] struct {
	before T
	lock   bool
}

// PatcherOption configures a [StatusPatcher].
type PatcherOption func(*patcherOptions)

type patcherOptions struct{ lock bool }

// WithOptimisticLock makes [StatusPatcher.Patch] include
// metadata.resourceVersion in the patch, so the API server rejects it with
// 409 Conflict if the object changed since the snapshot.
func WithOptimisticLock() PatcherOption { return func(o *patcherOptions) { o.lock = true } }

// NewStatusPatcher snapshots obj (a deep copy); take it right after reading
// the object, before the reconcile changes anything.
func NewStatusPatcher[T client.Object](obj T, opts ...PatcherOption) *StatusPatcher[T] {
	var o patcherOptions
	for _, opt := range opts {
		opt(&o)
	}
	return &StatusPatcher[T]{before: obj.DeepCopyObject().(T), lock: o.lock}
}

// Changed reports whether obj's status differs from the snapshot.
func (p *StatusPatcher[T]) Changed(obj T) (bool, error) {
	data, err := p.data(obj)
	return data != nil, err
}

// Patch sends the status difference between the snapshot and obj to the
// status subresource, and returns whether it sent anything. When the status
// did not change it sends nothing and returns false. On success obj holds the
// server's response and becomes the new snapshot, so a second Patch in the
// same reconcile sends only what changed since the first. Errors are wrapped
// with obj's namespace/name and keep the API error (e.g. a 409 Conflict) for
// errors.As and outcome.Classify. A condition whose status is the one in
// the snapshot keeps the snapshot's lastTransitionTime (one that flipped and
// flipped back since did not transition), for Patch and Changed alike.
func (p *StatusPatcher[T]) Patch(ctx context.Context, c client.Client, obj T) (bool, error) {
	data, err := p.data(obj)
	if err != nil || data == nil {
		return false, err
	}
	if err := c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, data)); err != nil {
		return false, fmt.Errorf("conditions: patch status of %s: %w", describe(obj), err)
	}
	p.before = obj.DeepCopyObject().(T)
	return true, nil
}

// data returns the merge patch, or nil when the status did not change.
func (p *StatusPatcher[T]) data(obj T) ([]byte, error) {
	if b, ok := statusField(p.before); ok {
		if a, ok := statusField(obj); ok && equality.Semantic.DeepEqual(b.Interface(), a.Interface()) {
			// The common case of a steady-state reconcile, decided on the
			// typed values without converting either object.
			return nil, nil
		}
	}
	before, err := statusContent(p.before)
	if err != nil {
		return nil, fmt.Errorf("conditions: status of %s: %w", describe(obj), err)
	}
	after, err := statusContent(obj)
	if err != nil {
		return nil, fmt.Errorf("conditions: status of %s: %w", describe(obj), err)
	}
	keepTransitionTimes(before, after)
	if equality.Semantic.DeepEqual(before, after) {
		return nil, nil
	}
	// Reuse controller-runtime's merge-patch computation on objects that
	// hold only the status, so nothing outside status can leak into the patch.
	from := &unstructured.Unstructured{Object: map[string]any{"status": before}}
	to := &unstructured.Unstructured{Object: map[string]any{"status": after}}
	patch := client.MergeFrom(from)
	if p.lock {
		rv := p.before.GetResourceVersion()
		from.SetResourceVersion(rv)
		to.SetResourceVersion(rv)
		patch = client.MergeFromWithOptions(from, client.MergeFromWithOptimisticLock{})
	}
	data, err := patch.Data(to)
	if err != nil {
		return nil, fmt.Errorf("conditions: status patch for %s: %w", describe(obj), err)
	}
	if isEmptyPatch(data) {
		return nil, nil
	}
	return data, nil
}

// isEmptyPatch reports whether data, a JSON merge patch as
// controller-runtime computes it (one JSON value), is null or an object
// without members. An object is empty exactly when its first token after
// the brace is the closing brace, so no patch is decoded again only to
// tell.
func isEmptyPatch(data []byte) bool {
	d := bytes.TrimSpace(data)
	if string(d) == "null" {
		return true
	}
	if len(d) < 2 || d[0] != '{' {
		return false
	}
	rest := bytes.TrimSpace(d[1:])
	return len(rest) > 0 && rest[0] == '}'
}

// keepTransitionTimes gives each condition of after whose type and status
// are those of a condition of before that condition's lastTransitionTime:
// a condition that flipped and flipped back within one reconcile (Set
// stamps each flip) did not transition as the server sees it, so neither
// its time nor a write changes.
func keepTransitionTimes(before, after any) {
	bm, _ := before.(map[string]any)
	am, _ := after.(map[string]any)
	bc, _ := bm["conditions"].([]any)
	ac, _ := am["conditions"].([]any)
	if len(bc) == 0 || len(ac) == 0 {
		return
	}
	type seen struct {
		status any
		time   any
	}
	prev := make(map[any]seen, len(bc))
	for _, c := range bc {
		if m, ok := c.(map[string]any); ok {
			prev[m["type"]] = seen{m["status"], m["lastTransitionTime"]}
		}
	}
	for _, c := range ac {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if p, ok := prev[m["type"]]; ok && p.time != nil && p.status == m["status"] {
			m["lastTransitionTime"] = p.time
		}
	}
}

// statusContent returns obj's status as unstructured JSON values (nil when absent).
func statusContent(obj client.Object) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object["status"], nil
	}
	if f, ok := statusField(obj); ok {
		// Only the status is converted, not the whole object.
		if f.Kind() == reflect.Pointer {
			if f.IsNil() {
				return nil, nil
			}
			f = f.Elem()
		}
		if f.Kind() == reflect.Struct && f.CanAddr() {
			if content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(f.Addr().Interface()); err == nil {
				return content, nil
			}
		}
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return content["status"], nil
}

// statusField returns the field of a typed object that JSON encodes as
// "status": a field of the object's own struct (not an embedded struct's)
// named Status and tagged json:"status…". ok is false for anything else
// (unstructured objects, other layouts), which the callers handle by
// converting the whole object.
func statusField(obj client.Object) (reflect.Value, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	v = v.Elem()
	f, ok := v.Type().FieldByName("Status")
	if !ok || len(f.Index) != 1 {
		return reflect.Value{}, false
	}
	if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "status" {
		return reflect.Value{}, false
	}
	return v.Field(f.Index[0]), true
}

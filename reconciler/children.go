package reconciler

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/opkit/opkit/ensure"
)

// isChildOf reports whether child is linked to the owner with uid: by a
// controller ownerReference or by ensure's owner label.
func isChildOf(child client.Object, uid types.UID) bool {
	if ref := metav1.GetControllerOfNoCopy(child); ref != nil && ref.UID == uid {
		return true
	}
	return child.GetLabels()[ensure.LabelOwnerUID] == string(uid)
}

func (r *Reconciler[T]) listChildren(ctx context.Context, owner client.Object, list client.ObjectList) error {
	gvk, err := apiutil.GVKForObject(list, r.client.Scheme())
	if err != nil {
		return fmt.Errorf("reconciler: list children of %s/%s: %w", owner.GetNamespace(), owner.GetName(), err)
	}
	if ul, ok := list.(*unstructured.UnstructuredList); ok && r.client.Scheme().Recognizes(gvk) {
		// A kind the scheme knows is cached (and owner-indexed) by its
		// typed informer, as Owns watches it: list that and convert.
		return r.listChildrenAsTyped(ctx, owner, ul, gvk)
	}
	kind := gvk.GroupVersion().WithKind(trimList(gvk.Kind))
	uid := owner.GetUID()
	var items []runtime.Object
	collect := func(opts ...client.ListOption) error {
		if err := r.reader.List(ctx, list, opts...); err != nil {
			return fmt.Errorf("reconciler: list %s children of %s/%s: %w", kind.Kind, owner.GetNamespace(), owner.GetName(), err)
		}
		return meta.EachListItem(list, func(o runtime.Object) error {
			if co, ok := o.(client.Object); ok && isChildOf(co, uid) && !containsUID(items, co.GetUID()) {
				items = append(items, o)
			}
			return nil
		})
	}
	if r.indexedKinds[kind] {
		done, err := r.childrenFromStore(ctx, owner, list, kind)
		if err != nil || done {
			return err
		}
		if err := collect(client.MatchingFields{ensure.OwnerIndex: ensure.OwnerBucket(string(uid))}); err != nil {
			return err
		}
	} else {
		if err := collect(client.MatchingLabels{ensure.LabelOwnerUID: string(uid)}); err != nil {
			return err
		}
		if ns := owner.GetNamespace(); ns != "" {
			// Children another tool linked by ownerReference alone.
			if err := collect(client.InNamespace(ns)); err != nil {
				return err
			}
		}
	}
	return meta.SetList(list, items)
}

// childrenFromStore lists into list owner's children of the indexed kind
// from the owner index in the kind's informer store, as copies carrying
// their kind, when ensure.IndexOwner put the index there (a cache of every
// namespace); done is false when it is a field index, read by a List.
func (r *Reconciler[T]) childrenFromStore(ctx context.Context, owner client.Object, list client.ObjectList, kind schema.GroupVersionKind) (done bool, _ error) {
	if r.informers == nil {
		return false, nil
	}
	var proto client.Object
	if _, ok := list.(*unstructured.UnstructuredList); ok {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(kind)
		proto = u
	} else {
		o, err := r.client.Scheme().New(kind)
		if err != nil {
			return false, fmt.Errorf("reconciler: list children of %s/%s: %w", owner.GetNamespace(), owner.GetName(), err)
		}
		if proto, done = o.(client.Object); !done {
			return false, fmt.Errorf("reconciler: list children of %s/%s: %s is not an object", owner.GetNamespace(), owner.GetName(), kind)
		}
	}
	objs, ok, err := ensure.OwnerBucketObjects(ctx, r.informers, proto, owner.GetUID())
	if err != nil {
		return false, fmt.Errorf("reconciler: list %s children of %s/%s: %w", kind.Kind, owner.GetNamespace(), owner.GetName(), err)
	}
	if !ok {
		return false, nil
	}
	var items []runtime.Object
	for _, o := range objs {
		if isChildOf(o, owner.GetUID()) {
			c := o.DeepCopyObject()
			c.GetObjectKind().SetGroupVersionKind(kind)
			items = append(items, c)
		}
	}
	return true, meta.SetList(list, items)
}

// listChildrenAsTyped lists owner's children of the typed list kind gvk
// and stores them in ul as unstructured objects with apiVersion and kind.
func (r *Reconciler[T]) listChildrenAsTyped(ctx context.Context, owner client.Object, ul *unstructured.UnstructuredList, gvk schema.GroupVersionKind) error {
	obj, err := r.client.Scheme().New(gvk)
	if err != nil {
		return fmt.Errorf("reconciler: list children of %s/%s: %w", owner.GetNamespace(), owner.GetName(), err)
	}
	typed, ok := obj.(client.ObjectList)
	if !ok {
		return fmt.Errorf("reconciler: list children of %s/%s: %s is not a list", owner.GetNamespace(), owner.GetName(), gvk)
	}
	if err := r.listChildren(ctx, owner, typed); err != nil {
		return err
	}
	item := gvk.GroupVersion().WithKind(trimList(gvk.Kind))
	ul.Items = nil
	err = meta.EachListItem(typed, func(o runtime.Object) error {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return err
		}
		u := unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(item)
		ul.Items = append(ul.Items, u)
		return nil
	})
	if err != nil {
		return fmt.Errorf("reconciler: list children of %s/%s: %w", owner.GetNamespace(), owner.GetName(), err)
	}
	ul.SetResourceVersion(typed.GetResourceVersion())
	return nil
}

func containsUID(items []runtime.Object, uid types.UID) bool {
	for _, o := range items {
		if co, ok := o.(client.Object); ok && co.GetUID() == uid {
			return true
		}
	}
	return false
}

func trimList(kind string) string {
	if len(kind) > 4 && kind[len(kind)-4:] == "List" {
		return kind[:len(kind)-4]
	}
	return kind
}

func (r *Reconciler[T]) deleteChild(ctx context.Context, owner, child client.Object) error {
	if !isChildOf(child, owner.GetUID()) {
		return fmt.Errorf("reconciler: %s/%s is not a child of %s/%s", child.GetNamespace(), child.GetName(), owner.GetNamespace(), owner.GetName())
	}
	opts := []client.DeleteOption{client.PropagationPolicy(metav1.DeletePropagationBackground)}
	if uid := child.GetUID(); uid != "" {
		opts = append(opts, client.Preconditions{UID: &uid})
	}
	if err := r.client.Delete(ctx, child, opts...); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reconciler: delete child %s/%s of %s/%s: %w", child.GetNamespace(), child.GetName(), owner.GetNamespace(), owner.GetName(), err)
	}
	return nil
}

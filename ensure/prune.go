package ensure

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
)

// pruneExcept deletes the owner's children of the prune kinds that this
// Ensurer linked and keep does not list. Candidates come from the cache
// (pruneCandidates: no request), and each delete carries a UID
// precondition, so an object recreated meanwhile under the same name by
// someone else is never deleted.
func (e *Ensurer) pruneExcept(ctx context.Context, oi ownerInfo, keep map[objectKey]bool) (ChangeSet, error) {
	var cs ChangeSet
	for _, gvk := range e.prune {
		items, err := e.pruneCandidates(ctx, gvk, oi.uid)
		if err != nil {
			return cs, err
		}
		for _, obj := range items {
			// The selector already matched, or the index found the owner's
			// bucket; the labels are checked in full (owner, manager), also
			// against a reader that ignores label selectors. The owner label
			// first: it is what tells the other owners of a bucket apart,
			// at one map lookup each.
			labels := obj.GetLabels()
			if labels[LabelOwnerUID] != string(oi.uid) || labels[LabelManager] != e.managerLabel ||
				obj.GetDeletionTimestamp() != nil {
				continue
			}
			key := objectKey{gvk: gvk, namespace: obj.GetNamespace(), name: obj.GetName()}
			if keep[key] || e.recentlyDeleted(obj.GetUID()) {
				continue
			}
			t := &target{key: key}
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			u.SetNamespace(key.namespace)
			u.SetName(key.name)
			uid := obj.GetUID()
			err := e.c.Delete(ctx, u, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				// Gone already, or replaced by another object (UID mismatch).
				e.markDeleted(uid)
				continue
			}
			if err != nil {
				return cs, fmt.Errorf("ensure: prune %s: %w", t, err)
			}
			e.markDeleted(uid)
			e.verified.forget(key)
			cs = append(cs, t.change(Deleted))
		}
	}
	return cs, nil
}

func (e *Ensurer) listFor(gvk schema.GroupVersionKind) client.ObjectList {
	lgvk := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	if o, err := e.scheme.New(lgvk); err == nil {
		if l, ok := o.(client.ObjectList); ok {
			return l
		}
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(lgvk)
	return l
}

// pruneCandidates returns the cached objects of kind gvk that may be the
// owner's children: the owner's bucket of [OwnerIndex] read from the
// informer's store when [IndexOwner] put the index there, else a List on the
// client (the cache: no request) by the owner's labels, through the field
// index for indexed kinds. The items are only read (name, labels, UID), never
// kept or changed: neither path copies them.
func (e *Ensurer) pruneCandidates(ctx context.Context, gvk schema.GroupVersionKind, owner types.UID) ([]client.Object, error) {
	if e.indexed[gvk] {
		store, err := e.ownerStore(ctx, gvk, e.pruneKinds[gvk])
		if err != nil {
			return nil, fmt.Errorf("ensure: prune: informer of %s: %w", gvk.Kind, err)
		}
		if store != nil {
			items, err := store.bucketObjects(owner)
			if err != nil {
				return nil, fmt.Errorf("ensure: prune: %s: %w", gvk.Kind, err)
			}
			return items, nil
		}
	}
	list := e.listFor(gvk)
	opts := []client.ListOption{client.MatchingLabels{LabelOwnerUID: string(owner), LabelManager: e.managerLabel}, client.UnsafeDisableDeepCopy}
	if e.indexed[gvk] {
		// The index narrows the candidates to the owner's bucket; the
		// cache then applies the label selector before it copies items
		// into list, so the other owners of the bucket cost a label
		// match each, not a copy of their object into list.
		opts = append(opts, client.MatchingFields{OwnerIndex: OwnerBucket(string(owner))})
	}
	if err := e.c.List(ctx, list, opts...); err != nil {
		if e.indexed[gvk] && e.informers == nil {
			return nil, fmt.Errorf("ensure: prune: list %s (if IndexOwner indexed the kind in its informer's store, give the Ensurer that cache with WithInformers): %w", gvk.Kind, err)
		}
		return nil, fmt.Errorf("ensure: prune: list %s: %w", gvk.Kind, err)
	}
	var items []client.Object
	if err := meta.EachListItem(list, func(o runtime.Object) error {
		if co, ok := o.(client.Object); ok {
			items = append(items, co)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("ensure: prune: %s: %w", gvk.Kind, err)
	}
	return items, nil
}

// recentlyDeleted keeps a cache that still lists an object this Ensurer just
// deleted from causing another delete request.
func (e *Ensurer) recentlyDeleted(uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.deleted[uid]
	if ok && e.now().Sub(at) >= recentTTL {
		delete(e.deleted, uid)
		return false
	}
	return ok
}

func (e *Ensurer) markDeleted(uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	for u, at := range e.deleted {
		if now.Sub(at) >= recentTTL {
			delete(e.deleted, u)
		}
	}
	e.deleted[uid] = now
}

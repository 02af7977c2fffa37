package reconciler

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/ensure"
)

// ownerByLabel finds the owner of a child linked to it only by ensure's
// owner label (uid): by the child's ensure.AnnotationOwner, which names the
// owner's namespace and name, checked against uid in the cache; failing
// that (a child a person labelled by hand, with no annotation yet), by a scan
// of the cached Ts without copying them. No field index on T is needed: an
// index by UID would cost a set per T, in every operator, for a link that
// only cluster-scoped and cross-namespace children use.
func ownerByLabel[T client.Object](ctx context.Context, scheme *runtime.Scheme, reader client.Reader, owner schema.GroupKind, child client.Object, uid string, newObject func() T) ([]reconcile.Request, error) {
	if key, ok := ownerKeyOf(child.GetAnnotations()[ensure.AnnotationOwner], owner); ok {
		t := newObject()
		err := reader.Get(ctx, key, t)
		if err == nil && string(t.GetUID()) == uid {
			return []reconcile.Request{{NamespacedName: key}}, nil
		}
		if err != nil && client.IgnoreNotFound(err) != nil {
			return nil, err
		}
	}
	list, err := listOf(scheme, newObject)
	if err != nil {
		return nil, err
	}
	if err := reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var reqs []reconcile.Request
	err = meta.EachListItem(list, func(o runtime.Object) error {
		if co, ok := o.(client.Object); ok && string(co.GetUID()) == uid {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: co.GetNamespace(), Name: co.GetName()}})
		}
		return nil
	})
	return reqs, err
}

// ownerKeyOf parses ensure.AnnotationOwner ("Kind.group namespace/name",
// "Kind name" for a cluster-scoped owner; no ".group" for the core group)
// when it names an owner of kind gk. Anyone who may edit the child can
// rewrite the annotation: a value whose namespace or name no object can
// have (empty, ".", "..", or holding "/" or "%") is no owner key — false and
// the zero key — and the caller falls back to its scan.
func ownerKeyOf(annotation string, gk schema.GroupKind) (types.NamespacedName, bool) {
	kind, rest, ok := strings.Cut(annotation, " ")
	if !ok {
		return types.NamespacedName{}, false
	}
	want := gk.Kind
	if gk.Group != "" {
		want += "." + gk.Group
	}
	if kind != want {
		return types.NamespacedName{}, false
	}
	var key types.NamespacedName
	if ns, name, namespaced := strings.Cut(rest, "/"); namespaced {
		key = types.NamespacedName{Namespace: ns, Name: name}
		if !isObjectName(ns) {
			return types.NamespacedName{}, false
		}
	} else {
		key = types.NamespacedName{Name: rest}
	}
	if !isObjectName(key.Name) {
		return types.NamespacedName{}, false
	}
	return key, true
}

// isObjectName reports a string the API server could accept as an object's
// name or namespace at the least: a non-empty path segment.
func isObjectName(s string) bool { return s != "" && len(content.IsPathSegmentName(s)) == 0 }

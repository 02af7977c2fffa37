package reconciler

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/ensure"
)

// indexField registers fn as index name of obj's kind; a second
// registration of the same name (two builders for one kind) is harmless.
func indexField(ctx context.Context, indexer client.FieldIndexer, obj client.Object, name string, fn client.IndexerFunc) error {
	err := indexer.IndexField(ctx, obj, name, fn)
	if err != nil && !strings.Contains(err.Error(), "indexer conflict") {
		return fmt.Errorf("index %T by %s: %w", obj, name, err)
	}
	return nil
}

// ownerMapper maps a child's event to its owner: the controller
// ownerReference when it names the owner kind (in the child's namespace, or
// none when the owner kind is cluster-scoped: the owner's key must be the one
// its own events use, or the work queue would see two objects), else ensure's
// owner label, resolved to the owner's namespace/name by ownerByLabel.
func ownerMapper[T client.Object](scheme *runtime.Scheme, reader client.Reader, owner schema.GroupKind, ownerNamespaced func() (bool, error), newObject func() T) handler.MapFunc {
	return func(ctx context.Context, child client.Object) []reconcile.Request {
		if ref := metav1.GetControllerOfNoCopy(child); ref != nil {
			if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && gv.Group == owner.Group && ref.Kind == owner.Kind {
				key := types.NamespacedName{Name: ref.Name}
				namespaced, err := ownerNamespaced()
				if err != nil {
					// The child's namespace still reaches the owner (a cluster-scoped
					// Get ignores it); only the queue key differs.
					log.FromContext(ctx).Error(err, "scope of the owner kind", "kind", owner.Kind)
				}
				if namespaced {
					key.Namespace = child.GetNamespace()
				}
				return []reconcile.Request{{NamespacedName: key}}
			}
		}
		uid := child.GetLabels()[ensure.LabelOwnerUID]
		if uid == "" {
			return nil
		}
		reqs, err := ownerByLabel(ctx, scheme, reader, owner, child, uid, newObject)
		if err != nil {
			log.FromContext(ctx).Error(err, "map a labelled child to its owner")
		}
		return reqs
	}
}

// reference is one References declaration.
type reference struct {
	obj        client.Object
	index      string
	extract    client.IndexerFunc
	opts       []builder.WatchesOption
	namespaced bool
}

// References declares that T refers to objects of obj's kind — a Secret a
// WebApp names for its TLS certificate, a ConfigMap of settings — by the
// keys refs returns for a T: a change to such an object reconciles exactly
// the Ts that reference it. A key with an empty namespace means T's own
// namespace (for a namespaced obj kind; cluster-scoped kinds have none).
// The lookup is a cache field index on T (registered by Build), not a scan
// of every T, so it needs an informer cache: [For], or [ForClient] with
// [Builder.WithCache]. opts are controller-runtime WatchesOption values,
// e.g. builder.OnlyMetadata to cache only the referenced objects' metadata
// (pass obj as a *metav1.PartialObjectMetadata with its apiVersion and kind
// set, or a typed object: controller-runtime converts it), or
// builder.WithPredicates.
func (b *Builder[T]) References(obj client.Object, refs func(T) []types.NamespacedName, opts ...builder.WatchesOption) *Builder[T] {
	r := &reference{obj: obj, opts: opts, namespaced: true}
	gvk, err := b.gvkOf(obj)
	if err != nil {
		b.errs = append(b.errs, fmt.Errorf("reconciler %s: References(%T): %w", b.name, obj, err))
		return b
	}
	if b.client != nil {
		if ns, err := b.client.IsObjectNamespaced(obj); err == nil {
			r.namespaced = ns
		}
	}
	r.index = "reconciler.opkit.dev/ref." + gvk.GroupKind().String()
	r.extract = func(o client.Object) []string {
		t, ok := o.(T)
		if !ok {
			return nil
		}
		var keys []string
		for _, k := range refs(t) {
			if k.Name == "" {
				continue
			}
			if !r.namespaced {
				k.Namespace = ""
			} else if k.Namespace == "" {
				k.Namespace = o.GetNamespace()
			}
			keys = append(keys, k.String())
		}
		return keys
	}
	b.refs = append(b.refs, r)
	return b
}

func (b *Builder[T]) gvkOf(obj client.Object) (schema.GroupVersionKind, error) {
	if b.client == nil {
		return schema.GroupVersionKind{}, fmt.Errorf("no client")
	}
	return b.client.GroupVersionKindFor(obj)
}

// refMapper maps an event of a referenced object to the Ts that reference it.
func refMapper[T client.Object](r *reference, scheme *runtime.Scheme, reader client.Reader, newObject func() T) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
		list, err := listOf(scheme, newObject)
		if err != nil {
			log.FromContext(ctx).Error(err, "map a referenced object to its referrers")
			return nil
		}
		if err := reader.List(ctx, list, client.MatchingFields{r.index: key.String()}); err != nil {
			log.FromContext(ctx).Error(err, "map a referenced object to its referrers")
			return nil
		}
		return requestsOf(list)
	}
}

// listOf returns an empty list of T's kind.
func listOf[T client.Object](scheme *runtime.Scheme, newObject func() T) (client.ObjectList, error) {
	gvk, err := apiutil.GVKForObject(newObject(), scheme)
	if err != nil {
		return nil, err
	}
	o, err := scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		u := &unstructured.UnstructuredList{}
		u.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		return u, nil //nolint:nilerr // an unregistered list kind is read as unstructured
	}
	l, ok := o.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("%s is not a list kind", gvk.Kind+"List")
	}
	return l, nil
}

// requestsOf returns a request per item of list.
func requestsOf(list client.ObjectList) []reconcile.Request {
	var reqs []reconcile.Request
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if co, ok := o.(client.Object); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: co.GetNamespace(), Name: co.GetName()}})
		}
		return nil
	})
	return reqs
}

// scopeOf returns whether obj's kind is namespaced, asking c's REST mapper
// at the first call that can get an answer and remembering it; until then it
// says namespaced, with the error.
func scopeOf(c client.Client, obj client.Object) func() (bool, error) {
	var mu sync.Mutex
	known, namespaced := false, true
	return func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if known {
			return namespaced, nil
		}
		ns, err := c.IsObjectNamespaced(obj)
		if err != nil {
			return true, err
		}
		known, namespaced = true, ns
		return ns, nil
	}
}

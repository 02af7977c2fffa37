package reconciler

import (
	"reflect"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/ensure"
)

// CacheDeclaredOnly returns opts with a cache transform for kind that runs
// opts' DefaultTransform (normally [CompactMetadata]) and then
// ensure.DeclaredOnly: cached children of the kind that carry
// ensure.AnnotationDeclared keep their metadata, their status, the fields at
// keep (dot-separated paths, e.g. "spec.replicas": undeclared fields that a
// status step or another reader of the cache needs) and, of everything else,
// only the fields their record declares. Objects without a record are cached
// whole. A kind already in opts.ByObject keeps its settings, its own
// Transform (if any) running first. Trimmed copies carry
// ensure.AnnotationTrimmed, so the builder's Ensurer reads such a child past
// the cache before a merge-patch write of it, and fields and keyed-list items
// others added (a sidecar, an injected env var) stay: a no-op reconcile still
// costs no request, a changed child one GET more. Use it for kinds whose
// undeclared fields no status step, mapping function or other reader takes
// from the cache (a Deployment's server-defaulted PodSpec fields, say), not
// for a kind whose server-assigned fields are read (a Service's clusterIP).
func CacheDeclaredOnly(opts cache.Options, kind client.Object, keep ...string) cache.Options {
	trim := ensure.NewDeclaredOnly(keep...)
	byObject := make(map[client.Object]cache.ByObject, len(opts.ByObject)+1)
	key := kind
	for k, v := range opts.ByObject {
		byObject[k] = v
		if reflect.TypeOf(k) == reflect.TypeOf(kind) {
			key = k
		}
	}
	bo := byObject[key]
	first := bo.Transform
	if first == nil {
		first = opts.DefaultTransform
	}
	bo.Transform = chain(first, trim.Transform)
	byObject[key] = bo
	opts.ByObject = byObject
	return opts
}

// chain runs first (when set), then then.
func chain(first, then toolscache.TransformFunc) toolscache.TransformFunc {
	if first == nil {
		return then
	}
	return func(obj any) (any, error) {
		obj, err := first(obj)
		if err != nil {
			return obj, err
		}
		return then(obj)
	}
}

package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/opkit/opkit/reconciler"
)

// CacheOptions returns the manager cache options the webapp operator runs
// with: reconciler.CacheOptions with reconciler.SharedMaps as the default
// transform (managedFields stripped, label and annotation strings shared,
// equal label maps — the owner labels on all three children, the app labels
// a Deployment selects by and a Service selects by — one map) and, for
// Deployments, reconciler.CacheDeclaredOnly
// keeping spec.replicas (the status step reads the replicas an autoscaler
// set): the cached Deployments the operator wrote hold their metadata, their
// status and the fields it declares, without the server-defaulted rest of
// the PodSpec, marked ensure.AnnotationTrimmed, so a changed Deployment is
// read past the cache before it is patched and what others added to it
// stays. The informers fill their caches by LIST, not watch-list
// (reconciler.CacheListWatch): the operator restarts faster. [Setup] works
// with these options or without them.
func CacheOptions() cache.Options {
	opts := reconciler.CacheListWatch(reconciler.CacheOptions())
	opts.DefaultTransform = reconciler.NewSharedMaps().Transform
	return reconciler.CacheDeclaredOnly(opts, &appsv1.Deployment{}, "spec.replicas")
}

package ensure

import (
	"k8s.io/client-go/openapi"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Strategy is how [Ensurer.Ensure] writes an object that differs from its
// declaration. Both create missing objects, read only the cache when nothing
// changed, and send at most one write per changed object.
type Strategy int

const (
	// MergePatch sends a JSON merge patch holding the declared fields that
	// differ and a null for each map key the previous write declared
	// ([AnnotationDeclared]) and this declaration does not. A list that
	// changes is sent whole (a merge patch cannot do better), built from the
	// live list: items of a keyed list that only others declared are kept,
	// items this declaration dropped are left out, atomic lists are the
	// declared ones. Such a patch carries the live resourceVersion and fails
	// with a Conflict, to be retried, rather than lose another writer's
	// concurrent list change. A field never declared is never sent. Writes
	// are recorded under the field owner as Update operations.
	MergePatch Strategy = iota
	// ServerSideApply applies the declaration with the field owner, forcing
	// ownership of the declared fields. The API server removes fields the
	// owner applied before and no longer declares (unless another manager
	// also owns them, as when an HPA took spec.replicas over); fields other
	// managers own are never touched. A dropped field is noticed from the
	// record ([AnnotationDeclared]), so a cache that strips managedFields
	// does not hide it.
	ServerSideApply
)

func (s Strategy) String() string {
	if s == ServerSideApply {
		return "ServerSideApply"
	}
	return "MergePatch"
}

// AdoptionPolicy says which existing objects, found at a desired name but not
// linked to this owner, [Ensurer.Ensure] may take over.
type AdoptionPolicy int

const (
	// AdoptNever refuses every object not already linked to the owner: the
	// default, so an operator never silently takes over an object a user or
	// another controller created.
	AdoptNever AdoptionPolicy = iota
	// AdoptOrphans takes over objects no controller owns (no controller
	// ownerReference and no ensure owner label), e.g. ones created by hand or
	// orphaned by a deleted owner.
	AdoptOrphans
	// AdoptAny also takes over objects controlled by another owner, removing
	// that owner's controller ownerReference.
	AdoptAny
)

// Option configures [New].
type Option func(*Ensurer)

// WithStrategy selects how objects are written (default [MergePatch]).
func WithStrategy(s Strategy) Option { return func(e *Ensurer) { e.strategy = s } }

// WithAPIReader sets the uncached reader used when the cache cannot be
// trusted: after a create answered AlreadyExists, and before a server-side
// apply would create an object the cache does not show. Pass the manager's
// GetAPIReader(). The default is the Ensurer's client.
func WithAPIReader(r client.Reader) Option { return func(e *Ensurer) { e.apiReader = r } }

// WithInformers gives the Ensurer the informers of the cache its client
// reads (the manager's cache), so it knows when that cache has stored an
// object it created: its record of the create (see read-your-writes in the
// package documentation) is dropped as soon as the kind's informer has
// stored the object (an event handler on the informer), and from then on
// the cache's NotFound is the truth — the object was deleted since — and
// the next Ensure creates it again. Without it, such a record stands in
// until an Ensure finds the object in the cache, or for a minute; a patch
// answered NotFound drops it and creates the object, but a declaration
// that equals the record sends no request and the object stays missing
// until then. Unstructured declarations are not tracked this way (ensure
// starts no informer for them). The reconciler package's builder sets this
// option.
func WithInformers(i cache.Informers) Option { return func(e *Ensurer) { e.informers = i } }

// WithAdoption sets the adoption policy (default [AdoptNever]).
func WithAdoption(p AdoptionPolicy) Option { return func(e *Ensurer) { e.adopt = p } }

// WithRecreateOnImmutable makes a write the API server rejects because it
// changes an immutable field (Service spec.clusterIP, Deployment
// spec.selector, Job spec.template…) delete the object (UID precondition,
// background propagation) and create it again, reported as [Recreated].
// Without it such a write is a terminal [ErrImmutable].
func WithRecreateOnImmutable() Option { return func(e *Ensurer) { e.recreate = true } }

// WithCrossNamespace allows namespaced children in a namespace other than the
// owner's. They, and cluster-scoped children of a namespaced owner, are linked
// by labels and an annotation only (ownerReferences cannot express it), so
// the garbage collector does not delete them with the owner: prune them, or
// remove them in a finalizer.
func WithCrossNamespace() Option { return func(e *Ensurer) { e.crossNamespace = true } }

// WithPrune makes every [Ensurer.Ensure] delete objects of these kinds that
// carry this Ensurer's owner link for the owner but are not in the desired
// set. Pass one object per kind, e.g. &appsv1.Deployment{} (or an
// *unstructured.Unstructured with its GVK set). Objects are found by label in
// the cache (through [OwnerIndex] with [WithOwnerIndex]), so the kinds'
// informers (the client's cache) must include them.
func WithPrune(kinds ...client.Object) Option {
	return func(e *Ensurer) { e.pruneProtos = append(e.pruneProtos, kinds...) }
}

// WithMigrateFrom names client-side field managers (e.g. the manager an
// earlier controller version used with controllerutil.CreateOrUpdate, often
// the binary name) whose Update ownership is folded into the field owner's
// Apply ownership before the next server-side apply (Kubernetes #99003). The
// field owner's own Update entries are always migrated. Without migration a
// field such a manager set survives being dropped from the declaration. It
// costs one extra JSON patch, once per object. Only used by [ServerSideApply].
func WithMigrateFrom(managers ...string) Option {
	return func(e *Ensurer) {
		for _, m := range managers {
			e.migrateFrom[m] = true
		}
	}
}

// WithOpenAPI gives the Ensurer the API server's OpenAPI v3 documents (e.g.
// discovery.NewDiscoveryClientForConfigOrDie(cfg).OpenAPIV3()), from which it
// learns how the lists of kinds client-go was not built with — custom
// resources — merge: x-kubernetes-list-type map (by which keys), set or
// atomic. Each group-version's document is read once, at the first Ensure of
// one of its kinds, and kept; a failed read is returned as a retryable error.
// Kinds client-go knows use its compiled-in schema and cost no request.
// Without this option a custom resource's lists are all treated as atomic
// (what the API server does with a list that has no x-kubernetes-list-type):
// compared and written whole, so items another actor added to such a list
// are replaced.
func WithOpenAPI(c openapi.Client) Option { return func(e *Ensurer) { e.schemas.openapi = c } }

// WithObserver reports every change to o.
func WithObserver(o Observer) Option { return func(e *Ensurer) { e.observer = o } }

// Package ensure makes an operator's child objects exist as declared —
// creating what is missing, changing only the fields the operator manages,
// pruning what it no longer wants — and costs no API request at all when
// nothing changed.
//
// # Guarantees
//
//   - Zero requests on a no-op. With a cached client (the manager's), an
//     object that already holds every declared field costs no write, no
//     dry-run and no live GET, also when the API server defaulted fields the
//     declaration leaves out (Deployment strategy, revisionHistoryLimit;
//     Service clusterIP, ipFamilies; container imagePullPolicy…): the
//     declaration is compared as a subset of the cached object, items of
//     keyed lists by the keys the kind's schema gives them (containers and
//     env by name, container ports by number and protocol, ownerReferences by
//     uid), atomic lists whole and in order; of a typed cached object, only
//     the fields the declaration names are converted for it. The record of
//     declared fields (below) is part of the declaration, so a dropped field
//     is a difference the cached object shows; with [ServerSideApply] the
//     field owner's managedFields, when cached, are checked as well. A child
//     found holding its declaration is remembered (its UID and
//     resourceVersion and a digest of the declaration and owner; at most
//     65,536 children per Ensurer, forgotten when ensure sees the child
//     gone) and not compared again until either side moves: any write to the
//     child, by anyone, changes its resourceVersion, so drift is still found
//     and corrected at the next Ensure.
//   - Declared state is the whole truth, with either strategy and by default:
//     a field, map key or list item the operator declared and no longer
//     declares is removed on the next Ensure — a config key, an env var, a
//     port, a volume, a sidecar. Every child carries [AnnotationDeclared],
//     the set of fields its last write declared (field paths only, no
//     values); what it lists and the new declaration lacks is what goes.
//     [MergePatch] sends a null for such a map key and the list without such
//     an item; [ServerSideApply] applies, and the API server drops what the
//     field owner stopped applying.
//   - Never clobbers what it does not own: labels and annotations users add,
//     fields other field managers own (an HPA's spec.replicas when the
//     declaration leaves replicas unset), items others added to keyed lists
//     (an injected env var or sidecar), server defaults, any status. A field
//     is removed only if the operator's own record lists it; a field never
//     declared is never sent.
//   - Owner-safe. Every child carries [LabelOwnerUID] and [LabelManager];
//     children in the owner's namespace (or of a cluster-scoped owner) also
//     get a controller ownerReference, so the garbage collector deletes them
//     with the owner, and the others [AnnotationOwner], which names it. An
//     existing object linked to another owner, or to none, is refused with a
//     terminal [ErrNotOwned] (not terminal: re-checked every
//     [NotOwnedRecheck], since whoever fixes it deletes or renames the other
//     object, which changes nothing on the owner) whose message says what is
//     in the way and what to do, unless [WithAdoption] allows taking it. A person hands an orphan over by
//     labelling it with [LabelOwnerUID] set to the owner's UID.
//   - Prunes only its own. With [WithPrune], objects of the named kinds that
//     carry this owner's and this Ensurer's link but are no longer desired are
//     deleted, found by label selector in the cache (no LIST request), each
//     delete with a UID precondition. With [IndexOwner] on the cache and
//     [WithOwnerIndex], they are looked up in an index instead of a scan of
//     every cached object of the kind — read straight from the informer's
//     store, without a List, on a cache of every namespace given by
//     [WithInformers] (the reconciler package does this). There a read that
//     finds more than 64 objects in the owner's bucket adds
//     [OwnerFineIndex], 16 times as many buckets, so the objects a prune
//     reads stay few as the cache grows.
//   - Read-your-writes. An Ensurer remembers objects it just created until
//     its cache sees them, so a stale cache neither re-creates nor errors; a
//     create answered AlreadyExists is read once past the cache and treated
//     as existing, never returned as an error. With [WithInformers] the
//     record is dropped as soon as the kind's informer has stored the
//     object, so an object deleted soon after it was created is created
//     again by the next Ensure once the cache has seen the delete; a patch answered NotFound drops the record and creates the
//     object in the same Ensure.
//   - Classified errors, through github.com/opkit/opkit/outcome. Bad
//     declarations (no name, a disallowed namespace, an unknown kind, a 422
//     from the API server) are terminal [ErrInvalid] (reason
//     [ReasonInvalidChild]); immutable-field changes are terminal
//     [ErrImmutable] (reason [ReasonImmutableField]) unless
//     [WithRecreateOnImmutable]; [ErrNotOwned] is DependencyNotReady (reason
//     [ReasonNotOwned]). Terminal ones wrap reconcile.TerminalError. Each
//     message names the object once, says what is wrong and, where a person
//     can fix it, how. Anything else (conflicts, timeouts) is returned
//     plainly for the controller to retry.
//   - A cache that holds only what Ensure compares ([DeclaredOnly] as the
//     kind's cache transform) changes no outcome, and the Ensurer needs no
//     option for it: a no-op costs no request, a declared field that drifted
//     is corrected, and a [MergePatch] write of a child whose cached copy
//     carries [AnnotationTrimmed] is computed from the child read past the
//     cache, so fields and keyed-list items others set and server defaults
//     stay; the cost is one GET per changed child.
//   - Migration from client-side management: [WithMigrateFrom] folds earlier
//     Update ownership into the apply manager (k8s.io/client-go/util/csaupgrade)
//     before the next apply, so fields dropped from the declaration really go.
//
// # What "declared" means
//
// A desired object declares the fields it sets. For *unstructured.Unstructured
// that is every non-null field. For typed objects it is every field that is
// set: nil pointers, nil or empty maps and slices, and zero values not behind a
// pointer are unset. So leave Replicas nil to let an HPA own it, and use
// ptr.To[int32](0) to scale to zero. Status is never declared; of metadata,
// name, namespace, labels, annotations, ownerReferences and finalizers are.
// A namespaced child with no namespace goes to the owner's namespace.
//
// # Usage
//
//	e, err := ensure.New(mgr.GetClient(), "webapp-operator",
//		ensure.WithStrategy(ensure.ServerSideApply),
//		ensure.WithAPIReader(mgr.GetAPIReader()),
//		ensure.WithPrune(&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}))
//	...
//	changes, err := e.Ensure(ctx, webapp, deployment(webapp), service(webapp), config(webapp))
//	if changes.Changed() {
//		recorder.Event(webapp, corev1.EventTypeNormal, "Reconciled", changes.Summary())
//	}
//
// Code written around controllerutil.CreateOrUpdate can switch to
// [Ensurer.CreateOrPatch] with the same mutate function.
//
// # Strategies
//
// Both strategies need nothing from the cache but the object: the record
// travels on it, so a cache that strips managedFields (as
// reconciler.CacheOptions does) loses nothing. [MergePatch] (the default)
// computes on the client what an apply would leave — the live object, minus
// the recorded fields no longer declared, with the declaration laid over it —
// and sends the difference: changed fields, a null per removed map key, and
// each changed list whole (keyed lists keep others' items) under an
// optimistic lock. It cannot tell that another actor took over a field the
// operator stops declaring (an HPA's replicas after the operator set them):
// the field is removed, and the other actor sets it again. [ServerSideApply]
// leaves such a field to its co-owner, because the API server tracks
// ownership; it shares keyed lists with other managers natively.
//
// Each changed object costs one write. Extra requests: one uncached GET
// before a server-side create; with ServerSideApply, when a field is to be
// removed and the cache strips managedFields, one uncached GET to see whether
// ownership must be migrated first, and one JSON patch per object migrated;
// one patch when adopting from another controller; and, the first time an
// Ensurer writes a child that predates the record, one write to add it.
// With [MergePatch], a typed declaration of a built-in kind is created and
// patched through a typed object, so the client reads the API server's
// answer in protobuf (for a created Deployment, about a quarter of a
// millisecond of CPU less than decoding its JSON into a map); the body of a
// patch is the same JSON merge patch either way, and the [Change] carries
// the same object.
//
// # Schemas
//
// Which lists are keyed, by which fields, and which are sets or atomic comes
// from the kind's schema, never from field names: client-go's compiled-in
// schema for the kinds it knows (no request), the API server's OpenAPI v3
// document for custom resources when [WithOpenAPI] is given (read once per
// group-version). Without it a custom resource's lists are treated as atomic.
package ensure

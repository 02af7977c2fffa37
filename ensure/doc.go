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
//     declaration is compared as a subset of the cached object, lists of
//     objects by their merge key (containers and env by name, ports by
//     number, ownerReferences by uid). With [ServerSideApply] the field
//     owner's managedFields are also checked, so a field it applied and no
//     longer declares triggers the apply that removes it.
//   - Never clobbers what it does not own: labels and annotations users add,
//     fields other field managers own (an HPA's spec.replicas when the
//     declaration leaves replicas unset), any status. [MergePatch] sends only
//     changed declared fields and never a null; [ServerSideApply] applies only
//     the declaration.
//   - Owner-safe. Every child carries [LabelOwnerUID], [LabelManager] and
//     [AnnotationOwner]; children in the owner's namespace (or of a
//     cluster-scoped owner) also get a controller ownerReference, so the
//     garbage collector deletes them with the owner. An existing object linked
//     to another owner, or to none, is refused with a terminal [ErrNotOwned]
//     naming its owner, unless [WithAdoption] allows taking it.
//   - Prunes only its own. With [WithPrune], objects of the named kinds that
//     carry this owner's and this Ensurer's link but are no longer desired are
//     deleted, found by label selector in the cache (no LIST request), each
//     delete with a UID precondition. With [IndexOwner] on the cache and
//     [WithOwnerIndex], they are looked up in an index instead of a scan of
//     every cached object of the kind (the reconciler package does this).
//   - Read-your-writes. An Ensurer remembers objects it just created until
//     its cache sees them, so a stale cache neither re-creates nor errors; a
//     create answered AlreadyExists is read once past the cache and treated
//     as existing, never returned as an error.
//   - Classified errors. Bad declarations (no name, a disallowed namespace, an
//     unknown kind, a 422 from the API server) are terminal [ErrInvalid];
//     immutable-field changes are terminal [ErrImmutable] unless
//     [WithRecreateOnImmutable]. All are wrapped with reconcile.TerminalError
//     and name the object. Anything else (conflicts, timeouts) is returned
//     plainly for the controller to retry.
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
// [MergePatch] needs nothing from the cache but the object; it cannot remove a
// field (a declaration that stops setting one leaves it as it was) and
// replaces lists whole under an optimistic lock. [ServerSideApply] removes what
// the field owner stops declaring and shares lists with other managers; it
// needs managedFields in the cache (the default). Both send one write per
// changed object. The cost of a change is one request, plus one uncached GET
// before a server-side create, one JSON patch once per object migrated, and
// one patch when adopting from another controller.
package ensure

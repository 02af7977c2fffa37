package ensure

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OwnerIndex is the name of the cache field index [IndexOwner] registers:
// each object of an indexed kind is indexed under the value of its
// [LabelOwnerUID] label (objects without the label are not indexed).
const OwnerIndex = "ensure.opkit.dev/owner-uid"

// IndexOwner registers [OwnerIndex] for each kind on indexer — the cache the
// Ensurer's client reads, e.g. manager.GetFieldIndexer() — and must run
// before that cache starts. With [WithOwnerIndex], prune then finds an
// owner's children by a lookup in the index instead of matching a label
// selector against every cached object of the kind, which costs time in
// proportion to all objects of the kind on every Ensure: with thousands of
// owners that scan dominated reconcile CPU. Registering a kind twice on the
// same cache (two controllers pruning the same kind) is not an error: the
// index is the same.
func IndexOwner(ctx context.Context, indexer client.FieldIndexer, kinds ...client.Object) error {
	for _, kind := range kinds {
		err := indexer.IndexField(ctx, kind, OwnerIndex, ownerUIDOf)
		// client-go reports a second registration of one index name as an
		// "indexer conflict"; the extractor is the same, so it is harmless.
		if err != nil && !strings.Contains(err.Error(), "indexer conflict") {
			return fmt.Errorf("ensure: index %T by %s: %w", kind, OwnerIndex, err)
		}
	}
	return nil
}

func ownerUIDOf(obj client.Object) []string {
	if uid := obj.GetLabels()[LabelOwnerUID]; uid != "" {
		return []string{uid}
	}
	return nil
}

// WithOwnerIndex makes prune ([WithPrune]) list an owner's children through
// [OwnerIndex] instead of a label selector. Every pruned kind must be indexed
// with [IndexOwner] on the cache the Ensurer's client reads; otherwise every
// Ensure that prunes fails with the cache's "index does not exist" error.
// The reconciler package's builder registers the index and sets this option
// for the kinds it Owns.
func WithOwnerIndex() Option { return func(e *Ensurer) { e.ownerIndex = true } }

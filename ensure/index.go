package ensure

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OwnerIndex is the name of the cache field index [IndexOwner] registers:
// each object of an indexed kind that carries [LabelOwnerUID] is indexed
// under [OwnerBucket] of that label's value; an object without the label but
// with a controller ownerReference is indexed under the bucket of that
// owner's UID (so children another tool made are found too); other objects
// are not indexed. A bucket holds the children of about 1/256 of the owners;
// prune checks each candidate's labels in full.
const OwnerIndex = "ensure.opkit.dev/owner-uid-bucket"

// ownerBucketLen is how many leading characters of an owner UID name its
// bucket: 256 buckets of hexadecimal UIDs. An index entry per owner would
// cost a set per owner and namespace (about 0.5 KiB per child object, 2 MiB
// per 1,000 three-child owners); buckets cost a slot per child in one of at
// most 256 sets, and a lookup returns about 1/256 of the kind's children.
const ownerBucketLen = 2

// OwnerBucket is the [OwnerIndex] value of children of the owner with uid.
func OwnerBucket(uid string) string {
	if len(uid) > ownerBucketLen {
		return uid[:ownerBucketLen]
	}
	return uid
}

// IndexOwner registers [OwnerIndex] for each kind on indexer — the cache the
// Ensurer's client reads, e.g. manager.GetFieldIndexer() — and must run
// before that cache starts. With [WithOwnerIndex], prune then looks an
// owner's children up in the index (its bucket) instead of matching a label
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
		return []string{OwnerBucket(uid)}
	}
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return []string{OwnerBucket(string(ref.UID))}
	}
	return nil
}

// WithOwnerIndex makes prune ([WithPrune]) list an owner's children of the
// given kinds through [OwnerIndex] instead of a label selector; with no
// kinds, of every pruned kind. Each such kind must be indexed with
// [IndexOwner] on the cache the Ensurer's client reads; otherwise every
// Ensure that prunes it fails with the cache's "index does not exist" error.
// Kinds not named keep the label selector, which an uncached client (a
// direct API client) can serve. The reconciler package's builder registers
// the index and sets this option for the kinds it Owns with an index.
func WithOwnerIndex(kinds ...client.Object) Option {
	return func(e *Ensurer) {
		e.ownerIndex = true
		e.indexProtos = append(e.indexProtos, kinds...)
	}
}

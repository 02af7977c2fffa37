package ensure

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// An owner store adds OwnerFineIndex on the first read of a bucket of more
// than 64 objects, not before; a second owner store on the same client-go
// store (another Ensurer) that finds it added ("indexer conflict") reads
// it too.
func TestOwnerStoreRefinesPastRefineAfter(t *testing.T) {
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{OwnerIndex: ownerBucketOf})
	add := func(uid string, n int) {
		for i := range n {
			o := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("%s-%d", uid, i), Labels: map[string]string{LabelOwnerUID: uid}}}
			if err := store.Add(o); err != nil {
				t.Fatal(err)
			}
		}
	}
	add("ab0", refineAfter-10)
	add("ab1", 10) // the "ab" bucket holds refineAfter objects: not more
	add("cd0", 1)
	first, second := &ownerStore{Indexer: store}, &ownerStore{Indexer: store}
	if objs, err := first.bucket(types.UID("ab0")); err != nil || len(objs) != refineAfter {
		t.Fatalf("bucket ab: %d objects, %v; want %d", len(objs), err, refineAfter)
	}
	if first.fine.Load() || store.GetIndexers()[OwnerFineIndex] != nil {
		t.Fatalf("a bucket of %d objects added %s", refineAfter, OwnerFineIndex)
	}
	add("ab2", 1)
	if objs, err := first.bucket(types.UID("ab0")); err != nil || len(objs) != refineAfter+1 {
		t.Fatalf("bucket ab: %d objects, %v; want %d", len(objs), err, refineAfter+1)
	}
	if !first.fine.Load() || store.GetIndexers()[OwnerFineIndex] == nil {
		t.Fatalf("a bucket of %d objects did not add %s", refineAfter+1, OwnerFineIndex)
	}
	if objs, err := first.bucket(types.UID("ab0")); err != nil || len(objs) != refineAfter-10 {
		t.Fatalf("fine bucket ab0: %d objects, %v; want %d", len(objs), err, refineAfter-10)
	}
	// The second store still reads OwnerIndex, finds the bucket large and
	// the fine index there already.
	if objs, err := second.bucket(types.UID("ab1")); err != nil || len(objs) != refineAfter+1 || !second.fine.Load() {
		t.Fatalf("second store: %d objects, %v, fine %v; want %d and fine", len(objs), err, second.fine.Load(), refineAfter+1)
	}
	if objs, err := second.bucket(types.UID("ab1")); err != nil || len(objs) != 10 {
		t.Fatalf("second store, fine bucket ab1: %d objects, %v; want 10", len(objs), err)
	}
	// Objects added later are in the fine index too.
	add("ab1x", 1)
	if objs, err := second.bucket(types.UID("ab1")); err != nil || len(objs) != 11 {
		t.Fatalf("fine bucket ab1 after an add: %d objects, %v; want 11", len(objs), err)
	}
}

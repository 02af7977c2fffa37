package reconciler

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/ensure"
)

// optsReader records the Get options that reach it.
type optsReader struct {
	client.Reader
	got []client.GetOption
}

func (r *optsReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.got = opts
	obj.SetResourceVersion("7")
	return nil
}

// TestFreshReaderPassesGetOptions: Observed.Reader's doc lets a read-only
// step pass client.UnsafeDisableDeepCopy; the option must reach the cache
// both for a child this reconcile wrote and for one it did not.
func TestFreshReaderPassesGetOptions(t *testing.T) {
	written := &unstructured.Unstructured{}
	written.SetResourceVersion("7")
	changes := ensure.ChangeSet{{GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: "ns", Name: "written", Object: written}}
	for _, name := range []string{"written", "other"} {
		under := &optsReader{}
		r := fresh(under, clientgoscheme.Scheme, changes)
		if _, ok := r.(*freshReader); !ok {
			t.Fatalf("fresh returned %T, want the fresh reader", r)
		}
		if err := r.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &corev1.ConfigMap{}, client.UnsafeDisableDeepCopy); err != nil {
			t.Fatal(err)
		}
		if len(under.got) != 1 || under.got[0] != client.UnsafeDisableDeepCopy {
			t.Errorf("%s: the cache got options %v, want UnsafeDisableDeepCopy", name, under.got)
		}
	}
}

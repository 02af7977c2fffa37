package ensure_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/ensure"
)

// deletedBehindTheRecord creates a ConfigMap through e, lets the cache see
// it, deletes it directly and waits until the cache has seen the delete, with
// no Ensure in between: e still holds its record of the create.
func deletedBehindTheRecord(t *testing.T, h *harness, e *ensure.Ensurer, owner client.Object, cm func(string) *corev1.ConfigMap) {
	t.Helper()
	ctx := testCtx(t)
	cs, err := e.Ensure(ctx, owner, cm("one"))
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, ensure.Created)
	live := cm("")
	h.waitCached(t, live)
	if err := env.Client.Delete(ctx, live); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the cache sees the delete", func() (bool, error) {
		err := h.cache.Get(ctx, client.ObjectKeyFromObject(live), &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

func gotData(t *testing.T, key client.ObjectKey) string {
	t.Helper()
	got := &corev1.ConfigMap{}
	if err := env.Client.Get(testCtx(t), key, got); err != nil {
		t.Fatalf("%s not created again: %v", key, err)
	}
	return got.Data["value"]
}

// With WithInformers, an object deleted soon after the Ensurer created it is
// created again by the next Ensure once the cache has seen the delete, even
// when the declaration equals the record of the create (no patch to fail).
func TestDeletedSoonAfterCreateIsCreatedAgain(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.String(), func(t *testing.T) {
			ns := env.Namespace(t)
			h := newHarness(t, ns)
			e := h.ensurer(t, s, ensure.WithInformers(h.cache))
			owner := newOwner(t, ns, "app")
			cm := func(v string) *corev1.ConfigMap {
				return &corev1.ConfigMap{
					TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-config"},
					Data:       map[string]string{"value": v},
				}
			}
			deletedBehindTheRecord(t, h, e, owner, cm)
			h.counter.Reset()
			cs, err := e.Ensure(testCtx(t), owner, cm("one"))
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Created)
			if v := gotData(t, client.ObjectKeyFromObject(cm(""))); v != "one" {
				t.Fatalf("value = %q", v)
			}
			if n := h.counter.Writes(); n != 1 {
				t.Fatalf("recreating wrote %d times, want 1:\n%s", n, h.counter)
			}
		})
	}
}

// Without WithInformers, a merge patch of an object that is gone (answered
// 404) drops the record and creates the object in the same Ensure, instead
// of failing until the record expires.
func TestPatchOfADeletedObjectCreatesIt(t *testing.T) {
	ns := env.Namespace(t)
	h := newHarness(t, ns)
	e := h.ensurer(t, ensure.MergePatch)
	owner := newOwner(t, ns, "app")
	cm := func(v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-config"},
			Data:       map[string]string{"value": v},
		}
	}
	deletedBehindTheRecord(t, h, e, owner, cm)
	cs, err := e.Ensure(testCtx(t), owner, cm("two"))
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, ensure.Created)
	if v := gotData(t, client.ObjectKeyFromObject(cm(""))); v != "two" {
		t.Fatalf("value = %q, want two", v)
	}
}

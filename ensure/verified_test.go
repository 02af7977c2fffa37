package ensure_test

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/ensure"
)

// An Ensurer remembers children it found holding their declaration, to skip
// comparing them again while neither side moves. That memory must never
// hide drift: after any number of verified no-ops, an edit by someone else
// (also one that bumps no generation: a label, a ConfigMap value), a change
// of the declaration and a deleted child are each acted on at the next
// Ensure, and a no-op still costs no request.
func TestDriftAfterVerifiedNoopsIsCorrected(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.String(), func(t *testing.T) {
			ns := env.Namespace(t)
			ctx := testCtx(t)
			h := newHarness(t, ns)
			owner := newOwner(t, ns, "app")
			e := h.ensurer(t, s, ensure.WithPrune(&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}))
			dep, svc, cm := children("nginx:1.27")
			if _, err := e.Ensure(ctx, owner, dep, svc, cm); err != nil {
				t.Fatal(err)
			}
			h.waitCached(t, inNS(ns, dep, svc, cm)...)
			noops := func(what string) {
				t.Helper()
				h.counter.Reset()
				for range 3 {
					cs, err := e.Ensure(ctx, owner, dep, svc, cm)
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					wantActions(t, cs, ensure.Unchanged, ensure.Unchanged, ensure.Unchanged)
				}
				if got := h.counter.Total(); got != 0 {
					t.Fatalf("%s: no-op reconciles sent %d requests, want 0:\n%s", what, got, h.counter)
				}
			}
			noops("after create")

			// Someone else edits an operator's label on the Deployment and a
			// value of the ConfigMap.
			depKey := client.ObjectKey{Namespace: ns, Name: "web"}
			cmKey := client.ObjectKey{Namespace: ns, Name: "web-config"}
			labelPatch := []byte(`{"metadata":{"labels":{"app":"hijacked"}}}`)
			if err := env.Client.Patch(ctx, &appsv1.Deployment{ObjectMeta: objMeta(depKey)}, client.RawPatch(types.MergePatchType, labelPatch)); err != nil {
				t.Fatal(err)
			}
			dataPatch := []byte(`{"data":{"mode":"debug"}}`)
			if err := env.Client.Patch(ctx, &corev1.ConfigMap{ObjectMeta: objMeta(cmKey)}, client.RawPatch(types.MergePatchType, dataPatch)); err != nil {
				t.Fatal(err)
			}
			h.waitCached(t, inNS(ns, dep, cm)...)
			cs, err := e.Ensure(ctx, owner, dep, svc, cm)
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Updated, ensure.Unchanged, ensure.Updated)
			var liveDep appsv1.Deployment
			if err := env.Client.Get(ctx, depKey, &liveDep); err != nil {
				t.Fatal(err)
			}
			if got := liveDep.Labels["app"]; got != "web" {
				t.Errorf("Deployment label app = %q, want it restored to web", got)
			}
			var liveCM corev1.ConfigMap
			if err := env.Client.Get(ctx, cmKey, &liveCM); err != nil {
				t.Fatal(err)
			}
			if got := liveCM.Data["mode"]; got != "prod" {
				t.Errorf("ConfigMap mode = %q, want it restored to prod", got)
			}
			h.waitCached(t, inNS(ns, dep, cm)...)
			noops("after correction")

			// The declaration changes while the child stays as verified.
			cm.Data["mode"] = "staging"
			cs, err = e.Ensure(ctx, owner, dep, svc, cm)
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Unchanged, ensure.Unchanged, ensure.Updated)
			h.waitCached(t, inNS(ns, cm)...)
			noops("after a declaration change")

			// Someone deletes the verified ConfigMap: it is created again.
			if err := env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: objMeta(cmKey)}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "cache sees the ConfigMap gone", func() (bool, error) {
				err := h.cache.Get(ctx, cmKey, &corev1.ConfigMap{})
				return client.IgnoreNotFound(err) == nil && err != nil, nil
			})
			cs, err = e.Ensure(ctx, owner, dep, svc, cm)
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Unchanged, ensure.Unchanged, ensure.Created)
			h.waitCached(t, inNS(ns, cm)...)
			noops("after re-create")
		})
	}
}

func objMeta(k client.ObjectKey) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}
}

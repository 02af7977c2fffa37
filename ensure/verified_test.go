package ensure_test

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
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

// A restarted operator's Ensurer remembers nothing it verified, and decides
// each child on the part of the cached object its declaration names. Edits
// made while no operator ran — a container's image (inside a list), a
// label (metadata), a ConfigMap value, a Service's selector —
// are each corrected by a fresh Ensurer's first Ensure, and an edit to a
// field nobody declared (a user's annotation, the replicas an HPA set) is
// left alone at no request; the next Ensure sends none. With either
// strategy, and over a cache with and without managedFields.
func TestFreshEnsurerCorrectsDriftMadeWhileDown(t *testing.T) {
	for _, s := range strategies {
		for _, stripped := range []bool{false, true} {
			name := s.String()
			if stripped {
				name += "/managedFieldsStripped"
			}
			t.Run(name, func(t *testing.T) { freshEnsurerCorrectsDrift(t, s, stripped) })
		}
	}
}

// freshEnsurerCorrectsDrift is TestFreshEnsurerCorrectsDriftMadeWhileDown
// with strategy s, over a cache that strips managedFields when stripped.
func freshEnsurerCorrectsDrift(t *testing.T, s ensure.Strategy, stripped bool) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	start := newHarness
	if stripped {
		start = newStrippingHarness
	}
	h := start(t, ns)
	owner := newOwner(t, ns, "app")
	opts := []ensure.Option{ensure.WithPrune(&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{})}
	dep, svc, cm := children("nginx:1.27")
	if _, err := h.ensurer(t, s, opts...).Ensure(ctx, owner, dep, svc, cm); err != nil {
		t.Fatal(err)
	}
	h.waitCached(t, inNS(ns, dep, svc, cm)...)

	// While down: foreign edits of fields nobody declared.
	depKey := client.ObjectKey{Namespace: ns, Name: "web"}
	annotate := []byte(`{"metadata":{"annotations":{"team.example.com/oncall":"alice"}}}`)
	if err := env.Client.Patch(ctx, &appsv1.Deployment{ObjectMeta: objMeta(depKey)}, client.RawPatch(types.MergePatchType, annotate)); err != nil {
		t.Fatal(err)
	}
	hpaScale(t, ns, 3)
	h.waitCached(t, inNS(ns, dep)...)
	wantFreeNoop(t, h, h.ensurer(t, s, opts...), owner, "a fresh Ensurer over undeclared edits", dep, svc, cm)

	// While down: edits of declared fields, one per child.
	var live appsv1.Deployment
	if err := env.Client.Get(ctx, depKey, &live); err != nil {
		t.Fatal(err)
	}
	live.Spec.Template.Spec.Containers[0].Image = "nginx:hacked"
	live.Labels["app"] = "hijacked"
	if err := env.Client.Update(ctx, &live, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	svcKey := client.ObjectKey{Namespace: ns, Name: svc.Name}
	selectorPatch := []byte(`{"spec":{"selector":{"app":"other"}}}`)
	if err := env.Client.Patch(ctx, &corev1.Service{ObjectMeta: objMeta(svcKey)}, client.RawPatch(types.MergePatchType, selectorPatch)); err != nil {
		t.Fatal(err)
	}
	cmKey := client.ObjectKey{Namespace: ns, Name: "web-config"}
	dataPatch := []byte(`{"data":{"mode":"debug"}}`)
	if err := env.Client.Patch(ctx, &corev1.ConfigMap{ObjectMeta: objMeta(cmKey)}, client.RawPatch(types.MergePatchType, dataPatch)); err != nil {
		t.Fatal(err)
	}
	h.waitCached(t, inNS(ns, dep, svc, cm)...)
	e := h.ensurer(t, s, opts...)
	cs, err := e.Ensure(ctx, owner, dep, svc, cm)
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, ensure.Updated, ensure.Updated, ensure.Updated)
	if err := env.Client.Get(ctx, depKey, &live); err != nil {
		t.Fatal(err)
	}
	if img, app := live.Spec.Template.Spec.Containers[0].Image, live.Labels["app"]; img != "nginx:1.27" || app != "web" {
		t.Errorf("Deployment image %q, label app %q; want nginx:1.27, web", img, app)
	}
	if live.Annotations["team.example.com/oncall"] != "alice" || ptr.Deref(live.Spec.Replicas, 0) != 3 {
		t.Errorf("undeclared fields lost: annotations %v, replicas %v", live.Annotations, live.Spec.Replicas)
	}
	var liveSvc corev1.Service
	if err := env.Client.Get(ctx, svcKey, &liveSvc); err != nil {
		t.Fatal(err)
	}
	if got := liveSvc.Spec.Selector["app"]; got != "web" {
		t.Errorf("Service selector app = %q, want web back", got)
	}
	var liveCM corev1.ConfigMap
	if err := env.Client.Get(ctx, cmKey, &liveCM); err != nil {
		t.Fatal(err)
	}
	if got := liveCM.Data["mode"]; got != "prod" {
		t.Errorf("ConfigMap mode = %q, want prod", got)
	}
	h.waitCached(t, inNS(ns, dep, svc, cm)...)
	wantFreeNoop(t, h, e, owner, "the Ensure after the correction", dep, svc, cm)
}

// wantFreeNoop runs e.Ensure of children for owner once and fails t unless
// every child is Unchanged and no request was sent; what names the step.
func wantFreeNoop(t *testing.T, h *harness, e *ensure.Ensurer, owner client.Object, what string, children ...client.Object) {
	t.Helper()
	h.counter.Reset()
	cs, err := e.Ensure(testCtx(t), owner, children...)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for i, ch := range cs {
		if ch.Action != ensure.Unchanged {
			t.Fatalf("%s: change %d is %v, want Unchanged (all: %v)", what, i, ch, cs)
		}
	}
	if len(cs) != len(children) {
		t.Fatalf("%s: changes %v, want %d Unchanged", what, cs, len(children))
	}
	if got := h.counter.Total(); got != 0 {
		t.Fatalf("%s sent %d requests, want 0:\n%s", what, got, h.counter)
	}
}

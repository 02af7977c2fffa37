package ensure_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/ensure"
)

func wantActions(t *testing.T, cs ensure.ChangeSet, want ...ensure.Action) {
	t.Helper()
	if len(cs) != len(want) {
		t.Fatalf("changes %v, want actions %v", cs, want)
	}
	for i, a := range want {
		if cs[i].Action != a {
			t.Fatalf("change %d is %v, want %s (all: %v)", i, cs[i], a, cs)
		}
	}
}

func TestNoopReconcileMakesZeroRequests(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.String(), func(t *testing.T) {
			ns := env.Namespace(t)
			ctx := testCtx(t)
			h := newHarness(t, ns)
			owner := newOwner(t, ns, "app")
			e := h.ensurer(t, s, ensure.WithPrune(&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}))
			dep, svc, cm := children("nginx:1.27")

			cs, err := e.Ensure(ctx, owner, dep, svc, cm)
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Created, ensure.Created, ensure.Created)
			if got := h.counter.Writes(); got != 3 {
				t.Errorf("first reconcile: %d writes, want 3:\n%s", got, h.counter)
			}
			created := inNS(ns, dep, svc, cm)
			h.waitCached(t, created...)

			// The API server defaulted fields the declaration leaves out; a
			// DeepEqual-based CreateOrUpdate would write every reconcile.
			var live appsv1.Deployment
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(created[0]), &live); err != nil {
				t.Fatal(err)
			}
			c := live.Spec.Template.Spec.Containers[0]
			if live.Spec.RevisionHistoryLimit == nil || live.Spec.ProgressDeadlineSeconds == nil || live.Spec.Strategy.Type == "" ||
				c.TerminationMessagePath == "" || c.ImagePullPolicy == "" {
				t.Fatalf("expected server defaults on the Deployment, got %+v", live.Spec)
			}
			var liveSvc corev1.Service
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(created[1]), &liveSvc); err != nil {
				t.Fatal(err)
			}
			if liveSvc.Spec.ClusterIP == "" || liveSvc.Spec.SessionAffinity == "" || len(liveSvc.Spec.IPFamilies) == 0 {
				t.Fatalf("expected server defaults on the Service, got %+v", liveSvc.Spec)
			}

			h.counter.Reset()
			cs, err = e.Ensure(ctx, owner, dep, svc, cm)
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Unchanged, ensure.Unchanged, ensure.Unchanged)
			if got := h.counter.Total(); got != 0 {
				t.Fatalf("no-op reconcile sent %d requests, want 0:\n%s", got, h.counter)
			}
			if cs.Changed() {
				t.Errorf("Changed() = true for %v", cs)
			}
		})
	}
}

// hpaScale simulates a HorizontalPodAutoscaler: another field manager that
// owns spec.replicas.
func hpaScale(t *testing.T, ns string, replicas int64) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": ns},
		"spec":     map[string]any{"replicas": replicas},
	}}
	if err := env.Client.Apply(testCtx(t), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("hpa-controller"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
}

func TestForeignFieldsSurviveAndOwnDriftIsCorrected(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.String(), func(t *testing.T) {
			ns := env.Namespace(t)
			ctx := testCtx(t)
			h := newHarness(t, ns)
			owner := newOwner(t, ns, "app")
			e := h.ensurer(t, s)
			dep, svc, cm := children("nginx:1.27")
			if _, err := e.Ensure(ctx, owner, dep, svc, cm); err != nil {
				t.Fatal(err)
			}
			key := client.ObjectKey{Namespace: ns, Name: "web"}

			// A user annotates the Deployment; an HPA scales it.
			var live appsv1.Deployment
			if err := env.Client.Get(ctx, key, &live); err != nil {
				t.Fatal(err)
			}
			patch := []byte(`{"metadata":{"annotations":{"team.example.com/oncall":"alice"},"labels":{"user-label":"x"}}}`)
			if err := env.Client.Patch(ctx, &live, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("kubectl-annotate")); err != nil {
				t.Fatal(err)
			}
			hpaScale(t, ns, 5)
			h.waitCached(t, inNS(ns, dep, svc, cm)...)

			h.counter.Reset()
			for i := range 100 {
				cs, err := e.Ensure(ctx, owner, dep, svc, cm)
				if err != nil {
					t.Fatalf("reconcile %d: %v", i, err)
				}
				if cs.Changed() {
					t.Fatalf("reconcile %d changed something: %v", i, cs)
				}
			}
			if got := h.counter.Total(); got != 0 {
				t.Fatalf("100 reconciles sent %d requests, want 0:\n%s", got, h.counter)
			}
			checkForeign := func() {
				t.Helper()
				if err := env.Client.Get(ctx, key, &live); err != nil {
					t.Fatal(err)
				}
				if got := ptr.Deref(live.Spec.Replicas, 0); got != 5 {
					t.Errorf("replicas = %d, want the HPA's 5", got)
				}
				if live.Annotations["team.example.com/oncall"] != "alice" || live.Labels["user-label"] != "x" {
					t.Errorf("user metadata lost: labels %v annotations %v", live.Labels, live.Annotations)
				}
			}
			checkForeign()

			// Someone edits the image: the operator's field drifted.
			live.Spec.Template.Spec.Containers[0].Image = "nginx:hacked"
			if err := env.Client.Update(ctx, &live, client.FieldOwner("kubectl-edit")); err != nil {
				t.Fatal(err)
			}
			h.waitCached(t, &live)
			cs, err := e.Ensure(ctx, owner, dep, svc, cm)
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Updated, ensure.Unchanged, ensure.Unchanged)
			checkForeign()
			if img := live.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.27" {
				t.Fatalf("image = %q, want it restored to nginx:1.27", img)
			}
			h.waitCached(t, &live)
			h.counter.Reset()
			if cs, err := e.Ensure(ctx, owner, dep, svc, cm); err != nil || cs.Changed() {
				t.Fatalf("after correction: %v, %v", cs, err)
			}
			if got := h.counter.Total(); got != 0 {
				t.Fatalf("reconcile after correction sent %d requests:\n%s", got, h.counter)
			}
		})
	}
}

func TestServerSideApplyRemovesFieldsNoLongerDeclared(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	h := newHarness(t, ns)
	owner := newOwner(t, ns, "app")
	e := h.ensurer(t, ensure.ServerSideApply)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Labels: map[string]string{"tier": "web"}}, Data: map[string]string{"a": "1", "b": "2"}}
	if _, err := e.Ensure(ctx, owner, cm); err != nil {
		t.Fatal(err)
	}
	h.waitCached(t, inNS(ns, cm)...)
	cm.Data = map[string]string{"a": "1"}
	cm.Labels = nil
	cs, err := e.Ensure(ctx, owner, cm)
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, ensure.Updated)
	var live corev1.ConfigMap
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cfg"}, &live); err != nil {
		t.Fatal(err)
	}
	if _, ok := live.Data["b"]; ok || live.Labels["tier"] != "" {
		t.Fatalf("dropped fields survived: data %v labels %v", live.Data, live.Labels)
	}
	h.waitCached(t, &live)
	h.counter.Reset()
	if cs, err := e.Ensure(ctx, owner, cm); err != nil || cs.Changed() || h.counter.Total() != 0 {
		t.Fatalf("after removal: %v, %v, requests:\n%s", cs, err, h.counter)
	}
}

func TestPruneDeletesOnlyDroppedOwnChildren(t *testing.T) {
	kinds := []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}}
	for _, s := range strategies {
		for _, lookup := range []string{"label", "index", "store"} {
			t.Run(s.String()+"/"+lookup, func(t *testing.T) { testPrune(t, s, lookup, kinds) })
		}
	}
}

// testPrune: prune finds the dropped child by its owner label ("label"),
// through ensure.OwnerIndex as a field index of a cache of one namespace
// (a List, "index"), or as an index of the informers' stores of a cache of
// all namespaces, read without a List ("store").
func testPrune(t *testing.T, s ensure.Strategy, lookup string, kinds []client.Object) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	opts := []ensure.Option{ensure.WithPrune(kinds...)}
	h := newHarness(t, ns)
	switch lookup {
	case "index":
		h = newIndexedHarness(t, kinds, ns)
		opts = append(opts, ensure.WithOwnerIndex())
	case "store":
		h = newIndexedHarness(t, kinds)
		opts = append(opts, ensure.WithOwnerIndex(), ensure.WithInformers(h.cache))
	}
	owner := newOwner(t, ns, "app")
	other := newOwner(t, ns, "other-app")
	e := h.ensurer(t, s, opts...)
	dep, svc, cm := children("nginx:1.27")
	if _, err := e.Ensure(ctx, owner, dep, svc, cm); err != nil {
		t.Fatal(err)
	}
	// Another owner's child, same Ensurer: must survive owner's prune.
	otherCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other-config"}, Data: map[string]string{"x": "y"}}
	if _, err := e.Ensure(ctx, other, otherCM); err != nil {
		t.Fatal(err)
	}
	// An unrelated ConfigMap in the same namespace.
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"}}); err != nil {
		t.Fatal(err)
	}
	h.waitCached(t, inNS(ns, dep, svc, cm, otherCM)...)

	cs, err := e.Ensure(ctx, owner, dep, svc) // the ConfigMap is no longer desired
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, ensure.Unchanged, ensure.Unchanged, ensure.Deleted)
	if cs[2].Name != "web-config" || cs[2].GVK.Kind != "ConfigMap" {
		t.Fatalf("pruned %v, want ConfigMap web-config", cs[2])
	}
	err = env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-config"}, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("pruned ConfigMap still exists (err %v)", err)
	}
	for _, name := range []string{"other-config", "unrelated", "app", "other-app"} {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{}); err != nil {
			t.Errorf("ConfigMap %s: %v", name, err)
		}
	}
	// While the cache still lists the deleted object, no second delete.
	h.counter.Reset()
	if cs, err := e.Ensure(ctx, owner, dep, svc); err != nil || cs.Changed() {
		t.Fatalf("second prune pass: %v, %v", cs, err)
	}
	if w := h.counter.Writes(); w != 0 {
		t.Fatalf("second prune pass wrote %d:\n%s", w, h.counter)
	}
}

func TestAdoptionPolicy(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.String(), func(t *testing.T) {
			ns := env.Namespace(t)
			ctx := testCtx(t)
			h := newHarness(t, ns)
			owner := newOwner(t, ns, "app")
			rival := newOwner(t, ns, "rival")
			foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared", OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "ConfigMap", Name: rival.Name, UID: rival.UID, Controller: ptr.To(true),
			}}}}
			orphan := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "handmade"}, Data: map[string]string{"k": "v"}}
			for _, o := range []client.Object{foreign, orphan} {
				if err := env.Client.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			h.waitCached(t, foreign, orphan)
			want := func(name string) *corev1.ConfigMap {
				return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "mine"}}
			}

			never := h.ensurer(t, s)
			_, err := never.Ensure(ctx, owner, want("shared"))
			if !errors.Is(err, ensure.ErrNotOwned) || errors.Is(err, reconcile.TerminalError(nil)) {
				t.Fatalf("foreign object: want a re-checked (not terminal) ErrNotOwned, got %v", err)
			}
			if !strings.Contains(err.Error(), "ConfigMap "+ns+"/rival") {
				t.Errorf("error does not name the current owner: %v", err)
			}
			if _, err := never.Ensure(ctx, owner, want("handmade")); !errors.Is(err, ensure.ErrNotOwned) {
				t.Fatalf("orphan with AdoptNever: want ErrNotOwned, got %v", err)
			}

			orphans := h.ensurer(t, s, ensure.WithAdoption(ensure.AdoptOrphans))
			if _, err := orphans.Ensure(ctx, owner, want("shared")); !errors.Is(err, ensure.ErrNotOwned) {
				t.Fatalf("foreign object with AdoptOrphans: want ErrNotOwned, got %v", err)
			}
			cs, err := orphans.Ensure(ctx, owner, want("handmade"))
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Updated)
			checkController(t, ns, "handmade", owner.UID, "mine")

			anyPolicy := h.ensurer(t, s, ensure.WithAdoption(ensure.AdoptAny))
			cs, err = anyPolicy.Ensure(ctx, owner, want("shared"))
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Updated)
			checkController(t, ns, "shared", owner.UID, "mine")
		})
	}
}

func checkController(t *testing.T, ns, name string, uid types.UID, data string) {
	t.Helper()
	var live corev1.ConfigMap
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: name}, &live); err != nil {
		t.Fatal(err)
	}
	ref := metav1.GetControllerOf(&live)
	if ref == nil || ref.UID != uid || len(live.OwnerReferences) != 1 {
		t.Errorf("%s: ownerReferences %+v, want only a controller reference to %s", name, live.OwnerReferences, uid)
	}
	if live.Labels[ensure.LabelOwnerUID] != string(uid) || live.Data["k"] != data {
		t.Errorf("%s: labels %v data %v", name, live.Labels, live.Data)
	}
}

func TestUnstructuredDeclarations(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.String(), func(t *testing.T) {
			ns := env.Namespace(t)
			ctx := testCtx(t)
			h := newHarness(t, ns)
			owner := newOwner(t, ns, "app")
			e := h.ensurer(t, s, ensure.WithPrune(&corev1.Service{}))
			svc := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Service",
				"metadata": map[string]any{"name": "raw"},
				"spec": map[string]any{
					"selector": map[string]any{"app": "raw"},
					"ports":    []any{map[string]any{"name": "http", "port": 80, "targetPort": 8080}},
				},
			}}
			cs, err := e.Ensure(ctx, owner, svc)
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Created)
			h.waitCached(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "raw"}})
			cached := &unstructured.Unstructured{}
			cached.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Service"))
			eventually(t, 30*time.Second, "unstructured informer synced", func() (bool, error) {
				err := h.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "raw"}, cached)
				return err == nil, err
			})
			h.counter.Reset()
			cs, err = e.Ensure(ctx, owner, svc)
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Unchanged)
			if got := h.counter.Total(); got != 0 {
				t.Fatalf("no-op sent %d requests:\n%s", got, h.counter)
			}
			svc.Object["spec"].(map[string]any)["ports"] = []any{map[string]any{"name": "http", "port": 81, "targetPort": 8080}}
			cs, err = e.Ensure(ctx, owner, svc)
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Updated)
			var live corev1.Service
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "raw"}, &live); err != nil {
				t.Fatal(err)
			}
			if len(live.Spec.Ports) != 1 || live.Spec.Ports[0].Port != 81 {
				t.Fatalf("ports = %+v, want only 81", live.Spec.Ports)
			}
		})
	}
}

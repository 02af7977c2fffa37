package ensure_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/ensure"
)

// A ConfigMap first managed client-side (controllerutil.CreateOrUpdate under
// manager "legacy-operator") and then with server-side apply: the field the
// declaration drops is removed only when the legacy ownership is migrated.
func TestMigrateClientSideToServerSideApply(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	h := newHarness(t, ns)
	owner := newOwner(t, ns, "app")
	legacy := client.WithFieldOwner(env.Client, "legacy-operator")
	for _, name := range []string{"migrated", "not-migrated"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if _, err := controllerutil.CreateOrUpdate(ctx, legacy, cm, func() error {
			cm.Data = map[string]string{"keep": "1", "old": "2"}
			return controllerutil.SetControllerReference(owner, cm, env.Scheme)
		}); err != nil {
			t.Fatal(err)
		}
		h.waitCached(t, cm)
	}
	want := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"keep": "1"}}
	}
	get := func(name string) *corev1.ConfigMap {
		var cm corev1.ConfigMap
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
			t.Fatal(err)
		}
		return &cm
	}

	// Control: without migration the legacy manager keeps owning "old".
	plain := h.ensurer(t, ensure.ServerSideApply)
	if _, err := plain.Ensure(ctx, owner, want("not-migrated")); err != nil {
		t.Fatal(err)
	}
	if get("not-migrated").Data["old"] != "2" {
		t.Fatal("control case: expected the legacy field to survive an apply without migration (Kubernetes #99003)")
	}

	e := h.ensurer(t, ensure.ServerSideApply, ensure.WithMigrateFrom("legacy-operator"))
	cs, err := e.Ensure(ctx, owner, want("migrated"))
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, ensure.Updated)
	live := get("migrated")
	if _, ok := live.Data["old"]; ok || live.Data["keep"] != "1" {
		t.Fatalf("after migration data = %v, want only keep=1", live.Data)
	}
	for _, m := range live.ManagedFields {
		if m.Manager == "legacy-operator" {
			t.Errorf("legacy manager entry survived: %+v", m)
		}
	}
	h.waitCached(t, live)
	h.counter.Reset()
	if cs, err := e.Ensure(ctx, owner, want("migrated")); err != nil || cs.Changed() || h.counter.Total() != 0 {
		t.Fatalf("after migration: %v, %v, requests:\n%s", cs, err, h.counter)
	}
}

// frozenReader is a cache that never sees anything: the worst stale cache.
type frozenReader struct{}

func (frozenReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "any"}, key.Name)
}

func (frozenReader) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func TestStaleCacheNeverDuplicatesOrLoops(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.String(), func(t *testing.T) {
			ns := env.Namespace(t)
			ctx := testCtx(t)
			h := newHarness(t, ns)
			stale, err := client.New(h.cfg, client.Options{Scheme: env.Scheme, Cache: &client.CacheOptions{Reader: frozenReader{}}})
			if err != nil {
				t.Fatal(err)
			}
			owner := newOwner(t, ns, "app")
			newEnsurer := func() *ensure.Ensurer {
				e, err := ensure.New(stale, "webapp-operator", ensure.WithStrategy(s), ensure.WithAPIReader(h.direct))
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			dep, svc, cm := children("nginx:1.27")
			first := newEnsurer()
			cs, err := first.Ensure(ctx, owner, dep, svc, cm)
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Created, ensure.Created, ensure.Created)
			var before corev1.ConfigMap
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-config"}, &before); err != nil {
				t.Fatal(err)
			}

			// Same Ensurer, cache still blind: it remembers its own creates.
			h.counter.Reset()
			cs, err = first.Ensure(ctx, owner, dep, svc, cm)
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Unchanged, ensure.Unchanged, ensure.Unchanged)
			if got := h.counter.Total(); got != 0 {
				t.Fatalf("reconcile right after create sent %d requests:\n%s", got, h.counter)
			}

			// A new Ensurer (a restarted or another worker's) has no memory:
			// the create meets AlreadyExists (or the apply path reads first),
			// one uncached read follows, and the object counts as existing.
			second := newEnsurer()
			for i := range 3 {
				h.counter.Reset()
				cs, err = second.Ensure(ctx, owner, dep, svc, cm)
				if err != nil {
					t.Fatalf("pass %d: %v", i, err)
				}
				wantActions(t, cs, ensure.Unchanged, ensure.Unchanged, ensure.Unchanged)
				if i > 0 && h.counter.Total() != 0 {
					t.Fatalf("pass %d sent requests:\n%s", i, h.counter)
				}
			}
			var after corev1.ConfigMap
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-config"}, &after); err != nil {
				t.Fatal(err)
			}
			if after.UID != before.UID || after.ResourceVersion != before.ResourceVersion {
				t.Fatalf("ConfigMap replaced or rewritten: uid %s→%s rv %s→%s", before.UID, after.UID, before.ResourceVersion, after.ResourceVersion)
			}
		})
	}
}

func TestImmutableFieldChange(t *testing.T) {
	for i, s := range strategies {
		t.Run(s.String(), func(t *testing.T) {
			ns := env.Namespace(t)
			ctx := testCtx(t)
			h := newHarness(t, ns)
			owner := newOwner(t, ns, "app")
			// Namespaces are never emptied here (no namespace controller), so
			// each subtest needs its own cluster IPs. They come from the
			// service range's static band (10.0.0.0/24's lowest 16 addresses,
			// 10.0.0.1 being the kubernetes Service): the API server allocates
			// Services without a clusterIP from the upper band first, so an IP
			// chosen there could already belong to another test's Service.
			// The Service is deleted at the end, so a repeated run
			// (-count) finds its IPs free again.
			ip1, ip2 := fmt.Sprintf("10.0.0.%d", 10+2*i), fmt.Sprintf("10.0.0.%d", 11+2*i)
			t.Cleanup(func() {
				db := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}}
				if err := env.Client.Delete(context.Background(), db); client.IgnoreNotFound(err) != nil {
					t.Errorf("delete Service %s/db: %v", ns, err)
				}
			})
			svc := func(ip string) *corev1.Service {
				return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: corev1.ServiceSpec{
					ClusterIP: ip, Ports: []corev1.ServicePort{{Name: "pg", Port: 5432}},
				}}
			}
			e := h.ensurer(t, s)
			if _, err := e.Ensure(ctx, owner, svc(ip1)); err != nil {
				t.Fatal(err)
			}
			h.waitCached(t, inNS(ns, svc(""))...)
			_, err := e.Ensure(ctx, owner, svc(ip2))
			if !errors.Is(err, ensure.ErrImmutable) || !errors.Is(err, reconcile.TerminalError(nil)) {
				t.Fatalf("clusterIP change: want terminal ErrImmutable, got %v", err)
			}
			if !strings.Contains(err.Error(), ns+"/db") {
				t.Errorf("error does not name the object: %v", err)
			}

			dep, _, _ := children("nginx:1.27")
			if _, err := e.Ensure(ctx, owner, dep); err != nil {
				t.Fatal(err)
			}
			h.waitCached(t, inNS(ns, dep)...)
			dep2 := dep.DeepCopy()
			dep2.Spec.Selector.MatchLabels = map[string]string{"app": "web", "v": "2"}
			dep2.Spec.Template.Labels = map[string]string{"app": "web", "v": "2"}
			if _, err := e.Ensure(ctx, owner, dep2); !errors.Is(err, ensure.ErrImmutable) {
				t.Fatalf("selector change: want ErrImmutable, got %v", err)
			}

			var old corev1.Service
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &old); err != nil {
				t.Fatal(err)
			}
			r := h.ensurer(t, s, ensure.WithRecreateOnImmutable())
			cs, err := r.Ensure(ctx, owner, svc(ip2))
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Recreated)
			var now corev1.Service
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &now); err != nil {
				t.Fatal(err)
			}
			if now.UID == old.UID || now.Spec.ClusterIP != ip2 {
				t.Fatalf("after recreate uid %s (old %s) clusterIP %s", now.UID, old.UID, now.Spec.ClusterIP)
			}
		})
	}
}

func TestInvalidDeclarationsAreTerminal(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	h := newHarness(t, ns)
	owner := newOwner(t, ns, "app")
	e := h.ensurer(t, ensure.MergePatch)
	coreOnly := runtime.NewScheme()
	if err := corev1.AddToScheme(coreOnly); err != nil {
		t.Fatal(err)
	}
	small, err := client.New(env.Config, client.Options{Scheme: coreOnly})
	if err != nil {
		t.Fatal(err)
	}
	smallE, err := ensure.New(small, "webapp-operator")
	if err != nil {
		t.Fatal(err)
	}
	cm := func(ns, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	cases := []struct {
		name    string
		e       *ensure.Ensurer
		desired []client.Object
		want    string
	}{
		{"no name", e, objs(cm("", "")), "no name"},
		{"generateName", e, objs(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "x-"}}), "generateName"},
		{"other namespace", e, objs(cm("default", "x")), "cross-namespace"},
		{"duplicate", e, objs(cm("", "x"), cm(ns, "x")), "declared twice"},
		{"cluster-scoped with namespace", e, objs(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}}), "cluster-scoped"},
		{"kind not in scheme", smallE, objs(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x"}}), "not known to the scheme"},
		{"rejected by the API server", e, objs(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "noports"}}), "spec.ports"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.e.Ensure(ctx, owner, c.desired...)
			if !errors.Is(err, ensure.ErrInvalid) || !errors.Is(err, reconcile.TerminalError(nil)) {
				t.Fatalf("want terminal ErrInvalid, got %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

func TestCrossNamespaceAndClusterScopedChildrenUseLabelLink(t *testing.T) {
	ns := env.Namespace(t)
	other := env.Namespace(t)
	ctx := testCtx(t)
	h := newHarness(t) // all namespaces
	owner := newOwner(t, ns, "app")
	e := h.ensurer(t, ensure.ServerSideApply, ensure.WithCrossNamespace(),
		ensure.WithPrune(&corev1.ConfigMap{}, &rbacv1.ClusterRole{}))
	remote := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "remote"}, Data: map[string]string{"a": "b"}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "ensure-test-" + ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"},
	}}}
	t.Cleanup(func() { _ = env.Client.Delete(testCtx(t), role.DeepCopy()) })
	cs, err := e.Ensure(ctx, owner, remote, role)
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, ensure.Created, ensure.Created)
	for _, o := range []client.Object{remote.DeepCopy(), role.DeepCopy()} {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		if len(o.GetOwnerReferences()) != 0 || o.GetLabels()[ensure.LabelOwnerUID] != string(owner.UID) ||
			o.GetAnnotations()[ensure.AnnotationOwner] != "ConfigMap "+ns+"/app" {
			t.Errorf("%s: want a label/annotation owner link and no ownerReference, got refs %v labels %v annotations %v",
				o.GetName(), o.GetOwnerReferences(), o.GetLabels(), o.GetAnnotations())
		}
	}
	h.waitCached(t, remote, role)
	h.counter.Reset()
	if cs, err := e.Ensure(ctx, owner, remote, role); err != nil || cs.Changed() || h.counter.Total() != 0 {
		t.Fatalf("no-op: %v, %v, requests:\n%s", cs, err, h.counter)
	}
	// Another owner may not take them: the label link is an owner link.
	rival := newOwner(t, ns, "rival")
	if _, err := e.Ensure(ctx, rival, remote); !errors.Is(err, ensure.ErrNotOwned) || !strings.Contains(err.Error(), "ConfigMap "+ns+"/app") {
		t.Fatalf("rival: want ErrNotOwned naming the owner, got %v", err)
	}
	cs, err = e.Ensure(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, ensure.Deleted, ensure.Deleted)
}

// CreateOrPatch with a mutate function written the usual way — the whole
// desired spec assigned — writes once and then never again, and leaves the
// HPA's replicas alone, where controllerutil.CreateOrUpdate writes every time.
func TestCreateOrPatchWholesaleMutate(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	h := newHarness(t, ns)
	owner := newOwner(t, ns, "app")
	e := h.ensurer(t, ensure.MergePatch)
	desired, _, _ := children("nginx:1.27")
	reconcileOnce := func() ensure.Change {
		t.Helper()
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
		ch, err := e.CreateOrPatch(ctx, owner, dep, func() error {
			dep.Labels = desired.Labels
			dep.Spec = *desired.Spec.DeepCopy()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if dep.UID == "" || dep.Spec.RevisionHistoryLimit == nil {
			t.Fatalf("obj does not hold the live object afterwards: %+v", dep.ObjectMeta)
		}
		return ch
	}
	if ch := reconcileOnce(); ch.Action != ensure.Created {
		t.Fatalf("first: %v", ch)
	}
	h.waitCached(t, inNS(ns, desired)...)
	hpaScale(t, ns, 4)
	h.waitCached(t, inNS(ns, desired)...)
	h.counter.Reset()
	for range 20 {
		if ch := reconcileOnce(); ch.Action != ensure.Unchanged {
			t.Fatalf("steady state: %v", ch)
		}
	}
	if got := h.counter.Total(); got != 0 {
		t.Fatalf("20 no-op CreateOrPatch calls sent %d requests:\n%s", got, h.counter)
	}
	var live appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &live); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(live.Spec.Replicas, 0) != 4 {
		t.Fatalf("replicas = %v, want the HPA's 4", live.Spec.Replicas)
	}

	// Baseline: the same mutate through controllerutil.CreateOrUpdate.
	h.counter.Reset()
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	res, err := controllerutil.CreateOrUpdate(ctx, h.client, dep, func() error {
		dep.Spec = *desired.Spec.DeepCopy()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("controllerutil.CreateOrUpdate on the same no-op: %s, %d writes, replicas now %d", res, h.counter.Writes(), ptr.Deref(dep.Spec.Replicas, 0))
	if res != controllerutil.OperationResultUpdated {
		t.Errorf("baseline expectation changed: CreateOrUpdate reported %s", res)
	}
}

// TestOwnerAnnotationOnlyWhereNoOwnerReference: children in the owner's
// namespace are linked by a controller ownerReference and carry no
// AnnotationOwner (their annotations then hold only the record, equal
// between siblings of different owners); a child an earlier ensure gave the
// annotation keeps it, and a reconcile of it stays free.
func TestOwnerAnnotationOnlyWhereNoOwnerReference(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.String(), func(t *testing.T) {
			ns := env.Namespace(t)
			ctx := testCtx(t)
			h := newHarness(t, ns)
			e := h.ensurer(t, s)
			records := map[string]string{}
			for _, name := range []string{"a", "b"} {
				owner := newOwner(t, ns, name)
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-config"}, Data: map[string]string{"k": name}}
				if _, err := e.Ensure(ctx, owner, cm); err != nil {
					t.Fatal(err)
				}
				live := &corev1.ConfigMap{}
				if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cm.Name}, live); err != nil {
					t.Fatal(err)
				}
				refs := live.GetOwnerReferences()
				if len(refs) != 1 || refs[0].UID != owner.UID || refs[0].Controller == nil || !*refs[0].Controller {
					t.Fatalf("%s: want a controller ownerReference to %s, got %v", cm.Name, owner.UID, refs)
				}
				if _, ok := live.Annotations[ensure.AnnotationOwner]; ok || len(live.Annotations) != 1 || live.Annotations[ensure.AnnotationDeclared] == "" {
					t.Fatalf("%s: want the record as the only annotation, got %v", cm.Name, live.Annotations)
				}
				records[name] = live.Annotations[ensure.AnnotationDeclared]
			}
			if records["a"] != records["b"] {
				t.Errorf("the siblings' records differ: %q, %q", records["a"], records["b"])
			}

			// A child written by an earlier ensure, which annotated every
			// child with its owner.
			owner := newOwner(t, ns, "c")
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c-config"}, Data: map[string]string{"k": "c"}}
			if _, err := e.Ensure(ctx, owner, cm); err != nil {
				t.Fatal(err)
			}
			key := client.ObjectKey{Namespace: ns, Name: cm.Name}
			old := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, key, old); err != nil {
				t.Fatal(err)
			}
			old.Annotations[ensure.AnnotationOwner] = "ConfigMap " + ns + "/c"
			if err := env.Client.Update(ctx, old); err != nil {
				t.Fatal(err)
			}
			h.waitCached(t, old)
			h.counter.Reset()
			cs, err := e.Ensure(ctx, owner, cm)
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Unchanged)
			if got := h.counter.Total(); got != 0 {
				t.Fatalf("reconcile of an annotated child sent %d requests:\n%s", got, h.counter)
			}
			after := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, key, after); err != nil {
				t.Fatal(err)
			}
			if after.Annotations[ensure.AnnotationOwner] != "ConfigMap "+ns+"/c" || after.ResourceVersion != old.ResourceVersion {
				t.Fatalf("the earlier annotation was touched: %v (rv %s → %s)", after.Annotations, old.ResourceVersion, after.ResourceVersion)
			}
		})
	}
}

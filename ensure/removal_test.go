package ensure_test

import (
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/outcome"
)

// app declares a ConfigMap and a Deployment the way an operator does; the
// optional extras are what a later version of the spec no longer asks for.
func app(extras bool) (*appsv1.Deployment, *corev1.ConfigMap) {
	labels := map[string]string{"app": "web"}
	env := []corev1.EnvVar{{Name: "MODE", Value: "prod"}}
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	containers := []corev1.Container{{Name: "web", Image: "nginx:1.27"}}
	data := map[string]string{"index.html": "hi"}
	if extras {
		env = append(env, corev1.EnvVar{Name: "DEBUG", Value: "1"})
		ports = append(ports, corev1.ContainerPort{Name: "metrics", ContainerPort: 9090})
		containers = append(containers, corev1.Container{Name: "sidecar", Image: "envoy:1"})
		data["extra.txt"] = "more"
	}
	containers[0].Env, containers[0].Ports = env, ports
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: containers}},
		},
	}
	return dep, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config"}, Data: data}
}

// asUnstructured turns a typed declaration into the unstructured one an
// operator working with unstructured objects would write.
func asUnstructured(t *testing.T, o client.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	gvk, err := apiutil.GVKForObject(o, env.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	u.SetGroupVersionKind(gvk)
	return u
}

// waitCachedAs waits until the client's cache (the typed or the unstructured
// one, as o is) holds o at the API server's resourceVersion.
func (h *harness) waitCachedAs(t *testing.T, o client.Object) {
	t.Helper()
	ctx := testCtx(t)
	key := client.ObjectKey{Namespace: h.ns, Name: o.GetName()}
	eventually(t, 30*time.Second, "cache has "+key.String(), func() (bool, error) {
		live := o.DeepCopyObject().(client.Object)
		if err := env.Client.Get(ctx, key, live); err != nil {
			return false, err
		}
		cached := o.DeepCopyObject().(client.Object)
		if err := h.client.Get(ctx, key, cached); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return cached.GetResourceVersion() == live.GetResourceVersion(), nil
	})
}

// What the operator stops declaring is removed, with both strategies and
// typed or unstructured declarations; what others set stays; the steady
// state after the removal costs no request.
func TestUndeclaredFieldsAreRemoved(t *testing.T) {
	for _, s := range strategies {
		for _, form := range []string{"typed", "unstructured"} {
			t.Run(s.String()+"/"+form, func(t *testing.T) {
				ns := env.Namespace(t)
				ctx := testCtx(t)
				h := newHarness(t, ns)
				owner := newOwner(t, ns, "app")
				e := h.ensurer(t, s)
				declare := func(extras bool) []client.Object {
					dep, cm := app(extras)
					if form == "typed" {
						return objs(dep, cm)
					}
					return objs(asUnstructured(t, dep), asUnstructured(t, cm))
				}
				cs, err := e.Ensure(ctx, owner, declare(true)...)
				if err != nil {
					t.Fatal(err)
				}
				wantActions(t, cs, ensure.Created, ensure.Created)
				key := client.ObjectKey{Namespace: ns, Name: "web"}

				// Others' fields: a user label, an HPA's replicas, an env var
				// another controller injected into the operator's container.
				var live appsv1.Deployment
				if err := env.Client.Get(ctx, key, &live); err != nil {
					t.Fatal(err)
				}
				if err := env.Client.Patch(ctx, &live, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"user-label":"x"}}}`)),
					client.FieldOwner("kubectl-label")); err != nil {
					t.Fatal(err)
				}
				inject := `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"INJECTED","value":"y"}]}]}}}}`
				if err := env.Client.Patch(ctx, &live, client.RawPatch(types.StrategicMergePatchType, []byte(inject)), client.FieldOwner("injector")); err != nil {
					t.Fatal(err)
				}
				hpaScale(t, ns, 3)
				for _, o := range declare(false) {
					h.waitCachedAs(t, o)
				}

				cs, err = e.Ensure(ctx, owner, declare(false)...)
				if err != nil {
					t.Fatal(err)
				}
				wantActions(t, cs, ensure.Updated, ensure.Updated)

				if err := env.Client.Get(ctx, key, &live); err != nil {
					t.Fatal(err)
				}
				cs0 := live.Spec.Template.Spec.Containers
				if len(cs0) != 1 || cs0[0].Name != "web" {
					t.Fatalf("containers %v, want only web (the sidecar removed)", names(cs0))
				}
				var envNames []string
				for _, v := range cs0[0].Env {
					envNames = append(envNames, v.Name)
				}
				sort.Strings(envNames)
				if strings.Join(envNames, ",") != "INJECTED,MODE" {
					t.Errorf("env %v, want MODE and the injected INJECTED (DEBUG removed)", envNames)
				}
				if len(cs0[0].Ports) != 1 || cs0[0].Ports[0].ContainerPort != 8080 {
					t.Errorf("ports %+v, want only 8080 (9090 removed)", cs0[0].Ports)
				}
				if ptr.Deref(live.Spec.Replicas, 0) != 3 || live.Labels["user-label"] != "x" {
					t.Errorf("others' fields lost: replicas %v labels %v", live.Spec.Replicas, live.Labels)
				}
				if live.Spec.RevisionHistoryLimit == nil || cs0[0].ImagePullPolicy == "" {
					t.Errorf("server defaults lost: %+v", live.Spec)
				}
				var cm corev1.ConfigMap
				if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-config"}, &cm); err != nil {
					t.Fatal(err)
				}
				if _, ok := cm.Data["extra.txt"]; ok || cm.Data["index.html"] != "hi" {
					t.Errorf("ConfigMap data %v, want only index.html", cm.Data)
				}

				for _, o := range declare(false) {
					h.waitCachedAs(t, o)
				}
				h.counter.Reset()
				cs, err = e.Ensure(ctx, owner, declare(false)...)
				if err != nil {
					t.Fatal(err)
				}
				wantActions(t, cs, ensure.Unchanged, ensure.Unchanged)
				if n := h.counter.Total(); n != 0 {
					t.Fatalf("no-op after the removal sent %d requests:\n%s", n, h.counter)
				}
			})
		}
	}
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// A name held by an object the owner does not control blocks with a
// re-checked, readable error; once the object is gone the next Ensure
// creates the child.
func TestNotOwnedIsReadableAndRecovers(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	h := newHarness(t, ns)
	owner := newOwner(t, ns, "app")
	rival := newOwner(t, ns, "rival")
	e := h.ensurer(t, ensure.MergePatch)
	port := []corev1.ServicePort{{Name: "http", Port: 80}}
	taken := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"}, Spec: corev1.ServiceSpec{Ports: port}}
	held := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: rival.Name, UID: rival.UID, Controller: ptr.To(true),
	}}}, Spec: corev1.ServiceSpec{Ports: port}}
	for _, o := range []client.Object{taken, held} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	h.waitCached(t, taken, held)
	want := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Ports: port}}
	}

	check := func(err error, wantMsg ...string) {
		t.Helper()
		if !errors.Is(err, ensure.ErrNotOwned) {
			t.Fatalf("want ErrNotOwned, got %v", err)
		}
		if errors.Is(err, reconcile.TerminalError(nil)) {
			t.Fatalf("ErrNotOwned is terminal, so deleting the object in the way would never be noticed: %v", err)
		}
		c := outcome.Classify(err)
		if c.Class != outcome.ClassDependencyNotReady || c.Reason != ensure.ReasonNotOwned || c.RequeueAfter != ensure.NotOwnedRecheck {
			t.Fatalf("classified %+v, want DependencyNotReady/%s after %s", c, ensure.ReasonNotOwned, ensure.NotOwnedRecheck)
		}
		for _, w := range wantMsg {
			if !strings.Contains(c.Message, w) {
				t.Errorf("message %q lacks %q", c.Message, w)
			}
		}
		for _, bad := range []string{"ensure:", "terminal error", "WithAdoption", "object exists and is not owned"} {
			if strings.Contains(c.Message, bad) {
				t.Errorf("message %q contains %q", c.Message, bad)
			}
		}
	}
	_, err := e.Ensure(ctx, owner, want("taken"))
	check(err, "Service "+ns+"/taken already exists and is not managed by ConfigMap "+ns+"/app (it has no owner)",
		"kubectl label service taken -n "+ns+" "+ensure.LabelOwnerUID+"="+string(owner.UID))
	_, err = e.Ensure(ctx, owner, want("held"))
	check(err, "Service "+ns+"/held already exists and is not managed by ConfigMap "+ns+"/app (it belongs to ConfigMap "+ns+"/rival)")
	t.Logf("message: %s", outcome.Classify(err).Message)

	// The fix happens outside the owner: the Service is deleted.
	if err := env.Client.Delete(ctx, taken); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "cache drops the deleted Service", func() (bool, error) {
		err := h.client.Get(ctx, client.ObjectKeyFromObject(taken), &corev1.Service{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	cs, err := e.Ensure(ctx, owner, want("taken"))
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, ensure.Created)

	// The hand-over the message offers for an orphan.
	orphan := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan"}, Spec: corev1.ServiceSpec{Ports: port}}
	if err := env.Client.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	h.waitCached(t, orphan)
	if _, err := e.Ensure(ctx, owner, want("orphan")); !errors.Is(err, ensure.ErrNotOwned) {
		t.Fatalf("orphan: want ErrNotOwned, got %v", err)
	}
	out, err := env.Kubectl(ctx, "label", "service", "orphan", "-n", ns, ensure.LabelOwnerUID+"="+string(owner.UID))
	if err != nil {
		t.Fatalf("kubectl label: %v: %s", err, out)
	}
	h.waitCached(t, orphan)
	cs, err = e.Ensure(ctx, owner, want("orphan"))
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, ensure.Updated)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(orphan), orphan); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(orphan, owner) {
		t.Fatalf("handed-over Service not controlled by the owner: %v", orphan.OwnerReferences)
	}
}

var widgetGVK = schema.GroupVersionKind{Group: "test.opkit.dev", Version: "v1", Kind: "Widget"}

func widget(steps []string, members []string, tags ...string) *unstructured.Unstructured {
	var st, mem []any
	for _, s := range steps {
		st = append(st, map[string]any{"name": s, "run": "echo " + s})
	}
	for _, m := range members {
		mem = append(mem, map[string]any{"name": m, "size": int64(1)})
	}
	var tg []any
	for _, x := range tags {
		tg = append(tg, x)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "w"},
		"spec":     map[string]any{"steps": st, "members": mem, "tags": tg},
	}}
	u.SetGroupVersionKind(widgetGVK)
	return u
}

// Part 6: a custom resource's lists merge as its schema says
// (x-kubernetes-list-type), read from the API server's OpenAPI: an atomic
// list whose items have a name is compared and written whole (reordering or
// dropping an item is a change), a map list and a set keep others' items and
// lose the operator's dropped ones, and a steady state costs nothing.
func TestCustomResourceListTypesFromOpenAPI(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.String(), func(t *testing.T) {
			ns := env.Namespace(t)
			ctx := testCtx(t)
			h := newHarness(t, ns)
			owner := newOwner(t, ns, "app")
			dc, err := discovery.NewDiscoveryClientForConfig(h.cfg)
			if err != nil {
				t.Fatal(err)
			}
			e := h.ensurer(t, s, ensure.WithOpenAPI(dc.OpenAPIV3()))
			get := func() map[string]any {
				t.Helper()
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(widgetGVK)
				if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w"}, u); err != nil {
					t.Fatal(err)
				}
				return u.Object["spec"].(map[string]any)
			}
			step := func(t *testing.T, d *unstructured.Unstructured, want ensure.Action) {
				t.Helper()
				cs, err := e.Ensure(ctx, owner, d)
				if err != nil {
					t.Fatal(err)
				}
				wantActions(t, cs, want)
				h.waitCachedAs(t, d)
			}
			step(t, widget([]string{"a", "b"}, []string{"x"}, "t1"), ensure.Created)

			// Another manager adds a member and a tag.
			other := &unstructured.Unstructured{Object: map[string]any{
				"metadata": map[string]any{"name": "w", "namespace": ns},
				"spec":     map[string]any{"members": []any{map[string]any{"name": "y", "size": int64(2)}}, "tags": []any{"t2"}},
			}}
			other.SetGroupVersionKind(widgetGVK)
			if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(other), client.FieldOwner("other")); err != nil {
				t.Fatal(err)
			}
			h.waitCachedAs(t, other)
			h.counter.Reset()
			for range 3 {
				step(t, widget([]string{"a", "b"}, []string{"x"}, "t1"), ensure.Unchanged)
			}
			if n := h.counter.Total(); n != 0 {
				t.Fatalf("steady state with others' map-list and set items sent %d requests:\n%s", n, h.counter)
			}

			step(t, widget([]string{"b", "a"}, []string{"x"}, "t1"), ensure.Updated) // reordered atomic list
			step(t, widget([]string{"b"}, []string{"x"}, "t1"), ensure.Updated)      // dropped atomic item
			if got := names2(get()["steps"]); got != "b" {
				t.Fatalf("steps %s, want b", got)
			}
			step(t, widget([]string{"b"}, nil), ensure.Updated) // dropped member x and tag t1
			spec := get()
			if got := names2(spec["members"]); got != "y" {
				t.Fatalf("members %s, want the other manager's y only", got)
			}
			if tags, _ := spec["tags"].([]any); len(tags) != 1 || tags[0] != "t2" {
				t.Fatalf("tags %v, want [t2]", tags)
			}
			h.counter.Reset()
			step(t, widget([]string{"b"}, nil), ensure.Unchanged)
			if n := h.counter.Total(); n != 0 {
				t.Fatalf("no-op sent %d requests:\n%s", n, h.counter)
			}
		})
	}
}

func names2(l any) string {
	items, _ := l.([]any)
	var out []string
	for _, it := range items {
		out = append(out, it.(map[string]any)["name"].(string))
	}
	return strings.Join(out, ",")
}

// Part 6 on a built-in kind: PodSecurityContext.sysctls is atomic and its
// items have a name, so dropping an item is a change for both strategies.
func TestBuiltinAtomicListWithNamedItems(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.String(), func(t *testing.T) {
			ns := env.Namespace(t)
			ctx := testCtx(t)
			h := newHarness(t, ns)
			owner := newOwner(t, ns, "app")
			e := h.ensurer(t, s)
			withSysctls := func(names ...string) *appsv1.Deployment {
				dep, _ := app(false)
				sc := &corev1.PodSecurityContext{}
				for _, n := range names {
					sc.Sysctls = append(sc.Sysctls, corev1.Sysctl{Name: n, Value: "1"})
				}
				dep.Spec.Template.Spec.SecurityContext = sc
				return dep
			}
			if _, err := e.Ensure(ctx, owner, withSysctls("kernel.shm_rmid_forced", "net.ipv4.tcp_syncookies")); err != nil {
				t.Fatal(err)
			}
			h.waitCached(t, inNS(ns, withSysctls())...)
			cs, err := e.Ensure(ctx, owner, withSysctls("net.ipv4.tcp_syncookies"))
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Updated)
			var live appsv1.Deployment
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &live); err != nil {
				t.Fatal(err)
			}
			if sc := live.Spec.Template.Spec.SecurityContext; len(sc.Sysctls) != 1 || sc.Sysctls[0].Name != "net.ipv4.tcp_syncookies" {
				t.Fatalf("sysctls %+v, want only net.ipv4.tcp_syncookies", sc.Sysctls)
			}
		})
	}
}

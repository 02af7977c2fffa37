package ensure_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/testenv"
)

// newTrimmedHarness is newHarness with Deployments cached through
// ensure.DeclaredOnly.
func newTrimmedHarness(tb testing.TB, ns string) *harness {
	return newTrimmedHarnessWith(tb, ns, ensure.NewDeclaredOnly().Transform)
}

// newTrimmedHarnessWith is newHarness with Deployments cached through
// transform.
func newTrimmedHarnessWith(tb testing.TB, ns string, transform toolscache.TransformFunc) *harness {
	tb.Helper()
	cfg, counter := testenv.CountRequests(env.Config)
	c, err := cache.New(cfg, cache.Options{
		Scheme:            env.Scheme,
		DefaultNamespaces: map[string]cache.Config{ns: {}},
		DefaultTransform:  cache.TransformStripManagedFields(),
		ByObject:          map[client.Object]cache.ByObject{&appsv1.Deployment{}: {Transform: transform}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Start(ctx)
	}()
	tb.Cleanup(func() { cancel(); <-done })
	if !c.WaitForCacheSync(ctx) {
		tb.Fatal("cache did not sync")
	}
	cl, err := client.New(cfg, client.Options{Scheme: env.Scheme, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		tb.Fatal(err)
	}
	direct, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		tb.Fatal(err)
	}
	return &harness{ns: ns, cfg: cfg, counter: counter, cache: c, client: cl, direct: direct}
}

// With Deployments cached through DeclaredOnly, the cache holds only what
// the operator declared, a no-op costs nothing, a declared field that
// drifted is corrected, and what others added to the Deployment (a sidecar,
// an env var in the operator's container) and server defaults survive the
// correction, with either strategy.
func TestDeclaredOnlyCacheCorrectsDriftAndKeepsOthers(t *testing.T) {
	for _, strategy := range strategies {
		t.Run(strategy.String(), func(t *testing.T) {
			ctx := testCtx(t)
			ns := env.Namespace(t)
			h := newTrimmedHarness(t, ns)
			owner := newOwner(t, ns, "app")
			e := h.ensurer(t, strategy)
			dep, _, _ := children("nginx:1")
			if _, err := e.Ensure(ctx, owner, dep); err != nil {
				t.Fatal(err)
			}
			key := client.ObjectKey{Namespace: ns, Name: dep.Name}
			live := &appsv1.Deployment{}
			if err := env.Client.Get(ctx, key, live); err != nil {
				t.Fatal(err)
			}
			h.waitCached(t, live)

			cached := &appsv1.Deployment{}
			if err := h.client.Get(ctx, key, cached); err != nil {
				t.Fatal(err)
			}
			ps, cps := live.Spec.Template.Spec, cached.Spec.Template.Spec
			if ps.DNSPolicy == "" || ps.Containers[0].TerminationMessagePath == "" || live.Spec.RevisionHistoryLimit == nil {
				t.Fatalf("the API server did not default the Deployment: %+v", live.Spec)
			}
			if cps.DNSPolicy != "" || cps.Containers[0].TerminationMessagePath != "" || cached.Spec.RevisionHistoryLimit != nil {
				t.Fatalf("cached Deployment keeps undeclared defaults: dnsPolicy %q, terminationMessagePath %q, revisionHistoryLimit %v",
					cps.DNSPolicy, cps.Containers[0].TerminationMessagePath, cached.Spec.RevisionHistoryLimit)
			}
			if cps.Containers[0].Image != "nginx:1" || cached.Annotations[ensure.AnnotationDeclared] == "" || cached.UID != live.UID || cached.Annotations[ensure.AnnotationTrimmed] != "true" {
				t.Fatalf("cached Deployment lost declared fields or metadata: %+v", cached)
			}

			h.counter.Reset()
			if cs, err := e.Ensure(ctx, owner, dep); err != nil || cs.Changed() || h.counter.Total() != 0 {
				t.Fatalf("no-op: changes %v, err %v, requests %s", cs, err, h.counter)
			}

			// Another actor injects a sidecar and an env var; someone changes
			// the declared image.
			live.Spec.Template.Spec.Containers[0].Image = "nginx:drifted"
			live.Spec.Template.Spec.Containers[0].Env = append(live.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "INJECTED", Value: "1"})
			live.Spec.Template.Spec.Containers = append(live.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "proxy:1"})
			if err := env.Client.Update(ctx, live); err != nil {
				t.Fatal(err)
			}
			h.waitCached(t, live)
			h.counter.Reset()
			cs, err := e.Ensure(ctx, owner, dep)
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Updated)
			if h.counter.Writes() != 1 {
				t.Fatalf("drift correction: %d writes, want 1 (%s)", h.counter.Writes(), h.counter)
			}
			got := &appsv1.Deployment{}
			if err := env.Client.Get(ctx, key, got); err != nil {
				t.Fatal(err)
			}
			cs0 := got.Spec.Template.Spec.Containers
			if len(cs0) != 2 || cs0[0].Image != "nginx:1" || cs0[1].Name != "sidecar" {
				t.Fatalf("after correction containers = %+v, want web with nginx:1 and the sidecar", cs0)
			}
			env := map[string]string{}
			for _, v := range cs0[0].Env {
				env[v.Name] = v.Value
			}
			if env["MODE"] != "prod" || env["INJECTED"] != "1" {
				t.Fatalf("after correction env = %v, want MODE=prod and the injected INJECTED=1", env)
			}
			if got.Spec.Template.Spec.DNSPolicy != ps.DNSPolicy || cs0[0].TerminationMessagePath != ps.Containers[0].TerminationMessagePath {
				t.Fatalf("server defaults changed: %+v", got.Spec.Template.Spec)
			}

			h.waitCached(t, got)
			h.counter.Reset()
			if cs, err := e.Ensure(ctx, owner, dep); err != nil || cs.Changed() || h.counter.Total() != 0 {
				t.Fatalf("no-op after correction: changes %v, err %v, requests %s", cs, err, h.counter)
			}
		})
	}
}

// The control case: a cached copy trimmed like DeclaredOnly's but without
// ensure.AnnotationTrimmed is taken for the whole object, the merge patch is
// computed from it, and the sidecar another actor added is lost. The marker
// is what keeps it in TestDeclaredOnlyCacheCorrectsDriftAndKeepsOthers.
func TestDeclaredOnlyCacheWithoutTheMarkLosesOthersItems(t *testing.T) {
	ctx := testCtx(t)
	ns := env.Namespace(t)
	trim := ensure.NewDeclaredOnly()
	h := newTrimmedHarnessWith(t, ns, func(obj any) (any, error) {
		obj, err := trim.Transform(obj)
		if o, ok := obj.(client.Object); ok && err == nil {
			a := o.GetAnnotations()
			delete(a, ensure.AnnotationTrimmed)
			o.SetAnnotations(a)
		}
		return obj, err
	})
	owner := newOwner(t, ns, "app")
	e := h.ensurer(t, ensure.MergePatch)
	dep, _, _ := children("nginx:1")
	if _, err := e.Ensure(ctx, owner, dep); err != nil {
		t.Fatal(err)
	}
	live := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: dep.Name}, live); err != nil {
		t.Fatal(err)
	}
	live.Spec.Template.Spec.Containers[0].Image = "nginx:drifted"
	live.Spec.Template.Spec.Containers = append(live.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "proxy:1"})
	if err := env.Client.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	h.waitCached(t, live)
	if _, err := e.Ensure(ctx, owner, dep); err != nil {
		t.Fatal(err)
	}
	got := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(live), got); err != nil {
		t.Fatal(err)
	}
	if n := len(got.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("control case: %d containers after a patch from the trimmed copy, want the sidecar lost (1); the test of the trimmed mark proves nothing", n)
	}
}

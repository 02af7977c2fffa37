package ensure_test

import (
	"context"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, &env, testenv.WithCRDPaths("testdata")))
}

func testCtx(tb testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	tb.Cleanup(cancel)
	return c
}

// harness is what a controller has: a client reading from an informer cache,
// every request it sends counted.
type harness struct {
	ns      string
	cfg     *rest.Config // counted
	counter *testenv.RequestCounter
	cache   cache.Cache
	client  client.Client // cached reads, direct writes, counted
	direct  client.Client // uncached, counted (the manager's APIReader)
}

func newHarness(tb testing.TB, namespaces ...string) *harness {
	tb.Helper()
	return newIndexedHarness(tb, nil, namespaces...)
}

// newIndexedHarness is newHarness with ensure.OwnerIndex registered on the
// cache for the indexed kinds before it starts.
func newIndexedHarness(tb testing.TB, indexed []client.Object, namespaces ...string) *harness {
	tb.Helper()
	return newHarnessWith(tb, cache.Options{}, indexed, namespaces...)
}

// newStrippingHarness is newHarness over a cache that strips managedFields,
// as operators' caches often do (the reconciler package's by default).
func newStrippingHarness(tb testing.TB, namespaces ...string) *harness {
	tb.Helper()
	return newHarnessWith(tb, cache.Options{DefaultTransform: cache.TransformStripManagedFields()}, nil, namespaces...)
}

// newHarnessWith is newIndexedHarness on a cache with opts (its scheme and
// namespaces set here).
func newHarnessWith(tb testing.TB, opts cache.Options, indexed []client.Object, namespaces ...string) *harness {
	tb.Helper()
	cfg, counter := testenv.CountRequests(env.Config)
	opts.Scheme = env.Scheme
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(cfg, opts)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := ensure.IndexOwner(ctx, c, indexed...); err != nil {
		cancel()
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Start(ctx)
	}()
	tb.Cleanup(func() { cancel(); <-done })
	if !c.WaitForCacheSync(ctx) {
		tb.Fatal("cache did not sync")
	}
	cl, err := client.New(cfg, client.Options{Scheme: env.Scheme, Cache: &client.CacheOptions{Reader: c, Unstructured: true}})
	if err != nil {
		tb.Fatal(err)
	}
	direct, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		tb.Fatal(err)
	}
	h := &harness{cfg: cfg, counter: counter, cache: c, client: cl, direct: direct}
	if len(namespaces) > 0 {
		h.ns = namespaces[0]
	}
	return h
}

func (h *harness) ensurer(tb testing.TB, strategy ensure.Strategy, opts ...ensure.Option) *ensure.Ensurer {
	tb.Helper()
	e, err := ensure.New(h.client, "webapp-operator",
		append([]ensure.Option{ensure.WithStrategy(strategy), ensure.WithAPIReader(h.direct)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// waitCached waits until the cache holds each object at the resourceVersion
// the API server has, so the next reconcile sees the truth.
func (h *harness) waitCached(tb testing.TB, objs ...client.Object) {
	tb.Helper()
	ctx := testCtx(tb)
	for _, o := range objs {
		key := client.ObjectKeyFromObject(o)
		eventually(tb, 30*time.Second, "cache has "+key.String(), func() (bool, error) {
			live := o.DeepCopyObject().(client.Object)
			if err := env.Client.Get(ctx, key, live); err != nil {
				return false, err
			}
			cached := o.DeepCopyObject().(client.Object)
			if err := h.cache.Get(ctx, key, cached); err != nil {
				return false, err
			}
			return cached.GetResourceVersion() == live.GetResourceVersion(), nil
		})
	}
}

// eventually polls cond with testenv.WaitForEvery (every 20ms).
func eventually(tb testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	tb.Helper()
	testenv.WaitForEvery(tb, 20*time.Millisecond, timeout, what, cond)
}

func newOwner(tb testing.TB, ns, name string) *corev1.ConfigMap {
	tb.Helper()
	o := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"replicas": "unset"}}
	if err := env.Client.Create(testCtx(tb), o); err != nil {
		tb.Fatal(err)
	}
	return o
}

// children is what an operator declares for a web app: only the fields it
// manages. Namespaces are left empty: they default to the owner's.
func children(image string) (*appsv1.Deployment, *corev1.Service, *corev1.ConfigMap) {
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: image,
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					Env:   []corev1.EnvVar{{Name: "MODE", Value: "prod"}},
				}}},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config"}, Data: map[string]string{"mode": "prod"}}
	return dep, svc, cm
}

func objs(o ...client.Object) []client.Object { return o }

func inNS(ns string, o ...client.Object) []client.Object {
	out := make([]client.Object, len(o))
	for i, x := range o {
		c := x.DeepCopyObject().(client.Object)
		c.SetNamespace(ns)
		out[i] = c
	}
	return out
}

var strategies = []ensure.Strategy{ensure.MergePatch, ensure.ServerSideApply}

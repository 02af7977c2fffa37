package e2etest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/testenv"
)

// Must returns v, or panics with err: for TestMain, where there is no t to fail.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Context returns a context that ends after d, or when the test ends.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// WaitFor is testenv.WaitFor: cond every 100ms until it returns true, the
// test failed with what and cond's last error after timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	testenv.WaitFor(t, timeout, what, cond)
}

// WaitForEvery is testenv.WaitForEvery: [WaitFor] polling every interval.
func WaitForEvery(t testing.TB, interval, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	testenv.WaitForEvery(t, interval, timeout, what, cond)
}

// Manager is a manager for one test's operator.
type Manager struct {
	manager.Manager
	// Requests counts the requests the manager's clients send.
	Requests *testenv.RequestCounter
	// Observability is set up on the manager, with a Prometheus registry of
	// its own (tests run managers side by side) and without health checks.
	Observability *observability.Observability
}

// NewManager builds a manager against cfg whose caches hold only namespace
// ns, so other tests' objects (and leftovers the namespace controller is
// still deleting) stay out of its caches and its request counts. Metrics and
// health probes are not served, and controller names are not checked for
// uniqueness: every test registers the same controllers. mutate, when given,
// adjusts the options last. It fails the test on error.
func NewManager(t testing.TB, cfg *rest.Config, scheme *runtime.Scheme, ns string, mutate ...func(*manager.Options)) *Manager {
	t.Helper()
	cfg, requests := testenv.CountRequests(cfg)
	opts := manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		// Each test runs its own manager with the same controller name.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	}
	for _, m := range mutate {
		m(&opts)
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := observability.Setup(mgr, observability.WithRegisterer(prometheus.NewRegistry()), observability.WithoutHealthChecks())
	if err != nil {
		t.Fatal(err)
	}
	return &Manager{Manager: mgr, Requests: requests, Observability: obs}
}

// Run starts the manager in the background, where it runs until stop is
// called or the test ends; an error from the manager fails the test. stop
// returns once the manager has returned; calling it again does nothing more.
func (m *Manager) Run(t testing.TB) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := m.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return stop
}

// UserBoundTo runs [testenv.Env.UserBoundTo] with the ClusterRole named
// role among rbac (the example's config.RBAC()), granted cluster-wide or,
// with namespaces, only in those. It fails the test when rbac
// has no such ClusterRole.
func UserBoundTo(t testing.TB, env *testenv.Env, rbac []*unstructured.Unstructured, role string, namespaces ...string) (*rest.Config, client.Client) {
	t.Helper()
	for _, o := range rbac {
		if o.GetKind() == "ClusterRole" && o.GetName() == role {
			return env.UserBoundTo(t, o, namespaces...)
		}
	}
	t.Fatalf("no generated ClusterRole %s in config/rbac", role)
	return nil, nil
}

// WaitScale waits until obj's scale subresource reports replicas (spec and
// status) and a selector equal to podLabels, then checks that the selector
// picks exactly replicas pods in obj's namespace: the selector is what an
// autoscaler uses to find the pods. It returns the Scale it read.
func WaitScale(ctx context.Context, t testing.TB, c client.Client, obj client.Object, replicas int32, podLabels map[string]string) *autoscalingv1.Scale {
	t.Helper()
	want := labels.SelectorFromSet(podLabels).String()
	scale := &autoscalingv1.Scale{}
	WaitFor(t, 90*time.Second, fmt.Sprintf("the scale subresource reports %d replicas and the pods' selector", replicas), func() (bool, error) {
		if err := c.SubResource("scale").Get(ctx, obj, scale); err != nil {
			return false, err
		}
		return scale.Spec.Replicas == replicas && scale.Status.Replicas == replicas && scale.Status.Selector == want, nil
	})
	sel, err := labels.Parse(scale.Status.Selector)
	if err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(obj.GetNamespace()), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != int(replicas) {
		t.Fatalf("the scale selector %q selects %d pods, want %d", scale.Status.Selector, len(pods.Items), replicas)
	}
	return scale
}

package helm_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/opkit/opkit/helm"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/reconciler"
	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := addApps(s); err != nil {
		panic(err)
	}
	// Workloads: hook Jobs run to completion on the kwok node.
	os.Exit(testenv.RunMain(m, &env, testenv.WithScheme(s), testenv.WithWorkloads(), testenv.WithCRDPaths("testdata/crd")))
}

// testCharts loads every chart under testdata/charts once.
func testCharts(t testing.TB) map[string]*chart.Chart {
	t.Helper()
	out := map[string]*chart.Chart{}
	for _, name := range []string{"app-1", "app-2", "broken", "deletehook", "badobject", "failjob"} {
		ch, err := helm.LoadFS(os.DirFS("testdata/charts"), name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = ch
	}
	return out
}

// operator is one running chart operator in a test.
type operator struct {
	requests   *testenv.RequestCounter
	reconciles *atomic.Int64
}

// startOperator runs the App operator, scoped to ns, until the test ends.
func startOperator(t *testing.T, ns string, opts ...helm.Option) *operator {
	t.Helper()
	charts := testCharts(t)
	cfg, requests := testenv.CountRequests(env.Config)
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}, DefaultTransform: cache.TransformStripManagedFields()},
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		// Kinds outside the scheme (the chart's Widget, its CRD) are read
		// as unstructured objects: from the cache too.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := observability.Setup(mgr, observability.WithRegisterer(prometheus.NewRegistry()), observability.WithoutHealthChecks())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reconciles := &atomic.Int64{}
	rel, err := helm.New(mgr.GetClient(), cs.CoreV1(),
		func(_ context.Context, a *App) (*chart.Chart, error) {
			reconciles.Add(1)
			ch := charts[a.Spec.Chart]
			if ch == nil {
				return nil, outcome.Terminal("UnknownChart", fmt.Errorf("no chart %q", a.Spec.Chart))
			}
			return ch, nil
		},
		func(_ context.Context, a *App) (map[string]any, error) { return a.Spec.Values, nil },
		append([]helm.Option{helm.WithHookRecheck(500 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	b := reconciler.For(mgr, "app", func() *App { return &App{} }).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Service{}).
		Owns(&batchv1.Job{}, reconciler.WithoutPrune()).
		Observability(obs)
	if err := rel.Register(b, "helmtest.opkit.dev/uninstall").Complete(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return &operator{requests: requests, reconciles: reconciles}
}

// waitFor polls cond every 100ms until it is true, fails the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
}

func get(t testing.TB, obj client.Object) error {
	t.Helper()
	return env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
}

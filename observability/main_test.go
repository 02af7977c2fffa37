package observability_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, &env, testenv.WithCRDPaths("../testenv/testdata/crds")))
}

func testCtx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// eventually polls cond with testenv.WaitForEvery (every 50ms).
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	testenv.WaitForEvery(t, 50*time.Millisecond, timeout, what, cond)
}

// freeAddr returns a loopback address with a port that was free a moment ago.
// controller-runtime's servers take an address, not a listener, and do not
// report the port they bound, so ":0" cannot be used.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

type mgrConfig struct {
	metricsAddr, probeAddr string
	logger                 logr.Logger
}

// newManager returns a manager whose cache sees only namespace ns. Servers are
// off unless addresses are given.
func newManager(t testing.TB, ns string, c mgrConfig) manager.Manager {
	t.Helper()
	metricsAddr := c.metricsAddr
	if metricsAddr == "" {
		metricsAddr = "0"
	}
	logger := c.logger
	if logger.GetSink() == nil {
		logger = logr.Discard()
	}
	mgr, err := manager.New(env.Config, manager.Options{
		Scheme:                 env.Scheme,
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: c.probeAddr,
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// start runs mgr until the returned stop function is called (also at cleanup).
// stop waits for Start to return and fails the test on a start error.
func start(t testing.TB, mgr manager.Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("manager: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("manager did not stop within 60s")
		}
		mgr.GetHTTPClient().CloseIdleConnections()
	}
	t.Cleanup(stop)
	return stop
}

// plainHTTP keeps no idle connections, so no client goroutine outlives a test.
var plainHTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

func httpGet(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := plainHTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func controllerOpts(workers int) controller.Options {
	return controller.Options{MaxConcurrentReconciles: workers}
}

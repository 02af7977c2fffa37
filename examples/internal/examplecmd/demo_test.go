package examplecmd

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/examples/internal/manifest"
	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, &env))
}

// defaults returns the Flags an example's main has after parsing args.
func defaults(t *testing.T, args ...string) (*Flags, *flag.FlagSet) {
	t.Helper()
	var f Flags
	fs := flag.NewFlagSet("example", flag.ContinueOnError)
	f.Register(fs, "bounded demo", time.Minute)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &f, fs
}

func TestDefaultsAreSecure(t *testing.T) {
	f, fs := defaults(t)
	f.DefaultAddrs(false)
	if f.MetricsAddr != ":8443" || f.MetricsInsecure || f.EnableHTTP2 {
		t.Fatalf("defaults: metrics %q insecure=%v http2=%v, want :8443 over HTTPS without HTTP/2", f.MetricsAddr, f.MetricsInsecure, f.EnableHTTP2)
	}
	if got := fs.Lookup("metrics-secure").Value.String(); got != "true" {
		t.Errorf("--metrics-secure shows %q, want true", got)
	}
	for _, name := range []string{"zap-devel", "zap-encoder", "zap-log-level", "zap-stacktrace-level", "zap-time-encoding"} {
		if fs.Lookup(name) == nil {
			t.Errorf("--%s is not bound (zap.Options.BindFlags)", name)
		}
	}
	o := f.ManagerOptions(nil, "x")
	if !o.Metrics.SecureServing || o.Metrics.FilterProvider == nil {
		t.Errorf("manager options: SecureServing=%v, FilterProvider set=%v; want both", o.Metrics.SecureServing, o.Metrics.FilterProvider != nil)
	}

	f, _ = defaults(t, "--metrics-secure=false")
	f.DefaultAddrs(false)
	if !f.MetricsInsecure || f.MetricsAddr != ":8080" || f.MetricsURL() != "http://localhost:8080/metrics" {
		t.Fatalf("--metrics-secure=false: insecure=%v addr %q url %q, want plain HTTP on :8080", f.MetricsInsecure, f.MetricsAddr, f.MetricsURL())
	}
	if o := f.ManagerOptions(nil, "x"); o.Metrics.SecureServing || o.Metrics.FilterProvider != nil {
		t.Errorf("--metrics-secure=false still secures the metrics server")
	}
}

// An example's manager, with the flags' defaults, serves metrics only over
// HTTPS, only over HTTP/1.1, and only to a token bound to the example's
// metrics-reader ClusterRole.
func TestManagerServesMetricsOverHTTPSByDefault(t *testing.T) {
	f, _ := defaults(t)
	f.MetricsAddr, f.ProbeAddr = FreeLoopback(), "0" // :8443 may be taken on a test machine
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, f.ManagerOptions(scheme, "examplecmd-test"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, bg := StartBackground(context.Background(), mgr)
	t.Cleanup(bg.Stop)
	url := f.MetricsURL()
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("MetricsURL = %q, want https", url)
	}

	// get returns the status code, the protocol's major version and the body.
	get := func(url, token string, h2 bool) (code, proto int, body string, err error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: h2}
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return 0, 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.ProtoMajor, string(b), err
	}

	// The server is up once HTTPS answers at all.
	testenv.WaitFor(t, 30*time.Second, "the metrics server answers over HTTPS", func() (bool, error) {
		code, _, _, err := get(url, "", false)
		if err != nil {
			return false, err
		}
		if code != http.StatusUnauthorized {
			return false, fmt.Errorf("unauthenticated scrape: %d, want 401", code)
		}
		return true, nil
	})

	plain := "http://" + strings.TrimPrefix(url, "https://")
	if code, _, body, err := get(plain, "", false); err == nil && (code == http.StatusOK || strings.Contains(body, "# HELP")) {
		t.Fatalf("plain HTTP scrape got %d with metrics; want the HTTPS server to refuse it", code)
	}

	token := metricsReaderToken(t)
	testenv.WaitFor(t, 30*time.Second, "a metrics reader scrapes over HTTP/1.1", func() (bool, error) {
		code, proto, body, err := get(url, token, true)
		if err != nil {
			return false, err
		}
		if code != http.StatusOK || !strings.Contains(body, "# HELP") {
			return false, fmt.Errorf("status %d: %.200s", code, body)
		}
		if proto != 1 {
			return false, fmt.Errorf("the client negotiated HTTP/%d although HTTP/2 is off", proto)
		}
		return true, nil
	})
}

// metricsReaderToken creates a ServiceAccount bound to the webapp example's
// metrics-reader ClusterRole (config/rbac/metrics_reader_role.yaml, as
// installed) and returns a token for it.
func metricsReaderToken(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := env.Namespace(t)
	objs, err := manifest.Objects(os.DirFS("../../webapp/config/rbac"), ".")
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.ClusterRole
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && o.GetName() == "metrics-reader" {
			role = &rbacv1.ClusterRole{}
			if err := runtimeConvert(o.Object, role); err != nil {
				t.Fatal(err)
			}
		}
	}
	if role == nil {
		t.Fatal("webapp's config/rbac has no ClusterRole metrics-reader")
	}
	role.Name = "metrics-reader-" + ns
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "prometheus"}},
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prometheus"}}
	for _, o := range []client.Object{role, binding, sa} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = env.Client.Delete(ctx, binding)
		_ = env.Client.Delete(ctx, role)
	})
	tr, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func TestTLSOptsOfferHTTP2OnlyWhenAsked(t *testing.T) {
	for _, enable := range []bool{false, true} {
		f := &Flags{EnableHTTP2: enable}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		srv.EnableHTTP2 = true
		srv.TLS = &tls.Config{}
		for _, o := range f.TLSOpts() {
			o(srv.TLS)
		}
		srv.StartTLS()
		c := srv.Client()
		c.Transport.(*http.Transport).ForceAttemptHTTP2 = true
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
		resp, err := c.Do(req)
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.ProtoMajor == 2; got != enable {
			t.Errorf("EnableHTTP2=%v: the client negotiated %s", enable, resp.Proto)
		}
	}
}

func TestClusterConfigHonoursKubeconfigAndKUBECONFIG(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
	t.Setenv("KUBECONFIG", "")
	if cfg, err := (&Flags{}).ClusterConfig(); err != nil || cfg != nil {
		t.Fatalf("nothing configured: %v, %v; want nil (embedded)", hostOf(cfg), err)
	}
	t.Setenv("KUBECONFIG", env.KubeconfigPath)
	cfg, err := (&Flags{}).ClusterConfig()
	if err != nil || cfg == nil || !sameHost(cfg.Host, env.Config.Host) {
		t.Fatalf("KUBECONFIG=%s: %v, %v; want the control plane at %s", env.KubeconfigPath, hostOf(cfg), err, env.Config.Host)
	}
	if cfg, err := (&Flags{Embedded: true}).ClusterConfig(); err != nil || cfg != nil {
		t.Fatalf("--embedded: %v, %v; want nil", hostOf(cfg), err)
	}
	// --kubeconfig wins over $KUBECONFIG.
	t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig")
	cfg, err = (&Flags{Kubeconfig: env.KubeconfigPath}).ClusterConfig()
	if err != nil || cfg == nil || !sameHost(cfg.Host, env.Config.Host) {
		t.Fatalf("--kubeconfig over a broken KUBECONFIG: %v, %v", hostOf(cfg), err)
	}
	if _, err := (&Flags{Kubeconfig: "/nonexistent/kubeconfig"}).ClusterConfig(); err == nil {
		t.Fatal("an unreadable --kubeconfig is not an error")
	}
}

// The config an operator gets on a cluster has client-side rate limiting
// off (QPS -1), as controller-runtime's ctrl.GetConfig returns it: the API
// server's Priority and Fairness paces it. client-go's default for QPS 0
// (5 requests/s, bursts of 10) held the webapp binary to about two
// reconciles a second in the chaos soak's process window.
func TestClusterConfigHasNoClientSideRateLimit(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBECONFIG", env.KubeconfigPath)
	for _, f := range []*Flags{{}, {Kubeconfig: env.KubeconfigPath}} {
		cfg, err := f.ClusterConfig()
		if err != nil || cfg == nil {
			t.Fatalf("%+v: %v, %v", f, hostOf(cfg), err)
		}
		if cfg.QPS != -1 || cfg.RateLimiter != nil {
			t.Errorf("--kubeconfig %q: QPS %v, Burst %d, RateLimiter %v; want QPS -1 (no client-side rate limit, as ctrl.GetConfig)", f.Kubeconfig, cfg.QPS, cfg.Burst, cfg.RateLimiter)
		}
	}
}

func TestDemoLogsGoToTheNamedFile(t *testing.T) {
	file := t.TempDir() + "/demo.log"
	closeLog, err := Narrator("test").SetDemoLogger(false, file, (&Flags{}).Zap)
	if err != nil {
		t.Fatal(err)
	}
	ctrl.Log.WithName("probe").Info("hello from controller-runtime's logger")
	closeLog()
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), "hello from controller-runtime's logger") {
		t.Fatalf("log file: %q, %v", b, err)
	}
}

func runtimeConvert(u map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u, into)
}

func sameHost(a, b string) bool { return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/") }

// hostOf names the cluster of cfg without printing its credentials.
func hostOf(cfg *rest.Config) string {
	if cfg == nil {
		return "<nil>"
	}
	return "config for " + cfg.Host
}

func TestWatchNamespaceLimitsTheCaches(t *testing.T) {
	f, _ := defaults(t)
	if o := f.ManagerOptions(nil, "x"); len(o.Cache.DefaultNamespaces) != 0 {
		t.Fatalf("without --watch-namespace the caches are limited to %v", o.Cache.DefaultNamespaces)
	}
	f, _ = defaults(t, "--watch-namespace", "shop")
	o := f.ManagerOptions(nil, "x")
	if _, ok := o.Cache.DefaultNamespaces["shop"]; !ok || len(o.Cache.DefaultNamespaces) != 1 {
		t.Fatalf("--watch-namespace shop: caches limited to %v, want only shop", o.Cache.DefaultNamespaces)
	}
}

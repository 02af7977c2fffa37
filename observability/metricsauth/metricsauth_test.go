package metricsauth_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/opkit/opkit/observability/metricsauth"
	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, &env))
}

// serve starts a controller-runtime metrics server on a loopback port,
// over HTTPS (self-signed) with provider as its filter, authenticated to
// the API server as cfg, and returns its /metrics URL.
func serve(t *testing.T, cfg *rest.Config, provider func(*rest.Config, *http.Client) (metricsserver.Filter, error)) string {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(metricsserver.Options{
		BindAddress:    "127.0.0.1:0",
		SecureServing:  true,
		CertDir:        t.TempDir(), // empty: a self-signed certificate
		FilterProvider: provider,
	}, cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("metrics server: %v", err)
		}
	})
	bound, ok := srv.(interface{ GetBindAddr() string })
	if !ok {
		t.Fatalf("%T does not report its address", srv)
	}
	var addr string
	testenv.WaitFor(t, 10*time.Second, "the metrics server listens", func() (bool, error) {
		addr = bound.GetBindAddr()
		return addr != "", nil
	})
	return "https://" + addr + "/metrics"
}

// scrape GETs url with token as bearer (none when empty) and returns the
// status code, the body and the response's header.
func scrape(t *testing.T, url, token string) (int, string, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp.Header
}

// serviceAccountToken creates ServiceAccount ns/name and returns a token
// for it from the TokenRequest API (the API server signs it).
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// grantMetricsReader binds ServiceAccount ns/name to a ClusterRole with
// kubebuilder's metrics-reader rule (get on the non-resource URL /metrics).
func grantMetricsReader(t *testing.T, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "metrics-reader-"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = env.Client.Delete(ctx, binding)
		_ = env.Client.Delete(ctx, role)
	})
}

// The acceptance test of the secure-metrics default: no token or a bad one
// is refused (401), a valid token without the metrics-reader role is
// forbidden (403), one with it gets Prometheus text (200).
func TestScrapeNeedsATokenAllowedToGetMetrics(t *testing.T) {
	ns := env.Namespace(t)
	url := serve(t, env.Config, metricsauth.FilterProvider)

	code, body, header := scrape(t, url, "")
	if code != http.StatusUnauthorized || !strings.HasPrefix(header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("scrape without a token: %d %q (WWW-Authenticate %q), want 401 with a Bearer challenge", code, body, header.Get("WWW-Authenticate"))
	}
	if code, body, _ := scrape(t, url, "not-a-token"); code != http.StatusUnauthorized {
		t.Fatalf("scrape with an invalid token: %d %q, want 401", code, body)
	}

	outsider := serviceAccountToken(t, ns, "outsider")
	if code, body, _ := scrape(t, url, outsider); code != http.StatusForbidden || !strings.Contains(body, "system:serviceaccount:"+ns+":outsider") {
		t.Fatalf("scrape by a ServiceAccount without the metrics-reader role: %d %q, want 403 naming it", code, body)
	}

	reader := serviceAccountToken(t, ns, "prometheus")
	grantMetricsReader(t, ns, "prometheus")
	var families int
	testenv.WaitFor(t, 30*time.Second, "the metrics reader's scrape succeeds (RBAC caches catch up)", func() (bool, error) {
		code, body, header := scrape(t, url, reader)
		if code != http.StatusOK {
			return false, fmt.Errorf("status %d: %s", code, body)
		}
		if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			return false, fmt.Errorf("Content-Type %q, want Prometheus text", ct)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		mf, err := p.TextToMetricFamilies(strings.NewReader(body))
		if err != nil {
			return false, fmt.Errorf("not Prometheus text: %w", err)
		}
		families = len(mf)
		return families > 0, nil
	})
	t.Logf("the metrics reader scraped %d metric families", families)
}

// Both outcomes are cached for their TTL, so a scraper costs the API server
// one review of each kind per TTL; a refusal ends when its shorter TTL does.
func TestResultsAreCachedForTheirTTL(t *testing.T) {
	ns := env.Namespace(t)
	cfg, requests := testenv.CountRequests(env.Config)
	clock := clocktesting.NewFakeClock(time.Now())
	url := serve(t, cfg, metricsauth.NewFilterProvider(metricsauth.WithClock(clock), metricsauth.WithCacheTTL(time.Minute, 10*time.Second)))
	token := serviceAccountToken(t, ns, "scraper")
	reviews := func() (int, int) {
		return requests.Count("create", "tokenreviews.authentication.k8s.io"), requests.Count("create", "subjectaccessreviews.authorization.k8s.io")
	}

	// Refused, then refused from the cache even after the grant.
	if code, body, _ := scrape(t, url, token); code != http.StatusForbidden {
		t.Fatalf("first scrape: %d %q, want 403", code, body)
	}
	grantMetricsReader(t, ns, "scraper")
	if code, body, _ := scrape(t, url, token); code != http.StatusForbidden {
		t.Fatalf("scrape within the deny TTL: %d %q, want the cached 403", code, body)
	}
	if tr, sar := reviews(); tr != 1 || sar != 1 {
		t.Fatalf("two scrapes sent %d TokenReviews and %d SubjectAccessReviews, want 1 and 1 (cached):\n%s", tr, sar, requests)
	}

	// Past the deny TTL the SubjectAccessReview is asked again and allows;
	// the token's review is still cached (allow TTL).
	clock.Step(11 * time.Second)
	testenv.WaitFor(t, 30*time.Second, "the grant takes effect once the refusal expired", func() (bool, error) {
		code, body, _ := scrape(t, url, token)
		if code != http.StatusOK {
			clock.Step(11 * time.Second) // the API server's RBAC cache may still be catching up; the refusal was cached again
			return false, fmt.Errorf("status %d: %s", code, body)
		}
		return true, nil
	})
	requests.Reset()
	for range 5 {
		if code, body, _ := scrape(t, url, token); code != http.StatusOK {
			t.Fatalf("cached allowed scrape: %d %q", code, body)
		}
	}
	if tr, sar := reviews(); tr != 0 || sar != 0 {
		t.Fatalf("5 scrapes within the allow TTL sent %d TokenReviews and %d SubjectAccessReviews, want none:\n%s", tr, sar, requests)
	}
	clock.Step(61 * time.Second)
	if code, body, _ := scrape(t, url, token); code != http.StatusOK {
		t.Fatalf("scrape after the allow TTL: %d %q", code, body)
	}
	if tr, sar := reviews(); tr != 1 || sar != 1 {
		t.Fatalf("a scrape after the allow TTL sent %d TokenReviews and %d SubjectAccessReviews, want 1 and 1:\n%s", tr, sar, requests)
	}
}

// An operator without the RBAC for the reviews (metrics_auth_role.yaml)
// answers 500, caches nothing, and logs no token.
func TestFailedReviewIs500AndNotCached(t *testing.T) {
	ns := env.Namespace(t)
	token := serviceAccountToken(t, ns, "scraper")
	noRBAC, _ := env.UserBoundTo(t, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "no-metrics-auth"}})
	cfg, requests := testenv.CountRequests(noRBAC)

	var mu sync.Mutex
	var logs strings.Builder
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(&logs, prefix, args)
	}, funcr.Options{Verbosity: 10})
	provider := func(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
		f, err := metricsauth.FilterProvider(cfg, hc)
		if err != nil {
			return nil, err
		}
		return func(_ logr.Logger, h http.Handler) (http.Handler, error) { return f(logger, h) }, nil
	}
	url := serve(t, cfg, provider)
	for range 2 {
		if code, body, _ := scrape(t, url, token); code != http.StatusInternalServerError || strings.Contains(body, token) {
			t.Fatalf("scrape while the TokenReview is forbidden: %d %q, want 500 without the token", code, body)
		}
	}
	if n := requests.Count("create", "tokenreviews.authentication.k8s.io"); n != 2 {
		t.Fatalf("two scrapes sent %d TokenReviews, want 2 (a failure is not cached):\n%s", n, requests)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "token review failed") {
		t.Errorf("the failure was not logged:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the log holds the token:\n%s", logs.String())
	}
}

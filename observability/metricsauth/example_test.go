package metricsauth_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/opkit/opkit/observability/metricsauth"
)

// The manager options kubebuilder's scaffold uses, with this package's
// filter in place of controller-runtime's.
func ExampleFilterProvider() {
	opts := ctrl.Options{Metrics: metricsserver.Options{
		BindAddress:    ":8443",
		SecureServing:  true,
		FilterProvider: metricsauth.FilterProvider,
	}}
	_ = opts // ctrl.NewManager(cfg, opts)

	// What a scrape without a token gets, before any API request is made.
	filter, err := metricsauth.FilterProvider(&rest.Config{Host: "https://127.0.0.1:6443"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	h, _ := filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "metrics") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	fmt.Println(rec.Code, rec.Header().Get("WWW-Authenticate"))
	// Output: 401 Bearer realm="metrics"
}

// Shorter caching, for a cluster where RBAC changes must take effect fast.
func ExampleNewFilterProvider() {
	opts := metricsserver.Options{
		SecureServing:  true,
		FilterProvider: metricsauth.NewFilterProvider(metricsauth.WithCacheTTL(10*time.Second, 2*time.Second), metricsauth.WithCacheSize(128)),
	}
	fmt.Println(opts.FilterProvider != nil)
	// Output: true
}

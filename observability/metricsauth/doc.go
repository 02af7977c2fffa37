// Package metricsauth protects a controller-runtime metrics server the way a
// kube-apiserver protects its own endpoints: a scrape must carry a bearer
// token that the API server accepts (a TokenReview, authentication.k8s.io/v1)
// for a user the API server authorises to get the scraped path (a
// SubjectAccessReview, authorization.k8s.io/v1, for a non-resource URL).
// [FilterProvider] fits metricsserver.Options.FilterProvider:
//
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{
//		BindAddress:    ":8443",
//		SecureServing:  true,
//		FilterProvider: metricsauth.FilterProvider,
//	}})
//
// # Guarantees
//
// Responses. A request without an "Authorization: Bearer <token>" header, or
// whose token the TokenReview does not authenticate, is answered 401
// Unauthorized with "WWW-Authenticate: Bearer" and never reaches the metrics
// handler. An authenticated user whom the SubjectAccessReview does not allow
// verb v on the request's path (v is the request method in lower case, so a
// scrape is "get") is answered 403 Forbidden. A review that fails (the API
// server is unreachable, the operator lacks the RBAC below, the review times
// out after [DefaultTimeout]) is answered 500 and is not cached, so the next
// scrape asks again. Only an allowed request reaches the handler.
//
// Caching. Each review result is cached in memory, keyed by a SHA-256 digest
// (of the token; of the user, groups, extra, verb and path), never by the
// token itself: an allowed result for [DefaultAllowTTL] (1 minute), a refused
// one for [DefaultDenyTTL] (10 seconds), in two LRUs of at most
// [DefaultCacheSize] (1024) entries each; an evicted entry only costs one
// more review. So a Prometheus scraping every 15 seconds costs the API server
// at most one TokenReview and one SubjectAccessReview a minute, and a
// revoked token or RoleBinding stops working within a minute. [WithCacheTTL],
// [WithCacheSize], [WithTimeout], [WithAudiences] and [WithClock] change this.
//
// Secrecy. The token is sent only to the API server in the TokenReview. It is
// never logged, never stored, never put in an error; the log lines a denial
// writes (at V(4)) name the user, not the token.
//
// # RBAC
//
// The operator's ServiceAccount needs create on tokenreviews
// (authentication.k8s.io) and subjectaccessreviews (authorization.k8s.io);
// kubebuilder ships this as config/rbac/metrics_auth_role.yaml, and so do
// opkit's examples. A scraper needs get on the non-resource URL /metrics
// (config/rbac/metrics_reader_role.yaml).
//
// # Why not controller-runtime's filter
//
// controller-runtime's sigs.k8s.io/controller-runtime/pkg/metrics/filters
// does the same with k8s.io/apiserver's delegating authenticator and
// authorizer. Importing it puts k8s.io/apiserver's authentication stack in
// the importing module's graph: gRPC, cel-go, component-base, OpenTelemetry's
// gRPC exporter and more, all of which `go mod tidy` then records in go.mod.
// opkit's examples live in the library's module, so that weight would land on
// every consumer of the library, including one that imports only
// package conditions. This package needs only client-go's typed
// authentication/v1 and authorization/v1 clients, controller-runtime's
// metrics server types and apimachinery's LRU; it implements the two reviews,
// the cache and the status codes, which is all the delegating stack does for
// a metrics endpoint. The behaviour differs in one respect: a failed review
// is not retried inside the request; the scraper's next scrape is the retry.
package metricsauth

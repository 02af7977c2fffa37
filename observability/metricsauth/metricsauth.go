package metricsauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Defaults of [FilterProvider]; see the package documentation for what they bound.
const (
	// DefaultAllowTTL is how long an authenticated token or an allowed
	// request is remembered.
	DefaultAllowTTL = time.Minute
	// DefaultDenyTTL is how long a token the API server did not authenticate,
	// or a request it did not allow, is remembered.
	DefaultDenyTTL = 10 * time.Second
	// DefaultCacheSize bounds each of the two caches (token reviews, access
	// reviews), in entries; the least recently used entry goes first.
	DefaultCacheSize = 1024
	// DefaultTimeout bounds one TokenReview or SubjectAccessReview request.
	DefaultTimeout = 10 * time.Second
)

type options struct {
	allowTTL, denyTTL time.Duration
	cacheSize         int
	timeout           time.Duration
	audiences         []string
	clock             clock.PassiveClock
}

// Option configures [NewFilterProvider].
type Option func(*options)

// WithCacheTTL sets how long an allowed result (allow) and a refused one
// (deny) are cached. Zero or negative disables caching of that kind.
func WithCacheTTL(allow, deny time.Duration) Option {
	return func(o *options) { o.allowTTL, o.denyTTL = allow, deny }
}

// WithCacheSize bounds each of the two caches to n entries (n < 1 means 1).
func WithCacheSize(n int) Option { return func(o *options) { o.cacheSize = max(n, 1) } }

// WithTimeout bounds each review request to d (default [DefaultTimeout]).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithAudiences makes the TokenReview ask for tokens issued for at least one
// of audiences; a token the API server authenticates only for other
// audiences is refused (401). Without it the API server's own audiences
// apply, as for a request to the API server itself.
func WithAudiences(audiences ...string) Option {
	return func(o *options) { o.audiences = append(o.audiences, audiences...) }
}

// WithClock sets the clock the caches' TTLs are measured on (default: the
// real clock).
func WithClock(c clock.PassiveClock) Option { return func(o *options) { o.clock = c } }

// FilterProvider is [NewFilterProvider] with the defaults, for
// metricsserver.Options.FilterProvider. cfg must be allowed to create
// TokenReviews and SubjectAccessReviews (see the package documentation);
// httpClient, when not nil, carries the requests (controller-runtime passes
// the manager's).
func FilterProvider(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	return NewFilterProvider()(cfg, httpClient)
}

// NewFilterProvider returns a function for metricsserver.Options.FilterProvider
// that builds the authenticating and authorising filter with opts. The
// returned function fails only when cfg cannot make a client.
func NewFilterProvider(opts ...Option) func(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	o := options{allowTTL: DefaultAllowTTL, denyTTL: DefaultDenyTTL, cacheSize: DefaultCacheSize, timeout: DefaultTimeout, clock: clock.RealClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	return func(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
		if httpClient == nil {
			var err error
			if httpClient, err = rest.HTTPClientFor(cfg); err != nil {
				return nil, fmt.Errorf("metricsauth: %w", err)
			}
		}
		authn, err := authenticationclient.NewForConfigAndClient(cfg, httpClient)
		if err != nil {
			return nil, fmt.Errorf("metricsauth: %w", err)
		}
		authz, err := authorizationclient.NewForConfigAndClient(cfg, httpClient)
		if err != nil {
			return nil, fmt.Errorf("metricsauth: %w", err)
		}
		a := &authorizer{
			opts:   o,
			tokens: authn.TokenReviews(),
			access: authz.SubjectAccessReviews(),
			users:  cache.NewLRUExpireCacheWithClock(o.cacheSize, o.clock),
			grants: cache.NewLRUExpireCacheWithClock(o.cacheSize, o.clock),
		}
		return a.filter, nil
	}
}

type authorizer struct {
	opts   options
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface
	users  *cache.LRUExpireCache // sha256(token) → user (nil: not authenticated)
	grants *cache.LRUExpireCache // sha256(user, verb, path) → allowed
}

func (a *authorizer) filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := bearerToken(req)
		if !ok {
			unauthorized(w)
			return
		}
		user, err := a.authenticate(req.Context(), token)
		if err != nil {
			log.Error(err, "metrics: token review failed")
			http.Error(w, "Internal Server Error: token review failed", http.StatusInternalServerError)
			return
		}
		if user == nil {
			log.V(4).Info("metrics: unauthenticated request refused", "path", req.URL.Path)
			unauthorized(w)
			return
		}
		verb := strings.ToLower(req.Method)
		allowed, reason, err := a.authorize(req.Context(), user, verb, req.URL.Path)
		if err != nil {
			log.Error(err, "metrics: subject access review failed", "user", user.Username)
			http.Error(w, "Internal Server Error: subject access review failed", http.StatusInternalServerError)
			return
		}
		if !allowed {
			log.V(4).Info("metrics: request forbidden", "user", user.Username, "verb", verb, "path", req.URL.Path, "reason", reason)
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s", user.Username, verb, req.URL.Path), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	}), nil
}

// bearerToken returns the token of an "Authorization: Bearer <token>" header.
// The scheme is case-insensitive (RFC 9110 §11.1).
func bearerToken(req *http.Request) (string, bool) {
	h := req.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
	http.Error(w, "Unauthorized", http.StatusUnauthorized)
}

// authenticate returns the user the API server authenticates token as, nil
// when it does not, or the error of a review that did not complete.
func (a *authorizer) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if v, ok := a.users.Get(key); ok {
		return v.(*authenticationv1.UserInfo), nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.opts.timeout)
	defer cancel()
	review, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: a.opts.audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		// client-go's errors carry the response, never the request body.
		return nil, fmt.Errorf("create TokenReview: %w", err)
	}
	var user *authenticationv1.UserInfo
	if review.Status.Authenticated && audiencesMatch(a.opts.audiences, review.Status.Audiences) {
		u := review.Status.User
		user = &u
	}
	a.remember(a.users, key, user, user != nil)
	return user, nil
}

// audiencesMatch reports whether a review for want returned an acceptable
// audience: any, when none was asked for; else one of want.
func audiencesMatch(want, got []string) bool {
	if len(want) == 0 {
		return true
	}
	return slices.ContainsFunc(got, func(g string) bool { return slices.Contains(want, g) })
}

// authorize asks whether user may verb path, a non-resource URL.
func (a *authorizer) authorize(ctx context.Context, user *authenticationv1.UserInfo, verb, path string) (bool, string, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	key := accessKey(user, verb, path)
	if v, ok := a.grants.Get(key); ok {
		return v.(bool), "cached", nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.opts.timeout)
	defer cancel()
	review, err := a.access.Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  user.Username,
			UID:                   user.UID,
			Groups:                user.Groups,
			Extra:                 extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("create SubjectAccessReview: %w", err)
	}
	allowed := review.Status.Allowed && !review.Status.Denied
	a.remember(a.grants, key, allowed, allowed)
	return allowed, review.Status.Reason, nil
}

func (a *authorizer) remember(c *cache.LRUExpireCache, key string, v any, allowed bool) {
	ttl := a.opts.denyTTL
	if allowed {
		ttl = a.opts.allowTTL
	}
	if ttl > 0 {
		c.Add(key, v, ttl)
	}
}

// accessKey digests everything a SubjectAccessReview decides on. Fields are
// length-prefixed so that no two different inputs share a digest input.
func accessKey(user *authenticationv1.UserInfo, verb, path string) string {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s;", len(s), s) }
	field(user.Username)
	field(user.UID)
	field(fmt.Sprint(len(user.Groups)))
	for _, g := range user.Groups {
		field(g)
	}
	keys := make([]string, 0, len(user.Extra))
	for k := range user.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	field(fmt.Sprint(len(keys)))
	for _, k := range keys {
		field(k)
		field(fmt.Sprint(len(user.Extra[k])))
		for _, v := range user.Extra[k] {
			field(v)
		}
	}
	field(verb)
	field(path)
	return hex.EncodeToString(h.Sum(nil))
}

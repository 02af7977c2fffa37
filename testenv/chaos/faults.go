package chaos

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/opkit/opkit/testenv"
)

// Verbs are the request verbs a [Rule] may name: the API server's resource
// verbs, as [testenv.ClassifyRequest] reports them.
var Verbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// MaxHang bounds [Hang]: a fault never holds a request longer than this.
const MaxHang = 5 * time.Minute

type faultKind int

const (
	kindNone faultKind = iota
	kindStatus
	kindHang
	kindReset
	kindLostResponse
)

// Fault is what an injected request gets instead of (or, for
// [LostResponse], after) the server's answer. Build it with the functions
// below; the zero Fault is invalid.
type Fault struct {
	kind       faultKind
	code       int
	reason     metav1.StatusReason
	retryAfter time.Duration
	hang       time.Duration
}

// Conflict answers 409 Conflict (reason Conflict), as an update with a stale
// resourceVersion gets: apierrors.IsConflict is true for it. The request does
// not reach the server.
func Conflict() Fault {
	return Fault{kind: kindStatus, code: http.StatusConflict, reason: metav1.StatusReasonConflict}
}

// TooManyRequests answers 429 (reason TooManyRequests) with a Retry-After
// header of retryAfter, rounded up to whole seconds, as API Priority and
// Fairness does. client-go retries such responses by itself (up to 10 times,
// waiting Retry-After), so each retry is a new request the rule may match
// again. The request does not reach the server.
func TooManyRequests(retryAfter time.Duration) Fault {
	return Fault{kind: kindStatus, code: http.StatusTooManyRequests, reason: metav1.StatusReasonTooManyRequests, retryAfter: retryAfter}
}

// ServerError answers code, which must be 5xx (500 InternalError, 503
// ServiceUnavailable, …), without Retry-After, so client-go returns it to the
// caller. The request does not reach the server.
func ServerError(code int) Fault {
	reason := metav1.StatusReasonInternalError
	if code == http.StatusServiceUnavailable {
		reason = metav1.StatusReasonServiceUnavailable
	}
	return Fault{kind: kindStatus, code: code, reason: reason}
}

// ServerTimeout answers 504 (reason Timeout), what the API server returns
// when a request outlives its own deadline: apierrors.IsTimeout is true. The
// request does not reach the server.
func ServerTimeout() Fault {
	return Fault{kind: kindStatus, code: http.StatusGatewayTimeout, reason: metav1.StatusReasonTimeout}
}

// Hang holds the request for d (at most [MaxHang]) or until its context ends,
// then fails it with a network timeout error (net.Error.Timeout() is true):
// a client-side timeout against a server that never answers. The request
// does not reach the server.
func Hang(d time.Duration) Fault { return Fault{kind: kindHang, hang: d} }

// ConnectionReset fails the request with ECONNRESET, as a dropped TCP
// connection does; client-go retries idempotent requests (GET) on it. The
// request does not reach the server.
func ConnectionReset() Fault { return Fault{kind: kindReset} }

// LostResponse sends the request to the server, which applies it, and then
// fails it with a network timeout error in place of the response: the
// ambiguous outcome a controller must handle idempotently (a create that
// "failed" but exists, an update that "failed" but happened).
func LostResponse() Fault { return Fault{kind: kindLostResponse} }

func (f Fault) String() string {
	switch f.kind {
	case kindStatus:
		s := fmt.Sprintf("%d %s", f.code, f.reason)
		if f.retryAfter > 0 {
			s += fmt.Sprintf(" (Retry-After %s)", f.retryAfter)
		}
		return s
	case kindHang:
		return fmt.Sprintf("hang %s then timeout", f.hang)
	case kindReset:
		return "connection reset"
	case kindLostResponse:
		return "response lost after the server applied the request"
	default:
		return "invalid fault"
	}
}

func (f Fault) validate() error {
	switch f.kind {
	case kindStatus:
		if f.code < 400 || f.code > 599 {
			return fmt.Errorf("status %d is not an error status (4xx or 5xx)", f.code)
		}
		if f.code == http.StatusTooManyRequests && f.retryAfter < 0 {
			return fmt.Errorf("negative Retry-After %s", f.retryAfter)
		}
		if f.code >= 400 && f.code < 500 && f.code != http.StatusConflict && f.code != http.StatusTooManyRequests {
			return fmt.Errorf("status %d: use Conflict or TooManyRequests for 4xx", f.code)
		}
	case kindHang:
		if f.hang <= 0 || f.hang > MaxHang {
			return fmt.Errorf("hang %s is outside (0, %s]", f.hang, MaxHang)
		}
	case kindReset, kindLostResponse:
	default:
		return errors.New("no fault (use Conflict, TooManyRequests, ServerError, ServerTimeout, Hang, ConnectionReset or LostResponse)")
	}
	return nil
}

// Rule selects requests and the fault they get.
type Rule struct {
	// Verbs the rule matches (see [Verbs]); empty matches every verb.
	// Non-resource requests (discovery, /healthz) never match.
	Verbs []string
	// Resources the rule matches, spelled as [testenv.Request.Resource]:
	// "configmaps", "deployments.apps", "webapps.apps.example.com/status";
	// empty matches every resource. A resource without "/" does not match
	// its subresources.
	Resources []string
	// Probability that a matching request gets the fault, in [0, 1]; 0 means 1.
	Probability float64
	// Count caps how many faults the rule injects; 0 means no cap.
	Count int
	// Fault is what a selected request gets.
	Fault Fault
}

func (r Rule) validate() error {
	for _, v := range r.Verbs {
		if !slices.Contains(Verbs, v) {
			return fmt.Errorf("unknown verb %q (want one of %s)", v, strings.Join(Verbs, ", "))
		}
	}
	for _, res := range r.Resources {
		if res == "" || strings.ContainsAny(res, " \t") || strings.HasPrefix(res, "/") {
			return fmt.Errorf("resource %q is not of the form resource[.group][/subresource]", res)
		}
	}
	if r.Probability < 0 || r.Probability > 1 {
		return fmt.Errorf("probability %v is outside [0, 1]", r.Probability)
	}
	if r.Count < 0 {
		return fmt.Errorf("negative count %d", r.Count)
	}
	return r.Fault.validate()
}

func (r Rule) matches(req testenv.Request) bool {
	if strings.HasPrefix(req.Resource, "/") {
		return false // non-resource request
	}
	if len(r.Verbs) > 0 && !slices.Contains(r.Verbs, req.Verb) {
		return false
	}
	return len(r.Resources) == 0 || slices.Contains(r.Resources, req.Resource)
}

func (r Rule) String() string {
	verbs, res := "*", "*"
	if len(r.Verbs) > 0 {
		verbs = strings.Join(r.Verbs, ",")
	}
	if len(r.Resources) > 0 {
		res = strings.Join(r.Resources, ",")
	}
	s := verbs + " " + res + " → " + r.Fault.String()
	if r.Probability > 0 && r.Probability < 1 {
		s += fmt.Sprintf(" p=%v", r.Probability)
	}
	if r.Count > 0 {
		s += fmt.Sprintf(" ×%d", r.Count)
	}
	return s
}

// Injector injects API faults into the requests sent through the rest.Config
// [InjectErrors] returned. It is safe for concurrent use. Its random choices
// come from one seeded source consumed in request order, so a run that sends
// the same requests in the same order injects the same faults; concurrent
// requests make the order, not the source, vary.
type Injector struct {
	mu       sync.Mutex
	rules    []Rule
	left     []int // faults left per rule; -1 = unlimited
	rng      *rand.Rand
	enabled  bool
	injected map[testenv.Request]int
}

// InjectErrors returns a copy of cfg whose requests pass through an
// [Injector] with rules, checked in order: the first rule that matches a
// request decides (a rule whose Count is used up no longer matches). seed
// makes the choices repeatable. cfg is not changed. An invalid rule (unknown
// verb, probability outside [0, 1], negative count, missing or malformed
// fault) is an error naming the rule.
func InjectErrors(cfg *rest.Config, seed uint64, rules ...Rule) (*rest.Config, *Injector, error) {
	inj := &Injector{
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), //nolint:gosec // reproducible fault choices, not secrets
		enabled:  true,
		injected: map[testenv.Request]int{},
	}
	if err := inj.SetRules(rules...); err != nil {
		return nil, nil, err
	}
	out := rest.CopyConfig(cfg)
	prev := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return &faultTransport{inj: inj, next: rt}
	}
	return out, inj, nil
}

// SetRules replaces the rules (and their remaining counts); the random
// source continues. It validates like [InjectErrors] and changes nothing on error.
func (i *Injector) SetRules(rules ...Rule) error {
	for n, r := range rules {
		if err := r.validate(); err != nil {
			return fmt.Errorf("chaos: rule %d (%s): %w", n, r, err)
		}
	}
	left := make([]int, len(rules))
	for n, r := range rules {
		left[n] = -1
		if r.Count > 0 {
			left[n] = r.Count
		}
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.rules, i.left = slices.Clone(rules), left
	return nil
}

// Disable stops injecting: every request passes untouched until [Injector.Enable].
func (i *Injector) Disable() { i.setEnabled(false) }

// Enable resumes injecting (an Injector starts enabled).
func (i *Injector) Enable() { i.setEnabled(true) }

func (i *Injector) setEnabled(on bool) {
	i.mu.Lock()
	i.enabled = on
	i.mu.Unlock()
}

// Injected returns how many faults were injected in all.
func (i *Injector) Injected() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	n := 0
	for _, v := range i.injected {
		n += v
	}
	return n
}

// InjectedFor returns how many faults requests with this verb and resource got.
func (i *Injector) InjectedFor(verb, resource string) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.injected[testenv.Request{Verb: verb, Resource: resource}]
}

// String lists the faults injected, one "verb resource: n" per line, sorted.
func (i *Injector) String() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	lines := make([]string, 0, len(i.injected))
	for k, v := range i.injected {
		lines = append(lines, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// pick returns the fault for req, if any.
func (i *Injector) pick(req testenv.Request) (Fault, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.enabled {
		return Fault{}, false
	}
	for n, r := range i.rules {
		if i.left[n] == 0 || !r.matches(req) {
			continue
		}
		// Draw for every matching request, so the sequence of choices
		// depends only on the seed and the sequence of matching requests.
		if p := r.Probability; p > 0 && p < 1 && i.rng.Float64() >= p {
			return Fault{}, false
		}
		if i.left[n] > 0 {
			i.left[n]--
		}
		i.injected[req]++
		return r.Fault, true
	}
	return Fault{}, false
}

type faultTransport struct {
	inj  *Injector
	next http.RoundTripper
}

func (t *faultTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	f, ok := t.inj.pick(testenv.ClassifyRequest(req))
	if !ok {
		return t.next.RoundTrip(req)
	}
	if f.kind == kindLostResponse {
		resp, err := t.next.RoundTrip(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
		}
		return nil, &timeoutError{op: req.Method + " " + req.URL.Path + ": response lost"}
	}
	// A RoundTripper must close the body even when it never sends it.
	if req.Body != nil {
		req.Body.Close()
	}
	switch f.kind {
	case kindHang:
		timer := time.NewTimer(f.hang)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
		return nil, &timeoutError{op: req.Method + " " + req.URL.Path}
	case kindReset:
		return nil, fmt.Errorf("chaos: injected: %s %s: %w", req.Method, req.URL.Path, syscall.ECONNRESET)
	default:
		return statusResponse(req, f), nil
	}
}

func statusResponse(req *http.Request, f Fault) *http.Response {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  fmt.Sprintf("chaos: injected %s for %s %s", f, req.Method, req.URL.Path),
		Reason:   f.reason,
		Code:     int32(f.code), //nolint:gosec // validated to be 4xx or 5xx
	}
	h := http.Header{"Content-Type": []string{"application/json"}}
	if f.code == http.StatusTooManyRequests {
		secs := int((f.retryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.Itoa(secs))
		st.Details = &metav1.StatusDetails{RetryAfterSeconds: int32(secs)} //nolint:gosec // bounded by the caller's duration
	}
	body, _ := json.Marshal(st)
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", f.code, http.StatusText(f.code)),
		StatusCode:    f.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(string(body))),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// timeoutError is a network timeout, as net/http reports one.
type timeoutError struct{ op string }

func (e *timeoutError) Error() string   { return "chaos: injected timeout: " + e.op }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

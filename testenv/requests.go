package testenv

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/rest"
)

// Request identifies one kind of API request, as the API server itself
// classifies it.
type Request struct {
	// Verb is the API verb: get, list, watch, create, update, patch, delete,
	// deletecollection; or the lower-case HTTP method for non-resource URLs.
	Verb string
	// Resource is "resource[.group][/subresource]", e.g. "configmaps",
	// "deployments.apps", "webapps.example.com/status"; for non-resource
	// requests it is the URL path.
	Resource string
}

func (r Request) String() string { return r.Verb + " " + r.Resource }

// IsWrite reports whether the request changes state on the server.
func (r Request) IsWrite() bool {
	switch r.Verb {
	case "create", "update", "patch", "delete", "deletecollection", "post", "put":
		return true
	}
	return false
}

// RequestCounter counts the requests sent through a config returned by
// [CountRequests]. Requests are counted when they are sent, whatever the
// response; a watch counts once, when it is opened. It is safe for concurrent use.
type RequestCounter struct {
	mu     sync.Mutex
	counts map[Request]int
	byNS   map[Request]map[string]int
	infos  *request.RequestInfoFactory
}

// CountRequests returns a copy of cfg whose requests c counts. cfg is not changed.
func CountRequests(cfg *rest.Config) (*rest.Config, *RequestCounter) {
	c := &RequestCounter{
		counts: map[Request]int{},
		byNS:   map[Request]map[string]int{},
		infos:  newRequestInfoFactory(),
	}
	out := rest.CopyConfig(cfg)
	prev := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			c.record(req)
			return rt.RoundTrip(req)
		})
	}
	return out, c
}

func newRequestInfoFactory() *request.RequestInfoFactory {
	return &request.RequestInfoFactory{
		APIPrefixes:          sets.NewString("api", "apis"),
		GrouplessAPIPrefixes: sets.NewString("api"),
	}
}

// ClassifyRequest returns the verb and resource of an outgoing API request,
// exactly as [RequestCounter] counts it, so that other transport wrappers
// (fault injection, for one) select requests the same way.
func ClassifyRequest(req *http.Request) Request {
	return classify(newRequestInfoFactory(), req)
}

func classify(infos *request.RequestInfoFactory, req *http.Request) Request {
	key := Request{Verb: strings.ToLower(req.Method), Resource: req.URL.Path}
	if info, err := infos.NewRequestInfo(req); err == nil && info.IsResourceRequest {
		res := info.Resource
		if info.APIGroup != "" {
			res += "." + info.APIGroup
		}
		if info.Subresource != "" {
			res += "/" + info.Subresource
		}
		key = Request{Verb: info.Verb, Resource: res}
	}
	return key
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (c *RequestCounter) record(req *http.Request) {
	key := classify(c.infos, req)
	ns := ""
	if info, err := c.infos.NewRequestInfo(req); err == nil {
		ns = info.Namespace
	}
	c.mu.Lock()
	c.counts[key]++
	if c.byNS[key] == nil {
		c.byNS[key] = map[string]int{}
	}
	c.byNS[key][ns]++
	c.mu.Unlock()
}

// ByNamespace returns how many requests with this verb and resource were
// sent, per namespace; the key "" counts requests not scoped to a namespace
// — for a namespaced resource, cluster-wide lists and watches.
func (c *RequestCounter) ByNamespace(verb, resource string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for ns, n := range c.byNS[Request{Verb: verb, Resource: resource}] {
		out[ns] = n
	}
	return out
}

// Snapshot returns the counts so far.
func (c *RequestCounter) Snapshot() map[Request]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[Request]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// Reset sets every count to zero.
func (c *RequestCounter) Reset() {
	c.mu.Lock()
	c.counts = map[Request]int{}
	c.byNS = map[Request]map[string]int{}
	c.mu.Unlock()
}

// Count returns how many requests with this verb and resource were sent.
func (c *RequestCounter) Count(verb, resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[Request{Verb: verb, Resource: resource}]
}

// Total returns how many requests were sent, of any kind.
func (c *RequestCounter) Total() int { return c.sum(func(Request) bool { return true }) }

// Writes returns how many requests that change state were sent.
func (c *RequestCounter) Writes() int { return c.sum(Request.IsWrite) }

// Verb returns how many requests with this verb were sent, for any resource.
func (c *RequestCounter) Verb(verb string) int {
	return c.sum(func(r Request) bool { return r.Verb == verb })
}

func (c *RequestCounter) sum(match func(Request) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.counts {
		if match(k) {
			n += v
		}
	}
	return n
}

// String lists the counts, one "verb resource: n" per line, sorted.
func (c *RequestCounter) String() string {
	snap := c.Snapshot()
	lines := make([]string, 0, len(snap))
	for k, v := range snap {
		lines = append(lines, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

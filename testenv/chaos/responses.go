package chaos

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/opkit/opkit/testenv"
)

// ResponseCounter counts what the API server answered to the requests sent
// through the config [CountResponses] returned: the HTTP status of every
// response, and every error event inside a watch stream by the code of its
// metav1.Status. A watch that outlives the history it asks for ends with
// such an event (410 Gone, reason Expired: "too old resource version")
// inside a 200 response, which no HTTP status shows; client-go's reflector
// then lists again. It is safe for concurrent use.
type ResponseCounter struct {
	mu        sync.Mutex
	status    map[testenv.Request]map[int]int
	watchErrs map[testenv.Request]map[int]int
	undecoded int
}

// CountResponses returns a copy of cfg whose responses c counts. cfg is not
// changed. Wrappers apply in order, the last one outermost: to count only
// what the server itself answered, call CountResponses before
// [InjectErrors] (whose injected faults then never reach the counter), and
// after it to count them too.
//
// Exact semantics: a response is counted once, by the verb and resource of
// its request ([testenv.ClassifyRequest]) and its HTTP status code, when the
// response headers arrive; a request that got no response (a network error)
// is not counted. The body of a successful watch (200) is decoded as it is
// read, in the media type its Content-Type names (JSON or protobuf, as
// client-go negotiates them), and each ERROR event is counted by its
// Status's code; a stream in a media type it cannot decode is counted by
// [ResponseCounter.Undecoded] and passed through untouched. Counting never
// changes what the client reads.
func CountResponses(cfg *rest.Config) (*rest.Config, *ResponseCounter) {
	c := &ResponseCounter{status: map[testenv.Request]map[int]int{}, watchErrs: map[testenv.Request]map[int]int{}}
	out := rest.CopyConfig(cfg)
	prev := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return &responseTransport{c: c, next: rt}
	}
	return out, c
}

// Status returns how many responses had HTTP status code, for any request.
func (c *ResponseCounter) Status(code int) int { return sum(c, c.status, code) }

// WatchErrors returns how many ERROR events with this Status code arrived
// inside watch streams, for any resource.
func (c *ResponseCounter) WatchErrors(code int) int { return sum(c, c.watchErrs, code) }

// Expired returns how many times the server told a client that the
// resourceVersion it asked for is no longer available (410 Gone, reason
// Expired or Gone — what client-go's reflector treats as "relist"): HTTP
// 410 responses plus ERROR events with code 410 inside watch streams.
func (c *ResponseCounter) Expired() int {
	return c.Status(http.StatusGone) + c.WatchErrors(http.StatusGone)
}

// ExpiredFor returns [ResponseCounter.Expired] for one resource (spelled as
// [testenv.Request.Resource]), over every verb.
func (c *ResponseCounter) ExpiredFor(resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range []map[testenv.Request]map[int]int{c.status, c.watchErrs} {
		for req, codes := range m {
			if req.Resource == resource {
				n += codes[http.StatusGone]
			}
		}
	}
	return n
}

// Undecoded returns how many watch streams were not decoded (an unknown
// media type): their error events are not counted.
func (c *ResponseCounter) Undecoded() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.undecoded
}

// String lists the counts, one "verb resource: code ×n" (HTTP responses)
// or "verb resource: watch ERROR code ×n" line each, sorted.
func (c *ResponseCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lines []string
	for req, codes := range c.status {
		for code, n := range codes {
			lines = append(lines, fmt.Sprintf("%s: %d ×%d", req, code, n))
		}
	}
	for req, codes := range c.watchErrs {
		for code, n := range codes {
			lines = append(lines, fmt.Sprintf("%s: watch ERROR %d ×%d", req, code, n))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func sum(c *ResponseCounter, m map[testenv.Request]map[int]int, code int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, codes := range m {
		n += codes[code]
	}
	return n
}

func (c *ResponseCounter) add(m map[testenv.Request]map[int]int, req testenv.Request, code int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m[req] == nil {
		m[req] = map[int]int{}
	}
	m[req][code]++
}

type responseTransport struct {
	c    *ResponseCounter
	next http.RoundTripper
}

func (t *responseTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp == nil {
		return resp, err
	}
	key := testenv.ClassifyRequest(req)
	t.c.add(t.c.status, key, resp.StatusCode)
	if key.Verb == "watch" && resp.StatusCode == http.StatusOK && resp.Body != nil {
		if info, ok := streamInfo(resp.Header.Get("Content-Type")); ok {
			resp.Body = newWatchTap(resp.Body, info, func(code int) { t.c.add(t.c.watchErrs, key, code) })
		} else {
			t.c.mu.Lock()
			t.c.undecoded++
			t.c.mu.Unlock()
		}
	}
	return resp, nil
}

// watchCodecs decode watch events and the Status inside an ERROR event;
// nothing else needs to be known to count them.
var watchCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(s)
}()

func streamInfo(contentType string) (runtime.SerializerInfo, bool) {
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return runtime.SerializerInfo{}, false
	}
	info, ok := runtime.SerializerInfoForMediaType(watchCodecs.SupportedMediaTypes(), mediaType)
	if !ok || info.StreamSerializer == nil || info.Serializer == nil {
		return runtime.SerializerInfo{}, false
	}
	return info, true
}

// watchTap passes a watch body through unchanged and feeds a copy to a
// decoder goroutine, which ends when the body is closed or fails.
type watchTap struct {
	body io.ReadCloser
	pw   *io.PipeWriter
	once sync.Once
	done chan struct{}
}

func newWatchTap(body io.ReadCloser, info runtime.SerializerInfo, onError func(code int)) *watchTap {
	pr, pw := io.Pipe()
	t := &watchTap{body: body, pw: pw, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		dec := streaming.NewDecoder(info.StreamSerializer.NewFrameReader(pr), info.StreamSerializer.Serializer)
		for {
			var ev metav1.WatchEvent
			if _, _, err := dec.Decode(nil, &ev); err != nil {
				// The end of the stream, or a frame this decoder cannot
				// read: stop decoding, keep draining so the client's reads
				// are never held up.
				break
			}
			if ev.Type != string(watch.Error) {
				continue
			}
			obj, err := runtime.Decode(info.Serializer, ev.Object.Raw)
			if err != nil {
				continue
			}
			if st, ok := obj.(*metav1.Status); ok {
				code := int(st.Code)
				// What client-go's reflector treats as "relist", whatever the code says.
				if err := apierrors.FromObject(st); apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					code = http.StatusGone
				}
				onError(code)
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	return t
}

func (t *watchTap) Read(p []byte) (int, error) {
	n, err := t.body.Read(p)
	if n > 0 {
		// The decoder drains the pipe until it is closed, so this never
		// blocks for long.
		_, _ = t.pw.Write(p[:n])
	}
	if err != nil {
		t.finish(err)
	}
	return n, err
}

func (t *watchTap) Close() error {
	err := t.body.Close()
	t.finish(io.EOF)
	return err
}

func (t *watchTap) finish(err error) {
	t.once.Do(func() {
		if errors.Is(err, io.EOF) {
			_ = t.pw.Close()
		} else {
			_ = t.pw.CloseWithError(err)
		}
		<-t.done
	})
}

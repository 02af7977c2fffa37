package external_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/external"
	"github.com/opkit/opkit/reconciler"
)

// widgetAPI is the external system of the tests: an in-memory widget API
// with idempotent creates (by token), injectable faults and a call log.
type widgetAPI struct {
	mu     sync.Mutex
	items  map[string]*item
	calls  []call
	serial int

	quota          int           // max widgets; 0: unlimited
	throttleNext   int           // next calls answer 429
	retryAfter     time.Duration // of the 429s
	failNext       int           // next calls answer 503
	loseCreate     bool          // next create makes the widget, then its answer is lost
	dropCreate     bool          // next create times out before it reaches the API
	deleteObserves int           // a deleted widget stays "deleting" for this many observes
	ignoreToken    bool          // creates are not idempotent
}

type item struct {
	token, color string
	size         int
	secret       string
	deleting     int
}

type call struct {
	at     time.Time
	op     string
	name   string
	status int
}

// apiError is the API's error answer.
type apiError struct {
	status     int
	code       string
	retryAfter time.Duration
}

func (e *apiError) Error() string { return fmt.Sprintf("widget API: %d %s", e.status, e.code) }

func newAPI() *widgetAPI { return &widgetAPI{items: map[string]*item{}} }

// Classify is the API's Classifier.
func (a *widgetAPI) Classify(err error) external.Failure {
	var e *apiError
	if !errors.As(err, &e) {
		return external.Failure{}
	}
	switch {
	case e.status == 429:
		return external.Failure{Kind: external.Throttled, Code: e.code, RetryAfter: e.retryAfter}
	case e.status >= 500:
		return external.Failure{Kind: external.Retryable, Code: e.code}
	default:
		return external.Failure{Kind: external.Terminal, Code: e.code}
	}
}

// enter logs a call and returns the injected fault, if any.
func (a *widgetAPI) enter(op, name string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := call{at: time.Now(), op: op, name: name, status: 200}
	var err error
	switch {
	case a.throttleNext > 0:
		a.throttleNext--
		c.status, err = 429, &apiError{status: 429, code: "SlowDown", retryAfter: a.retryAfter}
	case a.failNext > 0:
		a.failNext--
		c.status, err = 503, &apiError{status: 503, code: "ServiceUnavailable"}
	}
	a.calls = append(a.calls, c)
	return err
}

func (a *widgetAPI) callLog() []call {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]call(nil), a.calls...)
}

func (a *widgetAPI) count(op string) int {
	n := 0
	for _, c := range a.callLog() {
		if op == "" || c.op == op {
			n++
		}
	}
	return n
}

func (a *widgetAPI) get(name string) (item, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	it, ok := a.items[name]
	if !ok {
		return item{}, false
	}
	return *it, true
}

func (a *widgetAPI) set(fn func(a *widgetAPI)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fn(a)
}

func (a *widgetAPI) client() external.Client[*Widget] {
	return external.ClientFns[*Widget]{
		ObserveFn: func(_ context.Context, w *Widget, name string) (external.Observation, error) {
			if err := a.enter("observe", name); err != nil {
				return external.Observation{}, err
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			it, ok := a.items[name]
			switch {
			case !ok:
				return external.Observation{}, nil
			case it.token != external.Token(w):
				return external.Observation{Exists: true, Foreign: true}, nil
			case it.deleting > 0:
				if it.deleting--; it.deleting == 0 {
					delete(a.items, name)
				}
				return external.Observation{Exists: true, Deleting: true}, nil
			}
			obs := external.Observation{Exists: true, UpToDate: it.color == w.Spec.Color,
				ConnectionDetails: external.ConnectionDetails{"password": []byte(it.secret)}}
			if !obs.UpToDate {
				obs.Diff = "color " + it.color + "→" + w.Spec.Color
			}
			if w.Spec.Size == 0 {
				w.Spec.Size, obs.LateInitialized = it.size, true
			}
			return obs, nil
		},
		CreateFn: func(_ context.Context, w *Widget, req external.CreateRequest) (external.Creation, error) {
			if err := a.enter("create", req.Name); err != nil {
				return external.Creation{}, err
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			if a.dropCreate {
				a.dropCreate = false
				return external.Creation{}, context.DeadlineExceeded
			}
			if it, ok := a.items[req.Name]; ok {
				if it.token == req.Token && !a.ignoreToken {
					return external.Creation{ConnectionDetails: external.ConnectionDetails{"password": []byte(it.secret)}}, nil
				}
				return external.Creation{}, &apiError{status: 409, code: "AlreadyExists"}
			}
			if a.quota > 0 && len(a.items) >= a.quota {
				return external.Creation{}, &apiError{status: 403, code: "QuotaExceeded"}
			}
			a.serial++
			size := w.Spec.Size
			if size == 0 {
				size = 3 // the API's default
			}
			it := &item{token: req.Token, color: w.Spec.Color, size: size, secret: fmt.Sprintf("pw-%d-%s", a.serial, strings.Repeat("x", 12))}
			a.items[req.Name] = it
			if a.loseCreate {
				a.loseCreate = false
				return external.Creation{}, context.Canceled // the process died with the answer in flight
			}
			return external.Creation{ConnectionDetails: external.ConnectionDetails{"password": []byte(it.secret)}}, nil
		},
		UpdateFn: func(_ context.Context, w *Widget, name string) (external.Update, error) {
			if err := a.enter("update", name); err != nil {
				return external.Update{}, err
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			if it, ok := a.items[name]; ok {
				it.color = w.Spec.Color
			}
			return external.Update{}, nil
		},
		DeleteFn: func(_ context.Context, _ *Widget, name string) error {
			if err := a.enter("delete", name); err != nil {
				return err
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			if it, ok := a.items[name]; ok {
				if a.deleteObserves == 0 {
					delete(a.items, name)
				} else if it.deleting == 0 {
					it.deleting = a.deleteObserves
				}
			}
			return nil
		},
	}
}

// eventLog is an events.EventRecorder that keeps what it is given.
type eventLog struct {
	mu     sync.Mutex
	events []string // "Type Reason: note"
}

func (l *eventLog) Eventf(_ runtime.Object, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, eventtype+" "+reason+": "+fmt.Sprintf(note, args...))
}

func (l *eventLog) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.events, "\n")
}

func (l *eventLog) has(typeAndReason string) bool {
	return strings.Contains("\n"+l.all(), "\n"+typeAndReason+":")
}

// fixture is a reconciler of Widgets against api, built on a direct client
// (Reconcile is called by hand).
type fixture struct {
	api    *widgetAPI
	events *eventLog
	logs   *syncBuffer
	r      *reconciler.Reconciler[*Widget]
	ns     string
}

func newFixture(t *testing.T, opts ...external.Option) *fixture {
	t.Helper()
	f := &fixture{api: newAPI(), events: &eventLog{}, logs: &syncBuffer{}, ns: env.Namespace(t)}
	conn := external.ConnectorFn[*Widget](func(context.Context, *Widget) (external.Client[*Widget], error) { return f.api.client(), nil })
	base := []external.Option{
		external.WithClassifier(f.api),
		external.WithEventRecorder(f.events),
		external.WithConnectionSecret(func(w *Widget) string { return w.Name + "-connection" }),
		external.WithPolicy(func(w *Widget) external.Policy {
			return external.Policy{Orphan: w.Spec.Orphan, ObserveOnly: w.Spec.ObserveOnly}
		}),
		external.WithProgressPollInterval(50 * time.Millisecond),
	}
	r, err := reconciler.ForClient(env.Client, "widget", func() *Widget { return &Widget{} }).
		External(conn, append(base, opts...)...).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	f.r = r
	return f
}

func (f *fixture) create(t *testing.T, name string, mutate func(*Widget)) *Widget {
	t.Helper()
	w := &Widget{}
	w.Namespace, w.Name, w.Spec.Color = f.ns, name, "red"
	if mutate != nil {
		mutate(w)
	}
	if err := env.Client.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	return w
}

// reconcile runs one reconcile of w and reads w back (w is left as it was
// when the object is gone).
func (f *fixture) reconcile(t *testing.T, w *Widget) (reconcile.Result, error) {
	t.Helper()
	logger := funcr.New(func(prefix, args string) { f.logs.write(prefix + " " + args + "\n") }, funcr.Options{Verbosity: 10})
	ctx := log.IntoContext(t.Context(), logger)
	res, err := f.r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
	if err != nil {
		f.logs.write("reconcile error: " + err.Error() + "\n")
	}
	_ = env.Client.Get(t.Context(), client.ObjectKeyFromObject(w), w)
	return res, err
}

// converge reconciles w until fn says so, or fails after 40 reconciles.
func (f *fixture) converge(t *testing.T, w *Widget, what string, fn func(*Widget) bool) {
	t.Helper()
	for range 40 {
		res, _ := f.reconcile(t, w)
		if fn(w) {
			return
		}
		time.Sleep(min(res.RequeueAfter, 100*time.Millisecond) + 10*time.Millisecond)
	}
	t.Fatalf("%s: not reached; widget %+v, calls %+v, events:\n%s", what, w, f.api.callLog(), f.events.all())
}

// syncBuffer collects log lines from concurrent reconciles.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) write(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

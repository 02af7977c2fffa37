package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/observability"
)

// maxRecorded bounds the overlaps and panics a monitor keeps (it still counts
// all of them).
const maxRecorded = 100

// ReconcileMonitor watches reconciles as they run: how many per object, how
// many at once per object, and panics. Feed it by wrapping a reconciler
// ([ReconcileMonitor.Wrap]) or, for reconcilers built by opkit's reconciler
// package, through observability's tracer ([ReconcileMonitor.TracerProvider]).
// One monitor may watch several managers (e.g. a leader and its standby): an
// object reconciled by two of them at once is an overlap. It is safe for
// concurrent use.
type ReconcileMonitor struct {
	mu       sync.Mutex
	started  map[types.NamespacedName]int
	inflight map[types.NamespacedName]int
	running  int
	total    int
	overlaps []string
	nOverlap int
	panics   []string
	nPanic   int
	wake     chan struct{} // closed and replaced whenever a reconcile starts
}

// NewReconcileMonitor returns an empty monitor.
func NewReconcileMonitor() *ReconcileMonitor {
	return &ReconcileMonitor{
		started:  map[types.NamespacedName]int{},
		inflight: map[types.NamespacedName]int{},
		wake:     make(chan struct{}),
	}
}

// Wrap returns r observed by m. A panic in r is recorded and re-raised, so
// controller-runtime's own recovery (or crash) still applies.
func (m *ReconcileMonitor) Wrap(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
		m.begin(req.NamespacedName)
		panicked := true
		defer func() {
			if panicked {
				p := recover()
				m.end(req.NamespacedName, fmt.Sprint(p))
				panic(p)
			}
			m.end(req.NamespacedName, "")
		}()
		res, err = r.Reconcile(ctx, req)
		panicked = false
		return res, err
	})
}

func (m *ReconcileMonitor) begin(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.started[key]++
	m.total++
	m.running++
	m.inflight[key]++
	if n := m.inflight[key]; n > 1 {
		m.nOverlap++
		if len(m.overlaps) < maxRecorded {
			m.overlaps = append(m.overlaps, fmt.Sprintf("%s: %d reconciles at once at %s", key, n, time.Now().Format(time.TimeOnly)))
		}
	}
	close(m.wake)
	m.wake = make(chan struct{})
}

func (m *ReconcileMonitor) end(key types.NamespacedName, panicValue string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running--
	if m.inflight[key]--; m.inflight[key] <= 0 {
		delete(m.inflight, key)
	}
	if panicValue != "" {
		m.nPanic++
		if len(m.panics) < maxRecorded {
			m.panics = append(m.panics, fmt.Sprintf("%s: %s", key, panicValue))
		}
	}
}

// Reconciles returns how many reconciles of key have started.
func (m *ReconcileMonitor) Reconciles(key types.NamespacedName) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.started[key]
}

// Total returns how many reconciles have started, of any object.
func (m *ReconcileMonitor) Total() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total
}

// InFlight returns how many reconciles are running now.
func (m *ReconcileMonitor) InFlight() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running
}

// WaitInFlight blocks until a reconcile is running, or ctx ends (its error is
// returned): use it to inject a fault mid-reconcile.
func (m *ReconcileMonitor) WaitInFlight(ctx context.Context) error {
	for {
		m.mu.Lock()
		running, wake := m.running, m.wake
		m.mu.Unlock()
		if running > 0 {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitIdle blocks until the given key has no reconcile running and has
// started more than after reconciles, or ctx ends. It polls every 20ms.
func (m *ReconcileMonitor) WaitIdle(ctx context.Context, key types.NamespacedName, after int) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		m.mu.Lock()
		done := m.started[key] > after && m.inflight[key] == 0
		m.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("chaos: %s not reconciled to completion: %w", key, ctx.Err())
		}
	}
}

// Mark is a point in a monitor's history; see [ReconcileMonitor.Since].
type Mark struct{ started map[types.NamespacedName]int }

// Mark returns the current reconcile counts, to measure a window from.
func (m *ReconcileMonitor) Mark() Mark {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[types.NamespacedName]int, len(m.started))
	for k, v := range m.started {
		out[k] = v
	}
	return Mark{started: out}
}

// Since returns the reconciles per object started after mk (objects with
// none are absent).
func (m *ReconcileMonitor) Since(mk Mark) map[types.NamespacedName]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[types.NamespacedName]int{}
	for k, v := range m.started {
		if d := v - mk.started[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// CheckNoHotLoop returns an error naming every object reconciled more than
// max times since mk: a controller that requeues itself without bound (a
// status write that triggers its own watch, a conflict retried at once
// forever) shows up here.
func (m *ReconcileMonitor) CheckNoHotLoop(mk Mark, maxPerObject int) error {
	var hot []string
	for k, n := range m.Since(mk) {
		if n > maxPerObject {
			hot = append(hot, fmt.Sprintf("%s: %d", k, n))
		}
	}
	if len(hot) == 0 {
		return nil
	}
	sort.Strings(hot)
	return fmt.Errorf("chaos: hot loop: %d objects reconciled more than %d times in the window: %s", len(hot), maxPerObject, strings.Join(hot, ", "))
}

// CheckNoOverlap returns an error when an object was ever reconciled twice at
// once (within one manager controller-runtime's queue forbids it; across
// managers leader election must).
func (m *ReconcileMonitor) CheckNoOverlap() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.nOverlap == 0 {
		return nil
	}
	return fmt.Errorf("chaos: %d concurrent reconciles of one object: %s", m.nOverlap, strings.Join(m.overlaps, "; "))
}

// CheckNoPanic returns an error when a reconcile panicked, even if the panic
// was recovered (controller-runtime recovers by default and retries).
func (m *ReconcileMonitor) CheckNoPanic() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.nPanic == 0 {
		return nil
	}
	return fmt.Errorf("chaos: %d reconciles panicked: %s", m.nPanic, strings.Join(m.panics, "; "))
}

// Check joins CheckNoOverlap and CheckNoPanic.
func (m *ReconcileMonitor) Check() error {
	return errors.Join(m.CheckNoOverlap(), m.CheckNoPanic())
}

// TracerProvider returns a tracer provider for
// observability.WithTracerProvider that feeds m from the reconcile spans of
// [observability.Observability.Wrap] (span "reconcile <controller>", object
// in [observability.AttrObjectNamespace] and [observability.AttrObjectName],
// [observability.ClassPanic] in [observability.AttrResult] for a panic). It
// records nothing else and exports nothing: every span it returns is a no-op.
func (m *ReconcileMonitor) TracerProvider() trace.TracerProvider {
	return tracerProvider{m: m}
}

type tracerProvider struct {
	embedded.TracerProvider
	m *ReconcileMonitor
}

func (p tracerProvider) Tracer(string, ...trace.TracerOption) trace.Tracer {
	return tracer{m: p.m, noop: noop.NewTracerProvider().Tracer("")}
}

type tracer struct {
	embedded.Tracer
	m    *ReconcileMonitor
	noop trace.Tracer
}

func (t tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, inner := t.noop.Start(ctx, name, opts...)
	if !strings.HasPrefix(name, "reconcile ") {
		return ctx, inner
	}
	var key types.NamespacedName
	cfg := trace.NewSpanStartConfig(opts...)
	for _, kv := range cfg.Attributes() {
		switch kv.Key {
		case observability.AttrObjectNamespace:
			key.Namespace = kv.Value.AsString()
		case observability.AttrObjectName:
			key.Name = kv.Value.AsString()
		}
	}
	if key.Name == "" {
		return ctx, inner
	}
	t.m.begin(key)
	s := &reconcileSpan{Span: inner, m: t.m, key: key}
	return trace.ContextWithSpan(ctx, s), s
}

type reconcileSpan struct {
	trace.Span
	m *ReconcileMonitor

	mu     sync.Mutex
	key    types.NamespacedName
	result string
	ended  bool
	errMsg string
}

func (s *reconcileSpan) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range kv {
		if a.Key == observability.AttrResult {
			s.result = a.Value.AsString()
		}
	}
}

func (s *reconcileSpan) RecordError(err error, _ ...trace.EventOption) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errMsg = err.Error()
	}
}

func (s *reconcileSpan) End(...trace.SpanEndOption) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	p := ""
	if s.result == observability.ClassPanic {
		p = s.errMsg
		if p == "" {
			p = "panic"
		}
	}
	s.mu.Unlock()
	s.m.end(s.key, p)
}

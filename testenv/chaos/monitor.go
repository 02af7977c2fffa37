package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// maxRecorded bounds the overlaps and panics a monitor keeps (it still counts
// all of them).
const maxRecorded = 100

// ReconcileMonitor watches reconciles as they run: how many per object, how
// many at once per object, and panics. It needs nothing from the operator
// but controller-runtime: feed it from controller-runtime's own per-reconcile
// log lines by giving the manager [ReconcileMonitor.Logger] (no change to the
// operator's code; works for any controller built by controller-runtime's
// builder or controller.New), or wrap a reconciler ([ReconcileMonitor.Wrap]).
// Feed one controller one way, not both, or each reconcile counts twice.
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
	wake     chan struct{}                   // closed and replaced whenever a reconcile starts
	logged   map[string]types.NamespacedName // reconcileID -> object, for reconciles fed by Logger and not ended yet
}

// NewReconcileMonitor returns an empty monitor.
func NewReconcileMonitor() *ReconcileMonitor {
	return &ReconcileMonitor{
		started:  map[types.NamespacedName]int{},
		inflight: map[types.NamespacedName]int{},
		wake:     make(chan struct{}),
		logged:   map[string]types.NamespacedName{},
	}
}

// Wrap returns r observed by m. A panic in r is recorded and re-raised, so
// controller-runtime's own recovery (or crash) still applies.
func (m *ReconcileMonitor) Wrap(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
		m.begin(req.NamespacedName)
		returned := false
		defer func() {
			if returned {
				m.end(req.NamespacedName, false, "")
				return
			}
			// Since Go 1.21 recover is nil only for runtime.Goexit (e.g.
			// t.FailNow in a test's reconciler), which is not a panic.
			p := recover()
			m.end(req.NamespacedName, p != nil, fmt.Sprint(p))
			if p != nil {
				panic(p)
			}
		}()
		res, err = r.Reconcile(ctx, req)
		returned = true
		return res, err
	})
}

func (m *ReconcileMonitor) begin(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.beginLocked(key)
}

func (m *ReconcileMonitor) beginLocked(key types.NamespacedName) {
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

func (m *ReconcileMonitor) end(key types.NamespacedName, panicked bool, panicValue string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.endLocked(key, panicked, panicValue)
}

func (m *ReconcileMonitor) endLocked(key types.NamespacedName, panicked bool, panicValue string) {
	m.running--
	if m.inflight[key]--; m.inflight[key] <= 0 {
		delete(m.inflight, key)
	}
	if panicked {
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

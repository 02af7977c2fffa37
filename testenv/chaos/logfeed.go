package chaos

import (
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
)

// The lines controller-runtime's reconcile worker logs around every call of a
// reconciler (pkg/internal/controller, reconcileHandler and Reconcile). All of
// them go to the per-reconcile logger, which carries "reconcileID".
const (
	crReconciling     = "Reconciling"                      // V(5), before the call
	crSuccess         = "Reconcile successful"             // V(5), after: nil error, no requeue
	crDonePrefix      = "Reconcile done"                   // V(5), after: "…, requeueing" or "…, requeueing after <d>"
	crError           = "Reconciler error"                 // Error, after: any error, a recovered panic included
	crPanicPrefix     = "Observed a panic in reconciler: " // Info, after: a panic with RecoverPanic=false (re-raised)
	crRecoveredPrefix = "panic: "                          // a recovered panic's error: "panic: <value> [recovered]"
	crRecoveredSuffix = " [recovered]"
	crKeyNamespace    = "namespace" // the default LogConstructor's keys for a reconcile.Request
	crKeyName         = "name"
	crKeyReconcileID  = "reconcileID"
)

// Logger returns a logger to give controller-runtime in place of inner — as
// the manager's logger (manager.Options.Logger), which every controller the
// manager builds derives its loggers from, or as one controller's
// (controller.Options.Logger) — that feeds m from controller-runtime's own
// reconcile log lines. Every line still reaches inner unchanged; inner's
// verbosity decides, as before, which lines it writes.
//
// Exact semantics: controller-runtime's worker logs, on a logger that carries
// the request's "namespace" and "name" (its default log constructor adds
// them) and a fresh "reconcileID", the line "Reconciling" (verbosity 5) just
// before it calls the reconciler, and just after it exactly one of "Reconcile
// successful", "Reconcile done, requeueing[ after …]" (verbosity 5) or the
// error "Reconciler error". m counts a reconcile of that object from the first
// line to the second, per reconcileID; a second "Reconciling" on the same
// reconcileID (the reconciler logging through the context's logger) changes
// nothing. A panic the controller recovers (its default) ends in "Reconciler
// error" with the error "panic: <value> [recovered]" and is recorded as a
// panic with that value; with RecoverPanic=false, controller-runtime's
// "Observed a panic in reconciler: <value>" records it before the panic
// propagates. Reconciles of a controller with its own LogConstructor that
// drops "name" are not seen. The lines are those of the controller-runtime
// version this module requires; the package's tests pin them against it.
func (m *ReconcileMonitor) Logger(inner logr.Logger) logr.Logger {
	sink := inner.GetSink()
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1) // callers see through the monitor's frame
	}
	return logr.New(&monitorSink{m: m, inner: sink})
}

// monitorSink passes every call on to inner and watches the values and
// messages of controller-runtime's per-reconcile loggers.
type monitorSink struct {
	m     *ReconcileMonitor
	inner logr.LogSink // nil: discard

	key types.NamespacedName
	id  string // reconcileID, "" when not a per-reconcile logger
}

var (
	_ logr.LogSink          = (*monitorSink)(nil)
	_ logr.CallDepthLogSink = (*monitorSink)(nil)
)

// Init does nothing: inner was initialised when its own logger was made.
func (s *monitorSink) Init(logr.RuntimeInfo) {}

// Enabled is true at every level, so that controller-runtime's verbosity-5
// lines reach the monitor whatever inner's verbosity; Info asks inner.
func (s *monitorSink) Enabled(int) bool { return true }

func (s *monitorSink) Info(level int, msg string, kv ...any) {
	if s.id != "" && s.key.Name != "" {
		switch {
		case msg == crReconciling:
			s.m.logBegin(s.id, s.key)
		case msg == crSuccess || strings.HasPrefix(msg, crDonePrefix):
			s.m.logEnd(s.id, false, "")
		case strings.HasPrefix(msg, crPanicPrefix):
			s.m.logEnd(s.id, true, strings.TrimPrefix(msg, crPanicPrefix))
		}
	}
	if s.inner != nil && s.inner.Enabled(level) {
		s.inner.Info(level, msg, kv...)
	}
}

func (s *monitorSink) Error(err error, msg string, kv ...any) {
	if s.id != "" && s.key.Name != "" && msg == crError {
		panicked, value := false, ""
		if err != nil {
			if e := err.Error(); strings.HasPrefix(e, crRecoveredPrefix) && strings.HasSuffix(e, crRecoveredSuffix) {
				panicked, value = true, strings.TrimSuffix(strings.TrimPrefix(e, crRecoveredPrefix), crRecoveredSuffix)
			}
		}
		s.m.logEnd(s.id, panicked, value)
	}
	if s.inner != nil {
		s.inner.Error(err, msg, kv...)
	}
}

func (s *monitorSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	for i := 0; i+1 < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			continue
		}
		switch k {
		case crKeyNamespace:
			c.key.Namespace = fmt.Sprint(kv[i+1])
		case crKeyName:
			c.key.Name = fmt.Sprint(kv[i+1])
		case crKeyReconcileID:
			c.id = fmt.Sprint(kv[i+1])
		}
	}
	if c.inner != nil {
		c.inner = c.inner.WithValues(kv...)
	}
	return &c
}

func (s *monitorSink) WithName(name string) logr.LogSink {
	c := *s
	if c.inner != nil {
		c.inner = c.inner.WithName(name)
	}
	return &c
}

func (s *monitorSink) WithCallDepth(depth int) logr.LogSink {
	c := *s
	if cd, ok := c.inner.(logr.CallDepthLogSink); ok {
		c.inner = cd.WithCallDepth(depth)
	}
	return &c
}

// logBegin starts a reconcile of key seen in the log, once per reconcileID.
func (m *ReconcileMonitor) logBegin(id string, key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, seen := m.logged[id]; seen {
		return
	}
	m.logged[id] = key
	m.beginLocked(key)
}

// logEnd ends the reconcile begun under id, if it is running.
func (m *ReconcileMonitor) logEnd(id string, panicked bool, panicValue string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key, ok := m.logged[id]
	if !ok {
		return
	}
	delete(m.logged, id)
	m.endLocked(key, panicked, panicValue)
}

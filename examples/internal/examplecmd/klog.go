package examplecmd

import (
	"sync/atomic"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// klog's logger is process-wide and klog.SetLogger is not safe while other
// goroutines log (an earlier manager's event broadcaster shutting down, in a
// test binary that runs a demo after other tests). So klog is pointed once,
// at package initialisation — before any goroutine of this process can
// log — at a sink that forwards to whatever logger setLogger chose last;
// changing that target is an atomic store.
var klogTarget atomic.Pointer[logr.Logger]

func init() { klog.SetLogger(logr.New(forwardSink{})) }

// forwardSink is a logr.LogSink that sends each record to klogTarget's
// logger at the time of the call, with the names and values accumulated
// through WithName and WithValues; without a target it drops records.
type forwardSink struct {
	names  []string
	values []any
}

func (s forwardSink) target() (logr.Logger, bool) {
	p := klogTarget.Load()
	if p == nil {
		return logr.Discard(), false
	}
	l := *p
	for _, n := range s.names {
		l = l.WithName(n)
	}
	return l.WithValues(s.values...), true
}

func (forwardSink) Init(logr.RuntimeInfo) {}

func (s forwardSink) Enabled(level int) bool {
	l, ok := s.target()
	return ok && l.V(level).Enabled()
}

func (s forwardSink) Info(level int, msg string, kv ...any) {
	if l, ok := s.target(); ok {
		l.V(level).Info(msg, kv...)
	}
}

func (s forwardSink) Error(err error, msg string, kv ...any) {
	if l, ok := s.target(); ok {
		l.Error(err, msg, kv...)
	}
}

func (s forwardSink) WithValues(kv ...any) logr.LogSink {
	s.values = append(append([]any(nil), s.values...), kv...)
	return s
}

func (s forwardSink) WithName(name string) logr.LogSink {
	s.names = append(append([]string(nil), s.names...), name)
	return s
}

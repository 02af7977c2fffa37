package testenv

import (
	"fmt"
	"os"

	"go.uber.org/goleak"
)

// WithIgnoredGoroutines exempts goroutines whose stack contains any of the
// given functions (fully qualified, as goleak prints them) from [RunMain]'s
// leak check — for a goroutine a package starts once and keeps by design.
func WithIgnoredGoroutines(functions ...string) Option {
	return func(o *options) { o.ignoredGoroutines = append(o.ignoredGoroutines, functions...) }
}

// leakOptions are the goroutines that outlive a test package by design or
// by an upstream flaw no test can avoid: keep-alive connections of
// client-go's shared transports (closed by the server, a moment after it
// stopped), klog's flush daemon, and apimachinery's watch.Filter loop, which
// controller-runtime wraps around metadata-only informers' watches: Stop
// stops the upstream watch, but a loop blocked sending an event nobody reads
// any more never returns (k8s.io/apimachinery/pkg/watch/filter.go).
func leakOptions(extra []string) []goleak.Option {
	opts := []goleak.Option{
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*http2ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run"),
		goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"),
	}
	for _, f := range extra {
		opts = append(opts, goleak.IgnoreAnyFunction(f))
	}
	return opts
}

// checkLeaks reports goroutines started while the package's tests ran that
// are still running after they ended and the control plane stopped: a
// manager, informer, watch or server a test did not stop. It prints them
// and returns false.
func checkLeaks(before goleak.Option, extra []string) bool {
	err := goleak.Find(append(leakOptions(extra), before)...)
	if err == nil {
		return true
	}
	fmt.Fprintf(os.Stderr, "testenv: goroutines leaked by the tests (a manager, informer or server not stopped):\n%v\n", err)
	return false
}

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

// watchFilterLoop is apimachinery's watch.Filter loop, which
// controller-runtime wraps around metadata-only informers' watches: Stop
// stops the upstream watch, but a loop blocked sending an event nobody reads
// any more never returns (k8s.io/apimachinery/pkg/watch/filter.go).
const watchFilterLoop = "k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"

// multiNamespaceSyncWaiters are the goroutines controller-runtime's
// multi-namespace cache starts per informer and per handler registration to
// close its synced channel once every namespace's informer (or handler) has
// synced (sigs.k8s.io/controller-runtime/pkg/cache/multi_namespace_cache.go):
// they take no stop, so a cache stopped before all of them synced leaves them
// waiting for good. Seen once in the sharding package's CI run of 2026-12-07
// 20:14 (a shard's cache stopped while syncing); an upstream flaw like the
// watch.Filter loop, not a manager a test forgot to stop.
var multiNamespaceSyncWaiters = []string{
	"sigs.k8s.io/controller-runtime/pkg/cache.newMultiNamespaceInformer.func1",
	"sigs.k8s.io/controller-runtime/pkg/cache.newMultiNamespaceInformerHandlerRegistration.func1",
}

// LeakOptions returns goleak options that do not count the goroutines which
// outlive a manager, informer or client by design: keep-alive connections of
// client-go's shared transports (net/http's and x/net/http2's connection
// read and write loops, closed by the server a moment after it stopped) and
// klog's flush daemon; each function in ignored (fully qualified, as goleak
// prints it) is not counted either. It holds no goleak.IgnoreCurrent: a
// test that checks its own goroutines appends one taken when it started,
// as in goleak.VerifyNone(t, append(testenv.LeakOptions(), before)...).
//
// [RunMain] and [RunLeakChecked] use these options and, in addition, do not
// count apimachinery's watch.Filter loop (an upstream flaw of metadata-only
// informers' watches, whose Stop leaves a loop blocked on a send) nor
// controller-runtime's multi-namespace cache's sync waiters (which take no
// stop and wait for good on a cache stopped before it synced).
func LeakOptions(ignored ...string) []goleak.Option {
	opts := []goleak.Option{
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*http2ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run"),
	}
	for _, f := range ignored {
		opts = append(opts, goleak.IgnoreAnyFunction(f))
	}
	return opts
}

// RunLeakChecked runs m (the *testing.M TestMain received, or a wrapper
// whose Run starts something first) and returns its exit code for os.Exit.
// When that code is 0 it then fails the package (returns 1, printing the
// goroutines' stacks) if any goroutine started after RunLeakChecked was
// called is still running: the leak check of [RunMain], for a test package
// that starts its control planes or managers itself instead of through
// RunMain. Goroutines [LeakOptions] does not count, apimachinery's
// watch.Filter loop, controller-runtime's multi-namespace sync waiters and
// any function in ignored are not counted.
func RunLeakChecked(m interface{ Run() int }, ignored ...string) int {
	before := goleak.IgnoreCurrent()
	code := m.Run()
	if code == 0 && !checkLeaks(before, ignored) {
		code = 1
	}
	return code
}

// checkLeaks reports goroutines started while the package's tests ran that
// are still running after they ended and the control plane stopped: a
// manager, informer, watch or server a test did not stop. It prints them
// and returns false.
func checkLeaks(before goleak.Option, ignored []string) bool {
	upstream := append([]string{watchFilterLoop}, multiNamespaceSyncWaiters...)
	opts := append(LeakOptions(append(upstream, ignored...)...), before)
	err := goleak.Find(opts...)
	if err == nil {
		return true
	}
	fmt.Fprintf(os.Stderr, "testenv: goroutines leaked by the tests (a manager, informer or server not stopped):\n%v\n", err)
	return false
}

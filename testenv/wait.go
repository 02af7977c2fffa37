package testenv

import (
	"testing"
	"time"
)

// WaitFor polls cond every 100ms until it returns true, and fails the test
// (tb.Fatalf, naming what and cond's last error) if it has not after
// timeout. An error from cond does not end the wait: it may describe a
// state the system has not reached yet. Use it for what the control plane
// does asynchronously (caches, controllers, finalizers); never to assert a
// speed.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	tb.Helper()
	WaitForEvery(tb, 100*time.Millisecond, timeout, what, cond)
}

// WaitForEvery is [WaitFor] polling every interval.
func WaitForEvery(tb testing.TB, interval, timeout time.Duration, what string, cond func() (bool, error)) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		time.Sleep(interval)
	}
	tb.Fatalf("%s: not true after %s (last error: %v)", what, timeout, lastErr)
}

package reconciler_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/reconciler"
)

// An object whose reconciles failed throughout a long outage is retried
// within DefaultMaxRetryDelay once the failures stop mattering, not after
// controller-runtime's 1000s cap (the chaos suite saw a WebApp wait past its
// 90s convergence window after a network cut and an etcd pause in a row).
func TestDefaultRateLimiterCapsBackoff(t *testing.T) {
	rl := reconciler.DefaultRateLimiter()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}}
	other := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "b"}}
	var last time.Duration
	for i := range 40 {
		d := rl.When(req)
		if d > reconciler.DefaultMaxRetryDelay {
			t.Fatalf("failure %d: wait %s, want at most %s", i+1, d, reconciler.DefaultMaxRetryDelay)
		}
		last = d
	}
	if last != reconciler.DefaultMaxRetryDelay {
		t.Fatalf("after 40 failures: wait %s, want the cap %s", last, reconciler.DefaultMaxRetryDelay)
	}
	if got := rl.NumRequeues(req); got != 40 {
		t.Fatalf("NumRequeues = %d, want 40", got)
	}
	// Per object: another object starts from the base delay.
	if d := rl.When(other); d > 10*time.Millisecond {
		t.Fatalf("first failure of another object waits %s", d)
	}
	rl.Forget(req)
	if d := rl.When(req); d > 10*time.Millisecond {
		t.Fatalf("first failure after a success waits %s", d)
	}
}

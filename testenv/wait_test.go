package testenv_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/opkit/opkit/testenv"
)

// fatalRecorder is a testing.TB whose Fatalf records instead of stopping.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) { r.msg = fmt.Sprintf(format, args...) }

func TestWaitFor(t *testing.T) {
	calls := 0
	testenv.WaitForEvery(t, time.Millisecond, time.Second, "third call", func() (bool, error) {
		calls++
		return calls == 3, errors.New("not yet")
	})
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}

	rec := &fatalRecorder{TB: t}
	testenv.WaitForEvery(rec, time.Millisecond, 20*time.Millisecond, "never", func() (bool, error) {
		return false, errors.New("still pending")
	})
	if want := "never: not true after 20ms (last error: still pending)"; rec.msg != want {
		t.Fatalf("Fatalf message %q, want %q", rec.msg, want)
	}
}

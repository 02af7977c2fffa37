package testenv

import (
	"testing"

	"go.uber.org/goleak"
)

// The leak check RunMain runs after a package's tests finds a goroutine left
// running, and not one that ended or one exempted by WithIgnoredGoroutines.
func TestLeakCheckFindsAGoroutineLeftRunning(t *testing.T) {
	before := goleak.IgnoreCurrent()
	stop := make(chan struct{})
	go leakyWorker(stop)
	if checkLeaks(before, nil) {
		t.Fatal("a goroutine left running was not reported")
	}
	if !checkLeaks(before, []string{"github.com/opkit/opkit/testenv.leakyWorker"}) {
		t.Fatal("an exempted goroutine was reported")
	}
	close(stop)
	if !checkLeaks(before, nil) {
		t.Fatal("a goroutine that ended was reported")
	}
}

func leakyWorker(stop <-chan struct{}) { <-stop }

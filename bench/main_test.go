package bench_test

import (
	"os"
	"testing"

	"github.com/opkit/opkit/testenv"
)

// TestMain fails the package when the smoke run leaves a goroutine behind:
// bench.Run starts its own control plane and every contender's manager, and
// must stop them all before it returns.
func TestMain(m *testing.M) { os.Exit(testenv.RunLeakChecked(m)) }

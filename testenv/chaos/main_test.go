package chaos_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"

	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/config"
	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// The operators under test log every injected failure; the tests assert
	// on state, not on logs.
	ctrl.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := webappv1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	crds, err := config.CRDs()
	if err != nil {
		panic(err)
	}
	os.Exit(testenv.RunMain(m, &env, testenv.WithWorkloads(), testenv.WithCRDs(crds...), testenv.WithScheme(scheme)))
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond every 100ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	testenv.WaitFor(t, timeout, what, cond)
}

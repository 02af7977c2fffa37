package phase_test

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := addPipeline(scheme); err != nil {
		panic(err)
	}
	os.Exit(testenv.RunMain(m, &env, testenv.WithCRDPaths("testdata"), testenv.WithScheme(scheme)))
}

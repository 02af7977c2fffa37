package external_test

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := addWidgets(s); err != nil {
		panic(err)
	}
	os.Exit(testenv.RunMain(m, &env, testenv.WithScheme(s), testenv.WithCRDPaths("testdata")))
}

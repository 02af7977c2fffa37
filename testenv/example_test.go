package testenv_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/testenv"
)

// A consumer's test package starts one control plane in TestMain and counts
// the requests its controller makes.
func ExampleCountRequests() {
	e, err := testenv.New(testenv.WithGarbageCollector())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer func() { _ = e.Stop() }()

	cfg, requests := testenv.CountRequests(e.Config)
	c, _ := client.New(cfg, client.Options{Scheme: e.Scheme})
	_ = c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x"}})
	fmt.Println(requests.Count("create", "configmaps"), requests.Writes())
	// Output: 1 1
}

func ExampleRunMain() {
	var env *testenv.Env
	var m *testing.M // the *testing.M that TestMain receives
	if m != nil {
		os.Exit(testenv.RunMain(m, &env, testenv.WithCRDPaths("config/crd/bases")))
	}
}

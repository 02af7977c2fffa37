package nscache_test

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/opkit/opkit/nscache"
)

// A manager whose cache serves the namespaces labelled
// example.com/managed=true, as they come and go. Building it contacts no API
// server; mgr.Start would watch the selected Namespaces and start one cache
// per namespace.
func Example() {
	cfg := &rest.Config{Host: "https://127.0.0.1:6443"} // ctrl.GetConfigOrDie() in an operator
	selector := labels.SelectorFromSet(labels.Set{"example.com/managed": "true"})
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		NewCache:               nscache.New(selector),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	served := mgr.GetCache().(*nscache.Cache).Namespaces()
	fmt.Println("served before Start:", len(served))
	// Output: served before Start: 0
}

// A read in a namespace the cache does not serve is a NotFound, which
// IsNotSelected tells apart from a deleted object.
func ExampleNotSelectedError() {
	err := fmt.Errorf("get source: %w", &nscache.NotSelectedError{
		Namespace: "team-b", Kind: schema.GroupKind{Kind: "ConfigMap"}, Name: "settings",
	})
	fmt.Println(apierrors.IsNotFound(err), nscache.IsNotSelected(err))
	fmt.Println(err)
	// Output:
	// true true
	// get source: nscache: ConfigMap settings: namespace "team-b" is not served by this cache (its labels do not match the namespace selector, or it was deleted)
}

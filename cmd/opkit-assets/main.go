// Command opkit-assets builds the control-plane binaries opkit's test harness
// runs (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
// kwok) from the Go module proxy into the user's cache directory, and prints
// that directory on stdout. Progress goes to stderr. When the binaries are
// already cached it returns at once.
//
//	export KUBEBUILDER_ASSETS=$(go run github.com/opkit/opkit/cmd/opkit-assets)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/opkit/opkit/testenv/assets"
)

func main() {
	d := assets.DefaultVersions()
	var o assets.Options
	flag.StringVar(&o.Versions.Kubernetes, "kubernetes", d.Kubernetes, "k8s.io/kubernetes release to build")
	flag.StringVar(&o.Versions.Etcd, "etcd", d.Etcd, "go.etcd.io/etcd/server/v3 release to build")
	flag.StringVar(&o.Versions.Kwok, "kwok", d.Kwok, "sigs.k8s.io/kwok release to build")
	flag.StringVar(&o.CacheDir, "cache-dir", "", "root of the asset cache (default: $XDG_CACHE_HOME or ~/.cache, then opkit/controlplane)")
	flag.BoolVar(&o.IgnoreEnv, "ignore-kubebuilder-assets", false, "build into the cache even when KUBEBUILDER_ASSETS holds binaries")
	flag.Parse()
	o.Progress = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	dir, err := assets.Ensure(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "opkit-assets:", err)
		os.Exit(1)
	}
	fmt.Println(dir)
}

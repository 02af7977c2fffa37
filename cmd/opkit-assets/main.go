// Command opkit-assets builds the control-plane binaries opkit's test harness
// runs (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok,
// kubectl) from the Go module proxy into the user's cache directory, and prints
// that directory on stdout. Progress goes to stderr. Binaries already cached
// are not built again; when all are cached it returns at once.
//
//	export KUBEBUILDER_ASSETS=$(go run github.com/opkit/opkit/cmd/opkit-assets)
//
// -binaries (or -mode) restricts the build to what a test suite needs, e.g.
// for a CI whose tests use only the plain mode (etcd and kube-apiserver):
//
//	export KUBEBUILDER_ASSETS=$(go run github.com/opkit/opkit/cmd/opkit-assets -mode plain)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
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
	binaries := flag.String("binaries", "", "comma-separated binaries to build (default: all of "+strings.Join(assets.All, ",")+")")
	mode := flag.String("mode", "", "build what a testenv mode needs: plain (etcd, kube-apiserver), gc (+ kube-controller-manager), workloads (+ kube-scheduler, kwok); with -binaries, both")
	flag.Parse()
	o.Progress = os.Stderr
	if *binaries != "" {
		o.Binaries = strings.Split(*binaries, ",")
	}
	switch *mode {
	case "":
	case "plain":
		o.Binaries = append(o.Binaries, assets.Plain...)
	case "gc":
		o.Binaries = append(o.Binaries, assets.GarbageCollector...)
	case "workloads":
		o.Binaries = append(o.Binaries, assets.Workloads...)
	default:
		fmt.Fprintf(os.Stderr, "opkit-assets: -mode %q: want plain, gc or workloads\n", *mode)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	dir, err := assets.Ensure(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "opkit-assets:", err)
		os.Exit(1)
	}
	fmt.Println(dir)
}

// Command database is opkit's stateful example operator. It manages
// Databases (db.example.com/v1): each becomes a StatefulSet and a headless
// Service, driven through a phase machine — Pending, Provisioning, Ready,
// BackingUp, Upgrading (one replica at a time), Degraded, Deleting (final
// backup).
//
// With no cluster configured it starts an embedded control plane (kube-apiserver,
// etcd, kube-controller-manager, kube-scheduler and a kwok fake node, from
// opkit's testenv), installs the CRD, applies the sample Databases, and tours
// their life cycle: provisioning, an upgrade from v1 to v2 behind a backup,
// and deletions with and without the final backup:
//
//	go run ./examples/database                    # embedded demo; Ctrl-C to stop
//	go run ./examples/database --exit-when-ready  # bounded demo (what CI runs)
//	go run ./examples/database --kubeconfig ~/.kube/config   # a real cluster
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	var o options
	// controller-runtime registers --kubeconfig itself: a cluster to run against
	// (default: in-cluster config, else an embedded control plane).
	flag.BoolVar(&o.embedded, "embedded", false, "always start an embedded control plane, even when a cluster is configured")
	flag.BoolVar(&o.exitWhenReady, "exit-when-ready", false, "embedded demo: run the whole tour (ending with the deletion of every sample), then exit 0 (bounded; used by CI)")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "with --exit-when-ready: give up after this long")
	flag.DurationVar(&o.degradedAfter, "degraded-after", 0, "how long fewer replicas than desired may be Ready before a Database is Degraded (default 30s)")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", "", "metrics endpoint, e.g. :8080; 0 disables (default :8080 on a cluster, a free loopback port when embedded)")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", "", "health probe endpoint (default :8081 on a cluster, a free loopback port when embedded)")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "enable leader election (on in the config/ manifests)")
	flag.BoolVar(&o.devLogs, "dev-logs", false, "human-readable logs instead of JSON")
	flag.Parse()
	if f := flag.Lookup("kubeconfig"); f != nil {
		o.kubeconfig = f.Value.String()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "database:", err)
		os.Exit(1)
	}
}

type options struct {
	kubeconfig    string
	embedded      bool
	exitWhenReady bool
	timeout       time.Duration
	degradedAfter time.Duration
	metricsAddr   string
	probeAddr     string
	leaderElect   bool
	devLogs       bool
}

// clusterConfig returns the configured cluster, or nil when the demo should
// start its own control plane.
func clusterConfig(o options) (*rest.Config, error) {
	if o.embedded {
		return nil, nil
	}
	if o.kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	}
	if cfg, err := rest.InClusterConfig(); err == nil {
		return cfg, nil
	}
	return nil, nil
}

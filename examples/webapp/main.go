// Command webapp is opkit's flagship example operator. It manages WebApps
// (apps.example.com/v1): each becomes a ConfigMap, a Deployment and a Service.
//
// With no cluster configured it starts an embedded control plane (kube-apiserver,
// etcd, kube-controller-manager, kube-scheduler and a kwok fake node, from
// opkit's testenv), installs the CRD, applies the sample WebApps and runs the
// operator against it, printing progress and the kubectl command to watch:
//
//	go run ./examples/webapp            # embedded demo; Ctrl-C to stop
//	go run ./examples/webapp --exit-when-ready   # bounded demo (what CI runs)
//	go run ./examples/webapp --kubeconfig ~/.kube/config   # a real cluster
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
	flag.BoolVar(&o.exitWhenReady, "exit-when-ready", false, "embedded demo: exit 0 once every sample WebApp is Ready (bounded; used by CI)")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "with --exit-when-ready: give up after this long")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", "", "metrics endpoint, e.g. :8080; 0 disables (default :8080 on a cluster, a free loopback port when embedded)")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", "", "health probe endpoint (default :8081 on a cluster, a free loopback port when embedded)")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "enable leader election (on in the config/ manifests)")
	flag.BoolVar(&o.devLogs, "dev-logs", false, "human-readable logs instead of JSON")
	flag.StringVar(&o.webhooks, "webhooks", "auto", "serve the admission webhooks: on, off, or auto (on when embedded; on a cluster they need a serving certificate, see README)")
	flag.Parse()
	if f := flag.Lookup("kubeconfig"); f != nil {
		o.kubeconfig = f.Value.String()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "webapp:", err)
		os.Exit(1)
	}
}

type options struct {
	kubeconfig    string
	embedded      bool
	exitWhenReady bool
	timeout       time.Duration
	metricsAddr   string
	probeAddr     string
	leaderElect   bool
	devLogs       bool
	webhooks      string
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

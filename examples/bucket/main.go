// Command bucket is opkit's cloud-resource example operator. It manages
// Buckets (storage.example.com/v1): each becomes a bucket in a cloud API and
// a connection Secret. The cloud is package cloud's fake, with persistence,
// per-client rate limits, quotas, naming rules and fault injection.
//
// With no cluster configured it starts an embedded control plane (etcd and
// kube-apiserver, from opkit's testenv) and, with no --cloud-endpoint, the
// fake cloud on 127.0.0.1; it applies the sample Buckets, changes one of them
// behind the operator's back in the cloud, deletes another, and prints what
// happens:
//
//	go run ./examples/bucket                      # embedded demo; Ctrl-C to stop
//	go run ./examples/bucket --exit-when-ready    # bounded demo (what CI runs)
//	go run ./examples/bucket --cloud-only --cloud-listen 127.0.0.1:9000   # just the fake cloud
//	go run ./examples/bucket --kubeconfig ~/.kube/config --cloud-endpoint http://127.0.0.1:9000 \
//	    --credentials-secret default/cloud-credentials                    # a real cluster
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
	flag.BoolVar(&o.exitWhenReady, "exit-when-ready", false, "embedded demo: exit 0 once the samples are Ready, a drift was corrected and a deletion finished (bounded; used by CI)")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Minute, "with --exit-when-ready: give up after this long")
	flag.StringVar(&o.cloudEndpoint, "cloud-endpoint", "", "the cloud API's URL (default: start the fake cloud on 127.0.0.1)")
	flag.StringVar(&o.cloudState, "cloud-state", "", "the fake cloud's JSON state file (default: a fresh temporary file; with --cloud-only, ./bucket-cloud-state.json)")
	flag.BoolVar(&o.cloudOnly, "cloud-only", false, "run only the fake cloud API (on --cloud-listen) until interrupted")
	flag.StringVar(&o.cloudListen, "cloud-listen", "127.0.0.1:0", "with --cloud-only or the embedded cloud: the address to listen on")
	flag.StringVar(&o.credentialsSecret, "credentials-secret", "", "namespace/name of the Secret (accessKeyId, secretAccessKey) for Buckets without spec.credentialsSecretRef")
	flag.DurationVar(&o.resync, "resync", 0, "how often a Ready Bucket is checked for drift (default 1m on a cluster, 3s in the embedded demo)")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", "", "metrics endpoint, e.g. :8080; 0 disables (default :8080 on a cluster, a free loopback port when embedded)")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", "", "health probe endpoint (default :8081 on a cluster, a free loopback port when embedded)")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "enable leader election (on in the config/ manifests)")
	flag.BoolVar(&o.devLogs, "dev-logs", false, "human-readable logs instead of JSON")
	flag.Parse()
	if f := flag.Lookup("kubeconfig"); f != nil {
		o.kubeconfig = f.Value.String()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	if o.cloudOnly {
		err = serveCloud(ctx, o)
	} else {
		err = run(ctx, o)
	}
	stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "bucket:", err)
		os.Exit(1)
	}
}

type options struct {
	kubeconfig        string
	embedded          bool
	exitWhenReady     bool
	timeout           time.Duration
	cloudEndpoint     string
	cloudState        string
	cloudOnly         bool
	cloudListen       string
	credentialsSecret string
	resync            time.Duration
	metricsAddr       string
	probeAddr         string
	leaderElect       bool
	devLogs           bool
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

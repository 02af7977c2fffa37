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
	"flag"
	"time"

	"github.com/opkit/opkit/examples/internal/examplecmd"
)

// narrator prints the embedded demo's progress.
const narrator examplecmd.Narrator = "bucket"

func main() {
	var o options
	o.Register(flag.CommandLine, "embedded demo: exit 0 once the samples are Ready, a drift was corrected and a deletion finished (bounded; used by CI)", 3*time.Minute)
	flag.StringVar(&o.cloudEndpoint, "cloud-endpoint", "", "the cloud API's URL (default: start the fake cloud on 127.0.0.1)")
	flag.StringVar(&o.cloudState, "cloud-state", "", "the fake cloud's JSON state file (default: a fresh temporary file; with --cloud-only, ./bucket-cloud-state.json)")
	flag.BoolVar(&o.cloudOnly, "cloud-only", false, "run only the fake cloud API (on --cloud-listen) until interrupted")
	flag.StringVar(&o.cloudListen, "cloud-listen", "127.0.0.1:0", "with --cloud-only or the embedded cloud: the address to listen on")
	flag.StringVar(&o.credentialsSecret, "credentials-secret", "", "namespace/name of the Secret (accessKeyId, secretAccessKey) for Buckets without spec.credentialsSecretRef")
	flag.DurationVar(&o.resync, "resync", 0, "how often a Ready Bucket is checked for drift (default 1m on a cluster, 3s in the embedded demo)")
	flag.Parse()
	o.ReadKubeconfig(flag.CommandLine)
	examplecmd.Main("bucket", func(ctx context.Context) error {
		if o.cloudOnly {
			return serveCloud(ctx, o)
		}
		return run(ctx, o)
	})
}

type options struct {
	examplecmd.Flags
	cloudEndpoint     string
	cloudState        string
	cloudOnly         bool
	cloudListen       string
	credentialsSecret string
	resync            time.Duration
}

// Command canary rolls a new version of the sharded webapp operator out
// over a share of the WebApps first, with opkit's sharding/canary package:
// a broken version is caught on its share and rolled back, a good one is
// widened step by step and promoted to every WebApp.
//
// With no flags it starts an embedded control plane (kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler and a kwok fake node, from opkit's
// testenv), installs the WebApp CRD, runs three replicas of version v1 in
// this process (examples/sharded's replicas, each also able to run the
// rollout), applies sample WebApps, then adds one replica of v2 — which
// names the Deployment's container port with more than 15 characters, so
// the API server refuses its Deployments and its WebApps go Stalled — and
// shows the roll back; then one replica of v2.1, which only labels the
// children with its version, and shows the promotion:
//
//	go run ./examples/canary                    # embedded demo; Ctrl-C to stop
//	go run ./examples/canary --exit-when-ready  # bounded: exit 0 after both rollouts (CI)
//	go run ./examples/canary --webapps 300 --steps 10,25,50,100 --window 30s
package main

import (
	"context"
	"flag"
	"strconv"
	"strings"
	"time"

	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/opkit/opkit/examples/internal/examplecmd"
)

// narrator prints the demo's progress.
const narrator examplecmd.Narrator = "canary"

func main() {
	o := defaultOptions()
	steps := "10,25,50,100"
	flag.IntVar(&o.webapps, "webapps", o.webapps, "how many WebApps to apply (named after the webapp samples: hello-00, docs-01, …)")
	flag.IntVar(&o.replicas, "replicas", o.replicas, "how many replicas of the stable version (v1) to run in this process")
	flag.StringVar(&steps, "steps", steps, "the canary's shares in percent, comma-separated")
	flag.DurationVar(&o.window, "window", o.window, "how long the canary must hold each step before it widens")
	flag.DurationVar(&o.leaseDuration, "lease-duration", o.leaseDuration, "member Lease duration (whole seconds)")
	flag.BoolVar(&o.exitWhenReady, "exit-when-ready", false, "exit 0 once v2 was rolled back and v2.1 promoted (bounded; used by CI)")
	flag.DurationVar(&o.timeout, "timeout", o.timeout, "with --exit-when-ready: give up after this long")
	flag.BoolVar(&o.verbose, "v", false, "write the replicas' logs to the terminal (stderr) instead of a file")
	flag.StringVar(&o.logFile, "log-file", "", "write the replicas' logs to this file (default: a new file in the temporary directory)")
	o.zap.BindFlags(flag.CommandLine)
	flag.Parse()
	o.steps = nil
	for _, s := range strings.Split(steps, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			narrator.Say("--steps %q: %v", steps, err)
			return
		}
		o.steps = append(o.steps, n)
	}
	examplecmd.Main("canary", func(ctx context.Context) error {
		_, err := run(ctx, o)
		return err
	})
}

type options struct {
	webapps       int
	replicas      int
	steps         []int
	window        time.Duration
	leaseDuration time.Duration
	exitWhenReady bool
	timeout       time.Duration
	verbose       bool          // -v
	logFile       string        // --log-file
	zap           crzap.Options // --zap-*
}

func defaultOptions() options {
	return options{webapps: 24, replicas: 3, steps: []int{10, 25, 50, 100}, window: 5 * time.Second,
		leaseDuration: 2 * time.Second, timeout: 10 * time.Minute}
}

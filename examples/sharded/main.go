// Command sharded is the webapp example operator scaled out: three replicas
// share the WebApps of one namespace through opkit's sharding package, and
// when one of them dies its WebApps move to the others.
//
// It reuses examples/webapp unchanged (API, CRD, controller); what it adds is
// the wiring of a sharded replica (replica.go): a member Lease, a cache
// restricted to the replica's shard, the webapp controller with the builder's
// Shard option, and the ring's assigner under leader election.
//
// With no flags it starts an embedded control plane (kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler and a kwok fake node, from opkit's
// testenv), installs the WebApp CRD, runs three replicas in this process,
// applies sample WebApps, prints who owns what, kills one replica without
// releasing its Lease and shows the hand-over:
//
//	go run ./examples/sharded                      # embedded demo; Ctrl-C to stop
//	go run ./examples/sharded --exit-when-ready    # bounded: exit 0 after the hand-over (CI)
//	go run ./examples/sharded --webapps 30 --kill leader
package main

import (
	"context"
	"flag"
	"time"

	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/opkit/opkit/examples/internal/examplecmd"
)

// narrator prints the demo's progress.
const narrator examplecmd.Narrator = "sharded"

func main() {
	o := defaultOptions()
	flag.IntVar(&o.webapps, "webapps", o.webapps, "how many WebApps to apply (named after the webapp samples: hello-00, docs-01, …)")
	flag.IntVar(&o.replicas, "replicas", o.replicas, "how many replicas of the operator to run in this process")
	flag.DurationVar(&o.leaseDuration, "lease-duration", o.leaseDuration, "member Lease duration (whole seconds); a crashed replica's WebApps move after twice this")
	flag.StringVar(&o.kill, "kill", o.kill, `which replica to kill once all WebApps are Ready: a member name (replica-1), "leader" (the one running the assigner), "auto" (a non-leader owning the most WebApps) or "none"`)
	flag.BoolVar(&o.exitWhenReady, "exit-when-ready", false, "exit 0 once the hand-over completed and every WebApp is Ready again (bounded; used by CI)")
	flag.DurationVar(&o.timeout, "timeout", o.timeout, "with --exit-when-ready: give up after this long")
	flag.BoolVar(&o.verbose, "v", false, "write the replicas' logs to the terminal (stderr) instead of a file")
	flag.StringVar(&o.logFile, "log-file", "", "write the replicas' logs to this file (default: a new file in the temporary directory)")
	o.zap.BindFlags(flag.CommandLine)
	flag.Parse()

	examplecmd.Main("sharded", func(ctx context.Context) error { return run(ctx, o) })
}

type options struct {
	webapps       int
	replicas      int
	leaseDuration time.Duration
	kill          string
	exitWhenReady bool
	timeout       time.Duration
	verbose       bool          // -v
	logFile       string        // --log-file
	zap           crzap.Options // --zap-*
	// hold is the overlap detector's hold (tests).
	hold time.Duration
}

func defaultOptions() options {
	return options{webapps: 12, replicas: 3, leaseDuration: 2 * time.Second, kill: "auto", timeout: 5 * time.Minute}
}

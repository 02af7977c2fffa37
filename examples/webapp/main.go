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
	"flag"
	"time"

	"github.com/opkit/opkit/examples/internal/examplecmd"
)

// narrator prints the embedded demo's progress.
const narrator examplecmd.Narrator = "webapp"

func main() {
	var o options
	o.Register(flag.CommandLine, "embedded demo: exit 0 once every sample WebApp is Ready (bounded; used by CI)", 5*time.Minute)
	flag.StringVar(&o.webhooks, "webhooks", "auto", "serve the admission webhooks: on, off, or auto (on when embedded; on a cluster they need a serving certificate, see README)")
	flag.StringVar(&o.routeRegistry, "route-registry", "", "keep the route registry (the operator's stand-in external system) in this journal file, so it outlives the process; one operator process may write it at a time (default: in memory)")
	flag.Parse()
	o.ReadKubeconfig(flag.CommandLine)
	examplecmd.Main("webapp", func(ctx context.Context) error { return run(ctx, o) })
}

type options struct {
	examplecmd.Flags
	webhooks string
	// routeRegistry is the route registry's journal file (registry.Open);
	// empty: in memory.
	routeRegistry string
}

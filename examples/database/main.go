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
//	go run ./examples/database --kubeconfig ~/.kube/config --watch-namespace shop --backup-catalog /var/lib/backups.json
package main

import (
	"context"
	"flag"
	"time"

	"github.com/opkit/opkit/examples/internal/examplecmd"
)

// narrator prints the embedded demo's progress.
const narrator examplecmd.Narrator = "database"

func main() {
	var o options
	o.Register(flag.CommandLine, "embedded demo: run the whole tour (ending with the deletion of every sample), then exit 0 (bounded; used by CI)", 5*time.Minute)
	flag.DurationVar(&o.degradedAfter, "degraded-after", 0, "how long fewer replicas than desired may be Ready before a Database is Degraded (default 30s)")
	flag.StringVar(&o.backupCatalog, "backup-catalog", "", "keep the backup catalog in this JSON file, so it outlives the process (default: in memory)")
	flag.Parse()
	o.ReadKubeconfig(flag.CommandLine)
	examplecmd.Main("database", func(ctx context.Context) error { return run(ctx, o) })
}

type options struct {
	examplecmd.Flags
	degradedAfter time.Duration
	backupCatalog string
}

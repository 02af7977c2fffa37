// Command tenant is opkit's platform example operator. It manages Tenants
// (tenancy.example.com/v1alpha1, cluster-scoped): each owns a list of
// namespaces and, in each, a ResourceQuota, a LimitRange, a default-deny and an
// allow-within-tenant NetworkPolicy, and a RoleBinding giving the tenant's
// admins the tenant-admin ClusterRole there and nowhere else.
//
// With no cluster configured it starts an embedded control plane (kube-apiserver,
// etcd, kube-controller-manager, kube-scheduler and a kwok fake node, from
// opkit's testenv), installs the CRD and the RBAC of config/rbac, runs the
// operator as a user bound to its generated ClusterRole only, applies the
// sample Tenants and tours what their admins may and may not do, the deletion
// gate of a namespace removed from a Tenant, and the deletion of a Tenant:
//
//	go run ./examples/tenant                    # embedded demo; Ctrl-C to stop
//	go run ./examples/tenant --exit-when-ready  # bounded demo (what CI runs)
//	go run ./examples/tenant --kubeconfig ~/.kube/config   # a real cluster
package main

import (
	"context"
	"flag"
	"time"

	"github.com/opkit/opkit/examples/internal/examplecmd"
	"github.com/opkit/opkit/examples/tenant/controller"
)

// narrator prints the embedded demo's progress.
const narrator examplecmd.Narrator = "tenant"

func main() {
	var o options
	o.Register(flag.CommandLine, "embedded demo: run the whole tour (ending with the deletion of a Tenant), then exit 0 (bounded; used by CI)", 5*time.Minute)
	flag.StringVar(&o.adminRole, "default-admin-role", controller.DefaultAdminRole, "the ClusterRole bound to a Tenant's admins when its spec.adminRole is empty")
	flag.StringVar(&o.selector, "tenant-selector", "", "serve only the Tenants matching this label selector (default: all)")
	flag.IntVar(&o.concurrency, "concurrency", 4, "Tenants reconciled at once")
	flag.Parse()
	o.ReadKubeconfig(flag.CommandLine)
	examplecmd.Main("tenant", func(ctx context.Context) error { return run(ctx, o) })
}

type options struct {
	examplecmd.Flags
	adminRole   string
	selector    string
	concurrency int
}

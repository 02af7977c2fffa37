// Command playbook is opkit's Ansible example operator: Sites
// (web.example.com/v1) reconciled by an Ansible playbook, as operator-sdk's
// Ansible operator does, on opkit's reconciler (package ansible). Each Site
// becomes a ConfigMap, a Deployment and a Service, made by
// kubernetes.core.k8s tasks; deleting a Site runs a finalizer playbook.
//
// It needs ansible-playbook and the Python kubernetes client
// (hack/ensure-ansible.sh installs Debian's ansible and python3-kubernetes).
// With no cluster configured it starts an embedded control plane (etcd and
// kube-apiserver, from opkit's testenv), applies the sample Sites, changes
// one, deletes the other, and prints what happens:
//
//	go run ./examples/playbook                    # embedded demo; Ctrl-C to stop
//	go run ./examples/playbook --exit-when-ready  # bounded demo (what CI runs)
//	go run ./examples/playbook --kubeconfig ~/.kube/config   # a real cluster
package main

import (
	"context"
	"flag"
	"time"

	"github.com/opkit/opkit/examples/internal/examplecmd"
)

// narrator prints the embedded demo's progress.
const narrator examplecmd.Narrator = "playbook"

func main() {
	var o options
	o.Register(flag.CommandLine, "embedded demo: exit 0 once the samples are Ready, a spec change re-ran the playbook and a deletion ran the finalizer playbook (bounded; used by CI)", 4*time.Minute)
	flag.StringVar(&o.ansiblePlaybook, "ansible-playbook", "ansible-playbook", "the ansible-playbook executable")
	flag.Parse()
	o.ReadKubeconfig(flag.CommandLine)
	examplecmd.Main("playbook", func(ctx context.Context) error { return run(ctx, o) })
}

type options struct {
	examplecmd.Flags
	ansiblePlaybook string
}

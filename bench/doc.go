// Package bench compares opkit's examples/webapp operator with the same
// operator written the kubebuilder-book way (package baseline), written on
// a real peer library, Flux's server-side apply engine fluxcd/pkg/ssa
// (package flux), and with the API server's own ceiling, on real control
// planes from testenv.
//
// [Run] runs each scenario (converge, no-op restart with memory, spec churn,
// delete) for each contender on a fresh control plane, one after another,
// and writes report.md, report.json and SVG charts. The sharding scenario
// (opkit only; [ShardingResult]) runs the webapp operator as three sharded
// replicas (examples/sharded/fleet) against one unsharded replica on a
// control plane of its own: heap per shard, a graceful and an ungraceful
// hand-over. Every request figure is
// counted on the contender's own client with testenv.CountRequests; nothing
// is estimated. Every contender's CPU is the CPU its own goroutines used,
// told from the harness's by a pprof label (cpu.go); the control plane's
// (kube-apiserver and etcd) is read from /proc for the same window. The numbers measure
// this machine at this moment: nothing here asserts a speed.
//
// The command is bench/cmd/opkit-bench (`make bench`, `make bench-quick`).
// bench is a Go module of its own (bench/go.mod, with a replace of
// github.com/opkit/opkit to this checkout), so the peer libraries it
// measures never enter the module graph of opkit's consumers.
//
// # Peer libraries
//
// The race wants a library a Go operator author would pick instead of opkit
// for owned children. Looked at, for the webapp (a CR that owns a
// ConfigMap, a Deployment and a Service, mirrors the Deployment's readiness
// into its status and guards a cleanup with a finalizer):
//
//   - fluxcd/pkg/ssa (v0.78.0) — in the race as "flux". ResourceManager is a
//     library for applying a set of objects a controller owns: server-side
//     apply with drift detection (a dry-run per object), ownership labels,
//     ChangeSets that make an inventory, DeleteAll for pruning, and a
//     kstatus-based Wait. It is the closest thing to opkit's ensure, it
//     builds beside k8s.io v0.37.2 and controller-runtime v0.25, and Flux's
//     own controllers run on it.
//   - crossplane-runtime — its managed reconciler (pkg/reconciler/managed)
//     drives one external resource per managed resource through an
//     ExternalClient (Observe/Create/Update/Delete); it has no notion of a
//     set of owned Kubernetes children. Its resource.Applicator
//     (APIPatchingApplicator: get, then create or merge-patch one object)
//     is the baseline's CreateOrUpdate with a patch, with no readiness,
//     prune or ownership of its own: a second baseline, not a peer.
//   - operator-framework/operator-lib — leader election, an instrumented
//     event handler and a prune package that deletes completed Jobs and Pods
//     by age; nothing that applies or tracks children. Does not fit.
//   - cluster-api util/patch — patch.Helper diffs one object against its
//     snapshot and patches metadata, spec, status and conditions
//     separately; it writes the owner's own status, not children, and pulls
//     in the whole cluster-api module. It could replace the status write of
//     a contender, not its child management. Does not fit.
//   - sigs.k8s.io/kubebuilder-declarative-pattern — a reconciler that renders
//     a manifest "channel" (YAML files per version) and applies it with
//     kubectl-style or ApplySet apply and prune. It fits addon operators
//     whose children come from manifests on disk rather than from Go code;
//     the webapp would have to be re-expressed as templated manifests, and
//     its compatibility with controller-runtime v0.25 was not checked. Not
//     added (time); the next candidate if a second peer is wanted.
//   - sigs.k8s.io/cli-utils apply (kpt's applier) — inventory-based apply,
//     prune and status wait, built for a CLI run over one set: an inventory
//     object per set (a fourth child per WebApp) and a task queue with a
//     status poller per run. Not built for a controller loop over 1,000
//     sets; not added.
//
// Java's operator SDK (JOSDK) has dependent resources with matchers that
// decide whether a child needs an update; no Go library offers that shape.
package bench

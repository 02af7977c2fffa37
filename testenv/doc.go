// Package testenv runs a real Kubernetes control plane for tests: etcd and
// kube-apiserver through controller-runtime's envtest, plus, on request,
// kube-controller-manager (garbage collection, or every default controller),
// kube-scheduler and a kwok-managed fake node, so that ownerReference cascades
// really delete and Deployments really become Available without a kubelet.
//
// Binaries come from KUBEBUILDER_ASSETS or from the cache that
// [github.com/opkit/opkit/testenv/assets] builds offline from the Go module proxy.
// An environment needs only its mode's binaries: etcd and kube-apiserver by
// default, kube-controller-manager too with [WithGarbageCollector], and
// kube-scheduler and kwok with [WithWorkloads]; kubectl only when a test calls
// [Env.Kubectl] or [Env.KubectlPath]. When they are missing, [New] fails with
// the exact command that builds them (or builds just those itself when
// OPKIT_ASSETS_BUILD=1 or [WithBuildIfMissing]); it never skips a test. So a
// consumer whose tests use the plain mode never compiles the controller-manager,
// the scheduler, kwok or kubectl.
//
// The usual shape is one control plane per test package and a fresh namespace
// per test:
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, &env, testenv.WithCRDPaths("config/crd"))) }
//
//	func TestSomething(t *testing.T) {
//		ns := env.Namespace(t)
//		...
//	}
//
// [CountRequests] wraps a rest.Config so a test can assert exactly which API
// requests a controller made, e.g. that a steady-state reconcile wrote nothing.
//
// [Env.UserBoundTo] gives a test a user holding exactly an operator's
// ClusterRole, to run the operator with what its manifests grant (that the
// generated RBAC is sufficient, and that it refuses the rest); package
// [github.com/opkit/opkit/testenv/hardening] checks the operator's
// Deployment manifest against the usual security baseline.
//
// [Env.Pause], [Env.Resume] and [Env.RestartAPIServer] fault the control plane
// itself; package [github.com/opkit/opkit/testenv/chaos] adds API error
// injection, a network-partition proxy and invariant checkers on top.
package testenv

// Command opkit scaffolds a Kubernetes operator built on opkit, in
// kubebuilder's project layout (go/v4): a PROJECT file, cmd/main.go,
// api/<version>, internal/controller, a kustomize tree under config/ and a
// Makefile with kubebuilder's targets (generate, manifests, test, build, run,
// install, uninstall, deploy, undeploy, docker-build, build-installer).
//
// What differs from kubebuilder is inside: each controller is composed with
// opkit's builder (package reconciler: children ensured with zero requests in
// steady state, status written only when it changed, errors classified into
// the right requeue and conditions), and its tests run on opkit's harness
// (package testenv: a real kube-apiserver, etcd, controller-manager,
// scheduler and a kwok node, so Deployments really roll out), including a
// test that a reconcile of a converged object writes nothing.
//
// Usage, in an empty directory:
//
//	go run github.com/opkit/opkit/cmd/opkit init --domain example.com --repo example.com/guestbook
//	go run github.com/opkit/opkit/cmd/opkit create api --group webapp --version v1 --kind Guestbook
//	make test
//
// init writes the project skeleton and runs `go mod tidy` (--fetch-deps=false
// skips it). create api adds a custom resource whose spec has image and
// replicas, a controller that runs them as a Deployment and mirrors its
// Available condition into Ready, a sample, RBAC roles and tests; it then
// runs `go mod tidy` and `make generate manifests` (controller-gen makes the
// deepcopy functions, the CRD and the ClusterRole), unless --make=false. Call
// create api again for more kinds of the same group (one group per project,
// kubebuilder's single-group layout).
//
// The generated go.mod requires github.com/opkit/opkit at the version this
// command was built from (--opkit-version overrides it). --opkit-replace DIR
// (or OPKIT_REPLACE) instead points it at a local checkout of opkit with a
// replace directive, for working on opkit itself or before a release.
//
// Everything the generated project needs comes through the Go module proxy:
// controller-gen and kustomize are pinned in its Makefile and installed into
// its bin/, and `make test` finds or builds the control-plane binaries with
// `go tool opkit-assets` (KUBEBUILDER_ASSETS, when set, is used as it is).
package main

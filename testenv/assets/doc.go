// Package assets builds and locates the control-plane binaries that opkit's test
// harness runs: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kwok and kubectl.
//
// Guarantees:
//   - Binaries are built from source fetched through the Go module proxy only; no
//     other download happens. That is what makes the harness work on machines
//     whose only outside access is the module proxy.
//   - Only what is asked for is built: [Options].Binaries names the binaries
//     wanted ([Plain], [GarbageCollector], [Workloads] are what package testenv's
//     modes run; kubectl is built only when a test calls for it), and a later
//     call for more builds only the difference. Binaries of one module are built
//     by one go build, so they share its compilation.
//   - A directory returned by [Ensure] or [Find] holds every binary asked for, and
//     each of them answered --version with the expected release: a binary is built
//     in a temporary directory, checked, and only then renamed into the cache
//     directory (one atomic rename per file), so a crashed or concurrent build never
//     exposes a partial or unverified binary.
//   - Concurrent builders (two test packages, two CI jobs) serialise on an
//     exclusive file lock next to the target directory; the second one waits and
//     then finds the first one's result.
//   - When KUBEBUILDER_ASSETS names a directory holding the binaries asked for, it
//     wins and nothing is built (setup-envtest's etcd and kube-apiserver suffice for
//     the plain mode).
package assets

// Package assets builds and locates the control-plane binaries that opkit's test
// harness runs: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kwok and kubectl.
//
// Guarantees:
//   - Binaries are built from source fetched through the Go module proxy only; no
//     other download happens. That is what makes the harness work on machines
//     whose only outside access is the module proxy.
//   - A directory returned by [Ensure] or [Find] is complete: every binary is present
//     and answered --version with the expected release. Completeness is recorded
//     by a marker file written last, after the directory was renamed into place
//     atomically, so a crashed or concurrent build never exposes a partial directory.
//   - Concurrent builders (two test packages, two CI jobs) serialise on an
//     exclusive file lock next to the target directory; the second one waits and
//     then finds the first one's result.
//   - When KUBEBUILDER_ASSETS names a directory holding the binaries, it wins and
//     nothing is built.
package assets

// Package hardening checks an operator's Deployment manifest against the
// baseline a cluster's restricted Pod Security Standard and most security
// reviews ask for: the pod runs as non-root with the RuntimeDefault seccomp
// profile, and every container has a read-only root filesystem, no
// privilege escalation, ALL capabilities dropped, and liveness and readiness
// probes.
//
// [Deployment] returns every shortfall, one message each, so a test prints
// them all at once:
//
//	for _, p := range hardening.Deployment(&dep) {
//		t.Error(p)
//	}
//
// It imports no opkit library package: an operator written on plain
// controller-runtime uses it as is.
package hardening

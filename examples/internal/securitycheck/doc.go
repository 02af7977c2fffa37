// Package securitycheck checks every example operator's deployment manifests
// and generated RBAC against opkit's security baseline: non-root, read-only
// root filesystem, no privilege escalation, all capabilities dropped, a
// seccomp profile, probes, and no wildcard RBAC rules. [Deployment] holds the
// Deployment half, so that a test of the rendered kustomization
// (examples/internal/kustomizetest) applies the same checks as this package's
// tests of the files in config/manager.
package securitycheck

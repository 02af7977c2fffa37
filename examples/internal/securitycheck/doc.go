// Package securitycheck checks every example operator's deployment manifests
// and generated RBAC against opkit's security baseline: non-root, read-only
// root filesystem, no privilege escalation, all capabilities dropped, a
// seccomp profile, probes (testenv/hardening, which the rendered
// kustomization's test in examples/internal/kustomizetest applies too), and
// no wildcard RBAC rules.
package securitycheck

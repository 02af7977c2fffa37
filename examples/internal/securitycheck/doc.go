// Package securitycheck holds tests that check every example operator's
// deployment manifests and generated RBAC against opkit's security baseline:
// non-root, read-only root filesystem, no privilege escalation, all
// capabilities dropped, a seccomp profile, and no wildcard RBAC rules.
package securitycheck

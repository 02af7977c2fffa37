// Package kustomizetest holds tests that render every example's kubebuilder
// style kustomization (config/default, and config/default with the optional
// config/prometheus enabled) with the kubectl the harness builds, check that
// the rendered objects fit together (names, namespaces, selectors, RBAC
// subjects, webhook Service and cert-manager wiring), run the operator
// Deployment through securitycheck, and apply the result to a real
// kube-apiserver with a server-side dry-run. It also runs the kubectl
// commands behind make install-<example> / uninstall-<example> on config/crd
// for real.
//
// cert-manager and the Prometheus Operator are not installed: testdata/crds
// holds schema-less stand-ins for their CRDs, so the API server accepts
// Issuer, Certificate and ServiceMonitor objects in the dry-run.
package kustomizetest

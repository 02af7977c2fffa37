// Package gizmo holds the test API group test.opkit.dev used by the webhook
// package's tests: Gizmo in v1 (storage version and conversion hub) and
// v1alpha1 (a spoke with a flatter layout and without spec.tier).
package gizmo

// Group is the API group of the test types.
const Group = "test.opkit.dev"

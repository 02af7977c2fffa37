// Package manifest loads the Kubernetes manifests an example embeds.
//
// Guarantees: a directory is read in file-name order and each file's YAML
// documents ("---"-separated) in file order; blank documents are skipped;
// typed kinds (CRDs, webhook configurations) are decoded strictly, so an
// unknown field fails instead of being dropped; every error is prefixed with
// the path of the file it came from. Nothing is cached: each call reads the
// files again and returns fresh objects the caller may modify.
//
// Usage: each example's config package embeds its generated CRDs, RBAC,
// webhook configurations and samples in an embed.FS and exposes them through
// this package, so the demo and the tests install exactly the files a user
// applies to a real cluster:
//
//	//go:embed crd/*.yaml samples/*.yaml
//	var files embed.FS
//
//	func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) { return manifest.CRDs(files, "crd") }
package manifest

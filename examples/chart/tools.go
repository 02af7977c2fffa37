//go:build tools

// Package main's tools.go pins the Helm CLI (helm.sh/helm/v4/cmd/helm) in
// this module, so the end-to-end tests build exactly the helm they check
// `helm list` and `helm history` with, and go mod tidy keeps it.
package main

import _ "helm.sh/helm/v4/cmd/helm"

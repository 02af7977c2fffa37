//go:build tools

// Package tools pins the development tools opkit's Makefile runs.
package tools

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
	_ "golang.org/x/vuln/cmd/govulncheck"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)

//go:build tools

// Package tools pins the development tools opkit's Makefile runs.
package tools

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
)

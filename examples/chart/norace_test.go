//go:build !race

package main

// raceEnabled reports whether this test binary was built with -race; the
// helm CLI is then built with -race too (see helmCLI).
const raceEnabled = false

//go:build race

package main

// raceEnabled reports whether this test binary was built with -race; the
// scaffold test then builds, vets and tests the generated project with
// -race too (see shell).
const raceEnabled = true

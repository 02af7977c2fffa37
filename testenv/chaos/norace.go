//go:build !race

package chaos

// raceEnabled reports whether this package was built with -race; [BuildBinary]
// then builds with -race too.
const raceEnabled = false

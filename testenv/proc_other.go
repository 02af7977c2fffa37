//go:build !linux

package testenv

import (
	"errors"
	"path/filepath"
	"syscall"
)

// findChild needs /proc; elsewhere the PIDs of envtest's processes are unknown.
func findChild(binary, _ string) (int, error) {
	return 0, errors.New("testenv: finding " + filepath.Base(binary) + " needs Linux /proc")
}

// exited reports whether pid is gone (a zombie still counts as running here).
func exited(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

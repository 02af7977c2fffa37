//go:build unix

package ansible

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in its own process group and makes cancelling it kill
// the whole group: ansible-playbook forks workers and module processes that
// would otherwise outlive a timeout.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

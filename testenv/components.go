package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Component names one process of the control plane, for [Env.PID],
// [Env.Pause] and [Env.Resume].
type Component string

// The components an Env may run. etcd and kube-apiserver always run; the
// others only with [WithGarbageCollector] or [WithWorkloads].
const (
	Etcd              Component = "etcd"
	APIServer         Component = "kube-apiserver"
	ControllerManager Component = "kube-controller-manager"
	Scheduler         Component = "kube-scheduler"
	Kwok              Component = "kwok"
)

// PID returns the process ID of a running component. etcd and kube-apiserver
// are started by envtest, which does not expose their PIDs: they are found
// among this process's children (Linux /proc) by binary path and by the port
// envtest gave them, so two Envs in one process never mix up their processes.
func (e *Env) PID(c Component) (int, error) {
	if e.Envtest == nil {
		return 0, fmt.Errorf("testenv: %s: the environment is stopped", c)
	}
	switch c {
	case APIServer:
		api := e.Envtest.ControlPlane.APIServer
		if api == nil || api.Port == "" {
			return 0, errors.New("testenv: kube-apiserver has no secure port")
		}
		return findChild(api.Path, "--secure-port="+api.Port)
	case Etcd:
		etcd := e.Envtest.ControlPlane.Etcd
		if etcd == nil || etcd.URL == nil {
			return 0, errors.New("testenv: etcd has no URL")
		}
		return findChild(etcd.Path, "--listen-client-urls="+etcd.URL.String())
	case ControllerManager, Scheduler, Kwok:
		for _, p := range e.procs {
			if p.name == string(c) {
				select {
				case <-p.exited:
					return 0, fmt.Errorf("testenv: %s has exited", c)
				default:
					return p.cmd.Process.Pid, nil
				}
			}
		}
		return 0, fmt.Errorf("testenv: %s is not running in this environment (see WithGarbageCollector, WithWorkloads)", c)
	default:
		return 0, fmt.Errorf("testenv: unknown component %q", c)
	}
}

// Pause freezes a component with SIGSTOP: its sockets stay open and the kernel
// keeps accepting connections for it, but it answers nothing, like a process
// stuck in a long GC pause or a VM that was suspended. Pausing a paused
// component is a no-op. [Env.Stop] resumes paused components before stopping them.
func (e *Env) Pause(c Component) error {
	pid, err := e.PID(c)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.paused == nil {
		e.paused = map[Component]int{}
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("testenv: pause %s (pid %d): %w", c, pid, err)
	}
	e.paused[c] = pid
	return nil
}

// Resume continues a component paused with [Env.Pause] (SIGCONT). Resuming a
// component that is not paused is a no-op.
func (e *Env) Resume(c Component) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	pid, ok := e.paused[c]
	if !ok {
		return nil
	}
	delete(e.paused, c)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("testenv: resume %s (pid %d): %w", c, pid, err)
	}
	return nil
}

func (e *Env) resumeAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for c, pid := range e.paused {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		delete(e.paused, c)
	}
}

// RestartAPIServer stops kube-apiserver and starts it again on the same port
// with the same serving certificate, client CA and etcd, so every object
// survives and existing rest.Configs (Env.Config, users from Envtest.AddUser,
// the kubeconfig the other components use) keep working unchanged: a client
// only sees its connections closed and requests failing until the server is
// back, and reconnects by itself. Watches end and informers re-establish them
// (from their last resourceVersion, or with a re-list). The server gets
// SIGTERM and, if it has not exited after [APIServerStopGrace], SIGKILL:
// its graceful shutdown can wait on long-running requests much longer. It
// returns once /healthz answers again. Between stop and start the port is
// free; another process on the machine could take it (the start then fails).
// The component is resumed first if it was paused.
func (e *Env) RestartAPIServer() error {
	if e.Envtest == nil {
		return errors.New("testenv: restart kube-apiserver: the environment is stopped")
	}
	if err := e.Resume(APIServer); err != nil {
		return err
	}
	api := e.Envtest.ControlPlane.APIServer
	pid, err := e.PID(APIServer)
	if err != nil {
		return err
	}
	// envtest deletes a cert dir it created itself when the server stops and
	// would mint a new serving CA on start, which no existing client trusts:
	// keep a copy the environment owns and start from it.
	keep := filepath.Join(e.dir, "kube-apiserver-certs")
	if api.CertDir != keep {
		if err := copyDir(api.CertDir, keep); err != nil {
			return fmt.Errorf("testenv: restart kube-apiserver: keep certificates: %w", err)
		}
	}
	if err := terminate(pid, APIServerStopGrace); err != nil {
		return fmt.Errorf("testenv: restart kube-apiserver: %w", err)
	}
	// The process is gone; envtest's Stop only has its bookkeeping left, and
	// fails if it tries to signal the process it no longer finds.
	_ = api.Stop()
	api.CertDir = keep
	if err := api.Start(); err != nil {
		return fmt.Errorf("testenv: restart kube-apiserver: start: %w", err)
	}
	return nil
}

// APIServerStopGrace is how long [Env.RestartAPIServer] waits for
// kube-apiserver to exit after SIGTERM before it sends SIGKILL.
const APIServerStopGrace = 3 * time.Second

// terminate sends SIGTERM to pid, then SIGKILL after grace, and waits until
// the process has exited (at most 10s after SIGKILL).
func terminate(pid int, grace time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return fmt.Errorf("SIGTERM pid %d: %w", pid, err)
	}
	if waitExited(pid, grace) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGKILL pid %d: %w", pid, err)
	}
	if !waitExited(pid, 10*time.Second) {
		return fmt.Errorf("pid %d survived SIGKILL for 10s", pid)
	}
	return nil
}

func waitExited(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if exited(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func copyDir(from, to string) error {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, en := range entries {
		if !en.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, en.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, en.Name()), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

package chaos

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BuildBinary compiles the main package in dir with `go build` into the
// test's temporary directory and returns the binary's path (named after
// dir's last element). When the calling test binary was built with -race,
// so is this one: the process runs under the race detector as the test
// does, and its dependencies come from the race build the test's own
// compile left in the build cache instead of being compiled a second time
// without it. The go command's build cache makes a second build of the same
// package cheap. It fails the test when the build fails.
func BuildBinary(t testing.TB, dir string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(abs))
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	start := time.Now()
	cmd := exec.CommandContext(t.Context(), "go", append(args, ".")...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", dir, err, b)
	}
	t.Logf("built %s (race detector: %t) in %s", out, raceEnabled, time.Since(start).Round(time.Millisecond))
	return out
}

// Process is an operator running as a separate OS process, started by
// [StartProcess]: it can be killed as a crash kills it (SIGKILL: no deferred
// function runs, no lease is released, no request is finished).
type Process struct {
	// Name is how the process appears in the test's log.
	Name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // the exit status; valid once done is closed
	once sync.Once
}

// StartProcess starts binary with args, its standard output and error going
// to a file in the test's temporary directory (the last 40 lines are logged
// when the test fails). The process is killed (SIGKILL), and waited for,
// when the test ends if it is still running.
func StartProcess(t testing.TB, name, binary string, args ...string) *Process {
	t.Helper()
	log := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	// The test's context ends just before its cleanups run, which kills the
	// process (SIGKILL) if it is still running then.
	cmd := exec.CommandContext(t.Context(), binary, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &Process{Name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s (pid %d, %v): last lines of its output:\n%s", name, cmd.Process.Pid, p.err, p.Tail(40))
		}
	})
	return p
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Kill sends SIGKILL (once; later calls do nothing more) and waits until the
// process has exited. Safe to call from any goroutine, also after the
// process exited by itself.
func (p *Process) Kill() {
	p.once.Do(func() { _ = p.cmd.Process.Signal(syscall.SIGKILL) })
	<-p.done
}

// KillAsync sends SIGKILL without waiting for the exit: for a callback that
// must not block (see [Process.Kill] to wait).
func (p *Process) KillAsync() { p.once.Do(func() { _ = p.cmd.Process.Signal(syscall.SIGKILL) }) }

// Exited is closed once the process has exited, for whatever reason.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Err is the process's exit status once [Process.Exited] is closed (an
// *exec.ExitError for a kill), nil before.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Tail returns the last n lines of the process's output so far.
func (p *Process) Tail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

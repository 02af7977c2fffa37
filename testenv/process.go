package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one control-plane component that testenv runs itself (envtest runs
// etcd and kube-apiserver).
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	waitErr error
}

func commandContext(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// startProcess starts binary with args, its output in a log file (and in
// e.opts.output when set), and waits until ready returns nil.
func (e *Env) startProcess(name, binary string, args []string, ready func(ctx context.Context) error) error {
	logPath := filepath.Join(e.dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("testenv: %s: %w", name, err)
	}
	var out io.Writer = logFile
	if e.opts.output != nil {
		out = io.MultiWriter(logFile, e.opts.output)
	}
	// Not bound to a context: the process lives until Stop, which signals its group.
	cmd := exec.CommandContext(context.Background(), filepath.Join(e.AssetsDir, binary), args...)
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group, so that stopping the component also stops anything it spawned.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("testenv: start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	e.procs = append(e.procs, p)

	ctx, cancel := context.WithTimeout(context.Background(), e.opts.startTimeout)
	defer cancel()
	var lastErr error
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("testenv: %s exited during start-up (%w); log tail:\n%s", name, p.waitErr, tail(logPath))
		default:
		}
		if lastErr = ready(ctx); lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: %s not ready after %s: %w; log tail:\n%s", name, e.opts.startTimeout, lastErr, tail(logPath))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after 10s.
func (p *process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

func freePort() (int, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// healthz polls a component's secure /healthz (self-signed; nothing secret crosses it).
func healthz(port int) func(ctx context.Context) error {
	c := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // local component health only
	}
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return nil
	}
}

func (e *Env) componentArgs(port int) []string {
	args := []string{
		"--kubeconfig=" + e.KubeconfigPath,
		"--authentication-kubeconfig=" + e.KubeconfigPath,
		"--authorization-kubeconfig=" + e.KubeconfigPath,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + e.dir,
	}
	if len(e.opts.featureGates) > 0 {
		args = append(args, "--feature-gates="+strings.Join(e.opts.featureGates, ","))
	}
	return args
}

func (e *Env) startControllerManager() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	controllers := "garbage-collector-controller"
	if e.opts.workloads {
		// Token signing needs the apiserver's service-account key, which envtest
		// keeps; pods here need no tokens (envtest disables the ServiceAccount
		// admission plugin), so that one controller stays off.
		controllers = "*,-serviceaccount-token-controller"
	}
	args := append(e.componentArgs(port),
		"--controllers="+controllers,
		"--use-service-account-credentials=false",
		"--concurrent-gc-syncs=5",
	)
	args = append(args, e.opts.kcmArgs...)
	return e.startProcess("kube-controller-manager", "kube-controller-manager", args, healthz(port))
}

func (e *Env) startScheduler() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	return e.startProcess("kube-scheduler", "kube-scheduler", e.componentArgs(port), healthz(port))
}

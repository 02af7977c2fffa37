package assets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Versions pins what is built. The zero value is not useful; start from
// [DefaultVersions].
type Versions struct {
	// Kubernetes is the k8s.io/kubernetes release, e.g. "v1.37.2". The staging
	// modules (k8s.io/api, …) are taken at the matching v0.x.y.
	Kubernetes string
	// Etcd is the go.etcd.io/etcd/server/v3 release, e.g. "v3.6.16".
	Etcd string
	// Kwok is the sigs.k8s.io/kwok release, e.g. "v0.8.0".
	Kwok string
}

// DefaultVersions returns the releases opkit is tested against.
func DefaultVersions() Versions {
	return Versions{Kubernetes: "v1.37.2", Etcd: "v3.6.16", Kwok: "v0.8.0"}
}

// Binary names inside an asset directory.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kubectl               = "kubectl"
	Kwok                  = "kwok"
)

// All lists every binary the harness can run, in build order. [Ensure] and
// [Find] with no Options.Binaries mean these.
var All = []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler, Kwok, Kubectl}

// The binaries each mode of the harness (package testenv) needs. kubectl is
// in none of them: testenv builds it only when a test asks for it.
var (
	// Plain is etcd and kube-apiserver: what every control plane runs.
	Plain = []string{Etcd, KubeAPIServer}
	// GarbageCollector is Plain plus kube-controller-manager.
	GarbageCollector = []string{Etcd, KubeAPIServer, KubeControllerManager}
	// Workloads is GarbageCollector plus kube-scheduler and kwok.
	Workloads = []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler, Kwok}
)

// BuildCommand is the command a user runs to build every binary into the
// cache; [Find]'s error names the variant for the binaries that were asked for.
const BuildCommand = "go run github.com/opkit/opkit/cmd/opkit-assets"

// buildCommand is BuildCommand restricted to bins (all of [All]: no flag).
func buildCommand(bins []string) string {
	if len(bins) == len(All) {
		return BuildCommand
	}
	return BuildCommand + " -binaries " + strings.Join(bins, ",")
}

// Options configure [Ensure].
type Options struct {
	// Versions to build; zero fields are taken from [DefaultVersions].
	Versions Versions
	// CacheDir is the root under which asset directories live. Empty means
	// os.UserCacheDir()/opkit/controlplane (so ${XDG_CACHE_HOME:-$HOME/.cache}).
	CacheDir string
	// Progress receives one line per stage and a heartbeat while a stage runs.
	// Nil means io.Discard.
	Progress io.Writer
	// IgnoreEnv makes Ensure and Find disregard KUBEBUILDER_ASSETS.
	IgnoreEnv bool
	// Binaries are the binaries wanted, names from [All]; empty means [All].
	// Only these are looked for, and only the missing ones among them built.
	Binaries []string
}

func (o Options) withDefaults() (Options, error) {
	d := DefaultVersions()
	if o.Versions.Kubernetes == "" {
		o.Versions.Kubernetes = d.Kubernetes
	}
	if o.Versions.Etcd == "" {
		o.Versions.Etcd = d.Etcd
	}
	if o.Versions.Kwok == "" {
		o.Versions.Kwok = d.Kwok
	}
	if o.CacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return o, fmt.Errorf("assets: no cache directory: %w", err)
		}
		o.CacheDir = filepath.Join(base, "opkit", "controlplane")
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if len(o.Binaries) == 0 {
		o.Binaries = All
	}
	for _, b := range o.Binaries {
		if !slices.Contains(All, b) {
			return o, fmt.Errorf("assets: unknown binary %q (known: %s)", b, strings.Join(All, ", "))
		}
	}
	// In build order, each once.
	o.Binaries = slices.DeleteFunc(slices.Clone(All), func(b string) bool { return !slices.Contains(o.Binaries, b) })
	return o, nil
}

// Dir returns the directory the given options build into, without checking it.
func Dir(o Options) (string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return "", err
	}
	v := o.Versions
	name := fmt.Sprintf("k8s-%s_etcd-%s_kwok-%s_%s-%s", v.Kubernetes, v.Etcd, v.Kwok, runtime.GOOS, runtime.GOARCH)
	return filepath.Join(o.CacheDir, name), nil
}

// ErrNotFound is returned by [Find] when the wanted binaries are not all in
// one directory.
var ErrNotFound = errors.New("control-plane binaries not found")

// Find returns a directory holding every binary Options.Binaries names,
// without building anything: KUBEBUILDER_ASSETS when it holds them all,
// else the cache directory for opts ([Dir]) when it does. Otherwise it
// returns an error wrapping [ErrNotFound] whose message names the command
// that builds them.
func Find(opts Options) (string, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return "", err
	}
	if !opts.IgnoreEnv {
		if env := os.Getenv("KUBEBUILDER_ASSETS"); env != "" {
			if len(Missing(env, opts.Binaries)) == 0 {
				return env, nil
			}
		}
	}
	dir, err := Dir(opts)
	if err != nil {
		return "", err
	}
	missing := Missing(dir, opts.Binaries)
	if len(missing) == 0 {
		return dir, nil
	}
	return "", fmt.Errorf("%w: %s not in %s (KUBEBUILDER_ASSETS=%q): build them once with %q (%s on 2 cores from empty caches, instant afterwards)",
		ErrNotFound, strings.Join(missing, ", "), dir, os.Getenv("KUBEBUILDER_ASSETS"), buildCommand(opts.Binaries), coldEstimate(missing))
}

// coldMinutes is roughly what building each binary costs on a quiet 2-core
// machine with an empty Go build cache (CPU time measured in docs/testenv-cold-builds.md,
// halved); a binary of the kubernetes module built after another one costs
// less, since most of its packages are then in the build cache.
var coldMinutes = map[string]float64{Etcd: 2, KubeAPIServer: 8, KubeControllerManager: 3, KubeScheduler: 0.5, Kwok: 2.5, Kubectl: 1}

// coldEstimate says about how long building bins takes from empty caches.
func coldEstimate(bins []string) string {
	var m float64
	for _, b := range bins {
		m += coldMinutes[b]
	}
	return fmt.Sprintf("about %.0f minutes", max(m, 1))
}

// Missing returns the binaries among bins that dir does not hold as regular
// files, in the order of bins.
func Missing(dir string, bins []string) []string {
	var missing []string
	for _, b := range bins {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || !fi.Mode().IsRegular() {
			missing = append(missing, b)
		}
	}
	return missing
}

// Ensure returns a directory holding every binary Options.Binaries names,
// building the missing ones into the cache directory first when [Find]
// finds none. Binaries already in the cache are kept, so a later call for
// more binaries builds only the difference. A build holds an exclusive lock
// on "<dir>.lock"; a caller that waited for the lock re-checks and builds
// only what the other builder did not. Each binary is built in a temporary
// directory, checked with --version, and renamed into the cache directory
// only then: a failed or interrupted build leaves nothing behind but its
// error, which names the stage.
func Ensure(ctx context.Context, opts Options) (string, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return "", err
	}
	if dir, err := Find(opts); err == nil {
		return dir, nil
	}
	dir, err := Dir(opts)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("assets: create cache directory: %w", err)
	}
	unlock, err := lockFile(dir + ".lock")
	if err != nil {
		return "", fmt.Errorf("assets: lock %s.lock: %w", dir, err)
	}
	defer unlock()
	missing := Missing(dir, opts.Binaries) // another process may have built some while we waited
	if len(missing) == 0 {
		return dir, nil
	}
	b := &builder{opts: opts, start: time.Now()}
	if err := b.build(ctx, dir, missing); err != nil {
		return "", err
	}
	return dir, nil
}

type builder struct {
	opts  Options
	start time.Time
	env   []string
}

func (b *builder) logf(format string, args ...any) {
	fmt.Fprintf(b.opts.Progress, "[opkit-assets %4.0fs] %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, args...))
}

// stage runs fn under a named stage, with a heartbeat so a long build is visibly alive.
func (b *builder) stage(name string, fn func() error) error {
	b.logf("%s: start", name)
	t0 := time.Now()
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(30 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				b.logf("%s: still running (%.0fs in this stage)", name, time.Since(t0).Seconds())
			}
		}
	}()
	err := fn()
	close(done)
	if err != nil {
		b.logf("%s: FAILED after %.0fs", name, time.Since(t0).Seconds())
		return fmt.Errorf("assets: stage %q failed: %w", name, err)
	}
	b.logf("%s: done in %.0fs", name, time.Since(t0).Seconds())
	return nil
}

// build builds bins (names from All, in All's order) and moves them into dir.
func (b *builder) build(ctx context.Context, dir string, bins []string) error {
	v := b.opts.Versions
	work, err := os.MkdirTemp(filepath.Dir(dir), ".build-")
	if err != nil {
		return fmt.Errorf("assets: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()
	out := filepath.Join(work, "bin")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("assets: %w", err)
	}
	b.env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false", "GO111MODULE=on")
	b.logf("building %s (Kubernetes %s, etcd %s, kwok %s) into %s; %s on 2 cores from empty caches", strings.Join(bins, ", "), v.Kubernetes, v.Etcd, v.Kwok, dir, coldEstimate(bins))

	staging, err := stagingVersion(v.Kubernetes)
	if err != nil {
		return err
	}
	var kube []string // k8s.io/kubernetes/cmd/… packages, built by one go build
	for _, bin := range []string{KubeAPIServer, KubeControllerManager, KubeScheduler, Kubectl} {
		if slices.Contains(bins, bin) {
			kube = append(kube, "k8s.io/kubernetes/cmd/"+bin)
		}
	}
	type step struct {
		name string
		fn   func() error
	}
	var steps []step
	if slices.Contains(bins, Etcd) {
		steps = append(steps, step{"etcd " + v.Etcd, func() error {
			return b.goBuild(ctx, filepath.Join(work, "etcd"), "go.etcd.io/etcd/server/v3", v.Etcd, nil, stripDebug, out, "go.etcd.io/etcd/server/v3")
		}})
	}
	if len(kube) > 0 {
		names := make([]string, len(kube))
		for i, p := range kube {
			names[i] = filepath.Base(p)
		}
		steps = append(steps, step{"kubernetes " + v.Kubernetes + " (" + strings.Join(names, ", ") + ")", func() error {
			replaces, err := b.kubernetesReplaces(ctx, work, v.Kubernetes, staging)
			if err != nil {
				return err
			}
			return b.goBuild(ctx, filepath.Join(work, "kubernetes"), "k8s.io/kubernetes", v.Kubernetes, replaces, kubernetesLDFlags(v.Kubernetes), out, kube...)
		}})
	}
	if slices.Contains(bins, Kwok) {
		steps = append(steps, step{"kwok " + v.Kwok, func() error {
			return b.goBuild(ctx, filepath.Join(work, "kwok"), "sigs.k8s.io/kwok", v.Kwok, nil, stripDebug, out, "sigs.k8s.io/kwok/cmd/kwok")
		}})
	}
	steps = append(steps, step{"verify --version", func() error { return verify(ctx, out, v, bins) }})
	for _, s := range steps {
		if err := b.stage(s.name, s.fn); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("assets: %w", err)
	}
	// One rename per binary, each atomic: a reader sees a binary whole or
	// not at all, and never one that failed its --version check.
	for _, bin := range bins {
		if err := os.Rename(filepath.Join(out, bin), filepath.Join(dir, bin)); err != nil {
			return fmt.Errorf("assets: move %s into place: %w", bin, err)
		}
	}
	b.logf("complete: %s in %s (%.0fs)", strings.Join(bins, ", "), dir, time.Since(b.start).Seconds())
	return nil
}

// stagingVersion maps a Kubernetes release v1.X.Y to its staging modules' v0.X.Y.
func stagingVersion(k8s string) (string, error) {
	if !strings.HasPrefix(k8s, "v1.") {
		return "", fmt.Errorf("assets: Kubernetes version %q is not of the form v1.X.Y", k8s)
	}
	return "v0." + strings.TrimPrefix(k8s, "v1."), nil
}

// stripDebug are the linker flags every binary is built with: no symbol
// table and no DWARF. Tests never debug the control plane, and the linker's
// DWARF pass is a serial part of a cold build.
const stripDebug = "-s -w"

func kubernetesLDFlags(k8s string) string {
	parts := strings.SplitN(strings.TrimPrefix(k8s, "v"), ".", 3)
	var flags []string
	for _, pkg := range []string{"k8s.io/client-go/pkg/version", "k8s.io/component-base/version"} {
		flags = append(flags,
			"-X "+pkg+".gitVersion="+k8s,
			"-X "+pkg+".gitMajor="+parts[0],
			"-X "+pkg+".gitMinor="+parts[1],
			"-X "+pkg+".gitTreeState=clean",
			// A fixed date keeps the build reproducible bit for bit.
			"-X "+pkg+".buildDate=1970-01-01T00:00:00Z")
	}
	return stripDebug + " " + strings.Join(flags, " ")
}

// kubernetesReplaces reads k8s.io/kubernetes's own go.mod and turns each replace
// into ./staging into a replace by the published module at the staging version:
// the module zip has no staging/ directory.
func (b *builder) kubernetesReplaces(ctx context.Context, work, k8s, staging string) ([]string, error) {
	var dl struct{ GoMod, Error string }
	raw, err := b.goCmd(ctx, work, "mod", "download", "-json", "k8s.io/kubernetes@"+k8s)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &dl); err != nil {
		return nil, fmt.Errorf("parse go mod download output: %w", err)
	}
	if dl.GoMod == "" {
		return nil, fmt.Errorf("go mod download k8s.io/kubernetes@%s gave no go.mod: %s", k8s, dl.Error)
	}
	raw, err = b.goCmd(ctx, work, "mod", "edit", "-json", dl.GoMod)
	if err != nil {
		return nil, err
	}
	var mod struct {
		Replace []struct {
			Old, New struct{ Path, Version string }
		}
	}
	if err := json.Unmarshal(raw, &mod); err != nil {
		return nil, fmt.Errorf("parse kubernetes go.mod: %w", err)
	}
	var replaces []string
	for _, r := range mod.Replace {
		if strings.HasPrefix(r.New.Path, "./staging/") {
			replaces = append(replaces, r.Old.Path+"="+r.Old.Path+"@"+staging)
		}
	}
	if len(replaces) == 0 {
		return nil, fmt.Errorf("kubernetes %s go.mod has no staging replaces; the build recipe no longer fits", k8s)
	}
	b.logf("kubernetes: replacing %d staging modules with their published %s", len(replaces), staging)
	return replaces, nil
}

// goBuild builds pkgs from a throwaway wrapper module that requires mod@version:
// `go install pkg@version` refuses modules whose go.mod has replace directives.
func (b *builder) goBuild(ctx context.Context, wrapper, mod, version string, replaces []string, ldflags, out string, pkgs ...string) error {
	if err := os.MkdirAll(wrapper, 0o755); err != nil {
		return err
	}
	gomod := "module opkit.local/assets-wrapper\n\ngo 1.26\n"
	if err := os.WriteFile(filepath.Join(wrapper, "go.mod"), []byte(gomod), 0o644); err != nil {
		return err
	}
	for _, r := range replaces {
		if _, err := b.goCmd(ctx, wrapper, "mod", "edit", "-replace="+r); err != nil {
			return err
		}
	}
	if _, err := b.goCmd(ctx, wrapper, "mod", "edit", "-require="+mod+"@"+version); err != nil {
		return err
	}
	// Each package at the pinned version: a bare `go get pkg` would resolve to
	// the module's latest release instead.
	get := []string{"get"}
	for _, p := range pkgs {
		get = append(get, p+"@"+version)
	}
	if _, err := b.goCmd(ctx, wrapper, get...); err != nil {
		return err
	}
	target := out + string(filepath.Separator)
	if mod == "go.etcd.io/etcd/server/v3" {
		// The etcd main package is the module root, which go build would name "server".
		target = filepath.Join(out, Etcd)
	}
	args := []string{"build", "-trimpath", "-tags", "selinux,notest,grpcnotrace", "-o", target}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	args = append(args, pkgs...)
	_, err := b.goCmd(ctx, wrapper, args...)
	return err
}

func (b *builder) goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = b.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 4000 {
			msg = "…" + msg[len(msg)-4000:]
		}
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, msg)
	}
	return stdout.Bytes(), nil
}

// verify runs each of bins in dir with its version flag and checks the
// release it reports.
func verify(ctx context.Context, dir string, v Versions, bins []string) error {
	want := map[string]string{
		Etcd:                  strings.TrimPrefix(v.Etcd, "v"),
		KubeAPIServer:         v.Kubernetes,
		KubeControllerManager: v.Kubernetes,
		KubeScheduler:         v.Kubernetes,
		Kubectl:               v.Kubernetes,
		Kwok:                  "",
	}
	for _, bin := range bins {
		args := []string{"--version"}
		if bin == Kubectl {
			args = []string{"version", "--client"}
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := exec.CommandContext(ctx, filepath.Join(dir, bin), args...).CombinedOutput()
		cancel()
		if err != nil {
			return fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, out)
		}
		if !strings.Contains(string(out), want[bin]) {
			return fmt.Errorf("%s reports %q, want a version containing %q", bin, strings.TrimSpace(string(out)), want[bin])
		}
	}
	return nil
}

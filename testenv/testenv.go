package testenv

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/opkit/opkit/testenv/assets"
)

// Env is a running control plane. Its fields are set by [New] and must not be
// changed by callers.
type Env struct {
	// Config authenticates as a cluster administrator (system:masters).
	Config *rest.Config
	// Client is a direct (uncached) client built from Config and Scheme.
	Client client.Client
	// Scheme holds client-go's types, apiextensions/v1 and whatever WithScheme added.
	Scheme *runtime.Scheme
	// KubeconfigPath is a kubeconfig file for Config that kubectl accepts.
	KubeconfigPath string
	// AssetsDir holds the control-plane binaries in use: those of the
	// environment's mode (see [assets.Plain], [assets.GarbageCollector],
	// [assets.Workloads]). kubectl may be absent until [Env.KubectlPath]
	// finds or builds it.
	AssetsDir string
	// Envtest is the underlying controller-runtime environment, for what this
	// package does not wrap (e.g. AddUser for an RBAC-limited identity).
	Envtest *envtest.Environment

	opts  options
	dir   string
	procs []*process

	kubectlOnce sync.Once
	kubectl     string
	kubectlErr  error

	mu     sync.Mutex
	paused map[Component]int // SIGSTOPped components and their PIDs
}

type options struct {
	crdPaths       []string
	crds           []*apiextensionsv1.CustomResourceDefinition
	scheme         *runtime.Scheme
	gc             bool
	workloads      bool
	featureGates   []string
	apiServerArgs  map[string][]string
	kcmArgs        []string
	output         io.Writer
	startTimeout   time.Duration
	webhooks       *envtest.WebhookInstallOptions
	buildIfMissing bool

	ignoredGoroutines []string
}

// Option configures [New].
type Option func(*options)

// WithCRDPaths installs every CRD found in the given files or directories
// (YAML, recursively) before New returns, and waits until they are served.
// A path that does not exist is an error.
func WithCRDPaths(paths ...string) Option {
	return func(o *options) { o.crdPaths = append(o.crdPaths, paths...) }
}

// WithCRDs installs the given CRD objects, like [WithCRDPaths].
func WithCRDs(crds ...*apiextensionsv1.CustomResourceDefinition) Option {
	return func(o *options) { o.crds = append(o.crds, crds...) }
}

// WithScheme makes Env.Client use s. s should include client-go's types.
func WithScheme(s *runtime.Scheme) Option { return func(o *options) { o.scheme = s } }

// WithGarbageCollector also runs kube-controller-manager restricted to the
// garbage collector, so deleting an owner really deletes its dependents.
func WithGarbageCollector() Option { return func(o *options) { o.gc = true } }

// WithWorkloads runs kube-controller-manager with its default controllers,
// kube-scheduler, and kwok managing one fake node named [FakeNodeName], so
// Deployments, StatefulSets and Jobs progress as on a real cluster: Pods are
// scheduled and become Running and Ready. It implies [WithGarbageCollector].
func WithWorkloads() Option { return func(o *options) { o.workloads, o.gc = true, true } }

// WithFeatureGates passes feature gates ("Name=true") to kube-apiserver and,
// when they run, kube-controller-manager and kube-scheduler.
func WithFeatureGates(gates ...string) Option {
	return func(o *options) { o.featureGates = append(o.featureGates, gates...) }
}

// WithAPIServerArgs appends values to a kube-apiserver flag (without "--").
func WithAPIServerArgs(flag string, values ...string) Option {
	return func(o *options) {
		if o.apiServerArgs == nil {
			o.apiServerArgs = map[string][]string{}
		}
		o.apiServerArgs[flag] = append(o.apiServerArgs[flag], values...)
	}
}

// WithControllerManagerArgs appends "--flag=value" to kube-controller-manager's
// command line for each value (flag without "--"), after testenv's own
// flags, so a flag given here overrides testenv's. It matters only when
// kube-controller-manager runs ([WithGarbageCollector], [WithWorkloads]).
// E.g. WithControllerManagerArgs("kube-api-qps", "200") lifts its client
// rate limit (20 requests/s per controller) for tests with thousands of
// Deployments.
func WithControllerManagerArgs(flag string, values ...string) Option {
	return func(o *options) {
		for _, v := range values {
			o.kcmArgs = append(o.kcmArgs, "--"+flag+"="+v)
		}
	}
}

// WithOutput copies every control-plane process's output to w. By default it
// goes to log files in the environment's temporary directory, and the tail of
// a failed process's log is part of the error.
func WithOutput(w io.Writer) Option { return func(o *options) { o.output = w } }

// WithStartTimeout bounds how long each component may take to become ready
// (default 90s; the machine may be busy compiling other test packages).
func WithStartTimeout(d time.Duration) Option { return func(o *options) { o.startTimeout = d } }

// WithWebhooks installs webhook configurations through envtest, which points
// them at a local server with a generated serving certificate.
func WithWebhooks(w envtest.WebhookInstallOptions) Option {
	return func(o *options) { o.webhooks = &w }
}

// WithBuildIfMissing builds the missing control-plane binaries the
// environment's mode needs (and kubectl, when [Env.KubectlPath] needs it)
// instead of failing: a few minutes cold for the plain mode, 10-15 for
// workloads. OPKIT_ASSETS_BUILD=1 has the same effect.
func WithBuildIfMissing() Option { return func(o *options) { o.buildIfMissing = true } }

// FakeNodeName is the node kwok manages in workloads mode.
const FakeNodeName = "kwok-node-0"

// New starts a control plane. Callers must call [Env.Stop]. It needs only
// its mode's binaries: [assets.Plain] (etcd, kube-apiserver), with
// [WithGarbageCollector] [assets.GarbageCollector], with [WithWorkloads]
// [assets.Workloads]; kubectl is not needed until [Env.KubectlPath]. It
// fails, and never skips, when they are missing (unless [WithBuildIfMissing]);
// the error names the command that builds exactly them.
func New(opts ...Option) (*Env, error) {
	o := options{startTimeout: 90 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if os.Getenv("OPKIT_ASSETS_BUILD") == "1" {
		o.buildIfMissing = true
	}
	dir, err := findAssets(o.buildIfMissing, o.binaries())
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "opkit-testenv-")
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	e := &Env{AssetsDir: dir, opts: o, dir: tmp}
	if err := e.start(); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

// binaries are the ones the environment's mode runs.
func (o options) binaries() []string {
	switch {
	case o.workloads:
		return assets.Workloads
	case o.gc:
		return assets.GarbageCollector
	default:
		return assets.Plain
	}
}

func findAssets(build bool, bins []string) (string, error) {
	dir, err := assets.Find(assets.Options{Binaries: bins})
	if err == nil {
		return dir, nil
	}
	if !errors.Is(err, assets.ErrNotFound) || !build {
		return "", fmt.Errorf("testenv: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	dir, err = assets.Ensure(ctx, assets.Options{Progress: os.Stderr, Binaries: bins})
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	return dir, nil
}

// Start is [New] for one test: it fails tb when the control plane cannot start
// and stops it when tb's cleanup runs.
func Start(tb testing.TB, opts ...Option) *Env {
	tb.Helper()
	e, err := New(opts...)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() {
		if err := e.Stop(); err != nil {
			tb.Errorf("testenv: stop: %v", err)
		}
	})
	return e
}

// RunMain starts one control plane for a test package, stores it in *env, runs
// the tests (m is the *testing.M TestMain received, or a wrapper whose Run
// starts something that needs *env first) and stops it. It returns the exit
// code for os.Exit; a control plane that fails to start makes it print the
// error and return 1.
//
// When the tests passed, RunMain then checks for leaked goroutines
// (go.uber.org/goleak): every goroutine started after RunMain was called that
// is still running once the tests ended and the control plane stopped — a
// manager, informer, watch or server a test left running — fails the package
// (exit code 1) with the goroutines' stacks. Keep-alive connections of
// client-go's transports, klog's flush daemon and apimachinery's watch.Filter
// loop (an upstream flaw of metadata-only informers) are not counted;
// [WithIgnoredGoroutines] exempts more.
//
// A fuzzing run (go test -fuzz, the coordinator and each of its worker
// processes) starts no control plane and leaves *env nil: every worker
// would otherwise start its own, and fuzzing a parser would wait on
// control planes instead of running inputs. Fuzz targets in a package that
// uses RunMain must not use *env; its seed corpus still runs with the
// package's other tests (go test without -fuzz), control plane started.
func RunMain(m interface{ Run() int }, env **Env, opts ...Option) int {
	if fuzzing() {
		return m.Run()
	}
	before := goleak.IgnoreCurrent()
	e, err := New(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stop:", err)
		if code == 0 {
			code = 1
		}
	}
	if code == 0 && !checkLeaks(before, e.opts.ignoredGoroutines) {
		code = 1
	}
	return code
}

func (e *Env) start() error {
	o := e.opts
	e.Scheme = o.scheme
	if e.Scheme == nil {
		e.Scheme = runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(e.Scheme); err != nil {
			return err
		}
		if err := apiextensionsv1.AddToScheme(e.Scheme); err != nil {
			return err
		}
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory:    e.AssetsDir,
		CRDDirectoryPaths:        o.crdPaths,
		CRDs:                     o.crds,
		ErrorIfCRDPathMissing:    true,
		Scheme:                   e.Scheme,
		ControlPlaneStartTimeout: o.startTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	if o.webhooks != nil {
		te.WebhookInstallOptions = *o.webhooks
	}
	api := te.ControlPlane.GetAPIServer()
	if len(o.featureGates) > 0 {
		api.Configure().Append("feature-gates", strings.Join(o.featureGates, ","))
	}
	for flag, values := range o.apiServerArgs {
		for _, v := range values {
			api.Configure().Append(flag, v)
		}
	}
	if o.output != nil {
		api.Out, api.Err = o.output, o.output
		te.ControlPlane.Etcd = &envtest.Etcd{Out: o.output, Err: o.output}
	}
	e.Envtest = te
	cfg, err := te.Start()
	if err != nil {
		return fmt.Errorf("testenv: start etcd and kube-apiserver from %s: %w", e.AssetsDir, err)
	}
	e.Config = cfg
	e.Client, err = client.New(cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		return fmt.Errorf("testenv: client: %w", err)
	}
	e.KubeconfigPath = filepath.Join(e.dir, "kubeconfig")
	if err := os.WriteFile(e.KubeconfigPath, te.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("testenv: write kubeconfig: %w", err)
	}
	if o.gc {
		if err := e.startControllerManager(); err != nil {
			return err
		}
	}
	if o.workloads {
		if err := e.startScheduler(); err != nil {
			return err
		}
		if err := e.startKwok(); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops every component, in reverse start order, and removes the
// temporary directory. It is safe to call more than once.
func (e *Env) Stop() error {
	var errs []error
	// A stopped process would not act on SIGTERM until continued.
	e.resumeAll()
	for i := len(e.procs) - 1; i >= 0; i-- {
		e.procs[i].stop()
	}
	e.procs = nil
	if e.Envtest != nil {
		if err := e.Envtest.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("testenv: stop etcd and kube-apiserver: %w", err))
		}
		e.Envtest = nil
	}
	if e.dir != "" {
		if err := os.RemoveAll(e.dir); err != nil {
			errs = append(errs, err)
		}
		e.dir = ""
	}
	return errors.Join(errs...)
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace for one test, named after it with a random
// suffix, and deletes it when tb's cleanup runs. Without the garbage collector
// or namespace controller the namespace's objects stay in etcd, but no other
// test sees them.
func (e *Env) Namespace(tb testing.TB) string {
	tb.Helper()
	prefix := nonDNS.ReplaceAllString(strings.ToLower(tb.Name()), "-")
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	prefix = strings.Trim(prefix, "-") + "-"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Client.Create(ctx, ns); err != nil {
		tb.Fatalf("testenv: create namespace: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.Client.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			tb.Errorf("testenv: delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// KubectlPath returns the path of a kubectl binary of the harness's
// Kubernetes release: AssetsDir's when it has one, else the one in
// [assets.Find]'s cache. When neither has one it builds it into the cache
// (a minute or two once the control plane's binaries were built with a warm
// Go build cache) if the environment was started with [WithBuildIfMissing]
// or OPKIT_ASSETS_BUILD=1, and otherwise fails with the command that builds
// it. The result, error included, is remembered for the environment's life.
func (e *Env) KubectlPath(ctx context.Context) (string, error) {
	e.kubectlOnce.Do(func() {
		if len(assets.Missing(e.AssetsDir, []string{assets.Kubectl})) == 0 {
			e.kubectl = filepath.Join(e.AssetsDir, assets.Kubectl)
			return
		}
		opts := assets.Options{Binaries: []string{assets.Kubectl}, Progress: os.Stderr}
		dir, err := assets.Find(opts)
		if err != nil && errors.Is(err, assets.ErrNotFound) && e.opts.buildIfMissing {
			dir, err = assets.Ensure(ctx, opts)
		}
		if err != nil {
			e.kubectlErr = fmt.Errorf("testenv: kubectl: %w", err)
			return
		}
		e.kubectl = filepath.Join(dir, assets.Kubectl)
	})
	return e.kubectl, e.kubectlErr
}

// Kubectl runs kubectl ([Env.KubectlPath]) against this control plane and
// returns its combined output.
func (e *Env) Kubectl(ctx context.Context, args ...string) (string, error) {
	kubectl, err := e.KubectlPath(ctx)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd := commandContext(ctx, kubectl, append([]string{"--kubeconfig", e.KubeconfigPath}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

func clientKey(name string) client.ObjectKey { return client.ObjectKey{Name: name} }

// fuzzing reports whether the test binary runs as go test -fuzz's
// coordinator or one of its workers.
func fuzzing() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		return true
	}
	f := flag.Lookup("test.fuzzworker")
	return f != nil && f.Value.String() == "true"
}

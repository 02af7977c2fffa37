package examplecmd

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/opkit/opkit/observability/metricsauth"
	"github.com/opkit/opkit/testenv"
)

// Main runs run with a context that ends on SIGINT or SIGTERM. When run fails
// for any reason but that context's cancellation, Main prints "name: err" on
// stderr and exits 1; otherwise it returns.
func Main(name string, run func(context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Flags are the command-line options every single-operator example shares.
// The zero value runs against the cluster [Flags.ClusterConfig] finds, with
// the addresses [Flags.DefaultAddrs] picks, metrics over HTTPS behind
// [metricsauth.FilterProvider], HTTP/2 off and no leader election: the
// secure choices are the zero values, so a Flags built in code is as safe
// as the command line's defaults.
type Flags struct {
	// Kubeconfig is controller-runtime's --kubeconfig (see [Flags.ReadKubeconfig]).
	Kubeconfig string
	// Embedded always starts an embedded control plane, even when a cluster is configured.
	Embedded bool
	// ExitWhenReady bounds the embedded demo: it exits once its tour is done.
	ExitWhenReady bool
	// Timeout bounds the demo with ExitWhenReady.
	Timeout time.Duration
	// MetricsAddr and ProbeAddr are the manager's metrics and health probe
	// endpoints; "0" disables one, "" lets [Flags.DefaultAddrs] choose.
	MetricsAddr, ProbeAddr string
	// MetricsInsecure serves metrics over plain HTTP without authentication
	// (--metrics-secure=false). By default they are served over HTTPS (a
	// self-signed certificate unless one is mounted in controller-runtime's
	// metrics CertDir) and every scrape must carry a bearer token of a user
	// allowed to get /metrics.
	MetricsInsecure bool
	// EnableHTTP2 lets the metrics and webhook servers negotiate HTTP/2
	// (--enable-http2). Off by default, as in kubebuilder's scaffold: HTTP/2
	// Rapid Reset and Stream Cancellation (CVE-2023-44487, CVE-2023-39325).
	EnableHTTP2 bool
	// LeaderElect turns on the manager's leader election.
	LeaderElect bool
	// WatchNamespace, when set (--watch-namespace), limits the manager's
	// caches to that one namespace: the operator sees and reconciles only the
	// objects there (its RBAC may then be a Role). Empty: every namespace.
	WatchNamespace string
	// Zap holds controller-runtime's --zap-* flags (zap.Options.BindFlags):
	// encoder, log level, stack trace level, time encoding, development mode.
	Zap crzap.Options
	// Verbose (-v) writes an embedded demo's operator logs to the terminal
	// (stderr) instead of a file.
	Verbose bool
	// LogFile is where an embedded demo writes its operator logs (--log-file);
	// empty means a new file in the temporary directory. The demo names it.
	LogFile string
}

// Register defines the shared flags on fs. exitWhenReady completes the help
// of --exit-when-ready (what the bounded demo waits for); timeout is the
// default of --timeout. --kubeconfig is not defined here: controller-runtime
// defines it on flag.CommandLine when it is imported.
func (f *Flags) Register(fs *flag.FlagSet, exitWhenReady string, timeout time.Duration) {
	fs.BoolVar(&f.Embedded, "embedded", false, "always start an embedded control plane, even when a cluster is configured")
	fs.BoolVar(&f.ExitWhenReady, "exit-when-ready", false, exitWhenReady)
	fs.DurationVar(&f.Timeout, "timeout", timeout, "with --exit-when-ready: give up after this long")
	fs.StringVar(&f.MetricsAddr, "metrics-bind-address", "", "metrics endpoint, e.g. :8443; 0 disables (default :8443 on a cluster, a free loopback port when embedded)")
	fs.Var((*negated)(&f.MetricsInsecure), "metrics-secure", "serve metrics over HTTPS, only to bearer tokens allowed to get /metrics (TokenReview + SubjectAccessReview) (default true); false: plain HTTP without authentication, e.g. for the embedded demo")
	fs.BoolVar(&f.EnableHTTP2, "enable-http2", false, "let the metrics and webhook servers negotiate HTTP/2 (off: HTTP/2 Rapid Reset, CVE-2023-44487)")
	fs.StringVar(&f.ProbeAddr, "health-probe-bind-address", "", "health probe endpoint (default :8081 on a cluster, a free loopback port when embedded)")
	fs.BoolVar(&f.LeaderElect, "leader-elect", false, "enable leader election (on in the config/ manifests)")
	fs.StringVar(&f.WatchNamespace, "watch-namespace", "", "reconcile only the objects in this namespace (default: every namespace)")
	fs.BoolVar(&f.Verbose, "v", false, "embedded demo: write the operator's logs to the terminal instead of a file")
	fs.StringVar(&f.LogFile, "log-file", "", "embedded demo: write the operator's logs to this file (default: a new file in the temporary directory)")
	f.Zap.BindFlags(fs)
}

// negated is a bool flag stored inverted, so that the secure setting is the
// zero value of the field behind it.
type negated bool

func (n *negated) String() string { return strconv.FormatBool(n != nil && !bool(*n)) }

func (n *negated) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*n = negated(!v)
	return nil
}

func (*negated) IsBoolFlag() bool { return true }

// ReadKubeconfig sets Kubeconfig from fs's --kubeconfig, if fs has one: a
// cluster to run against (default: $KUBECONFIG, else the in-cluster config,
// else an embedded control plane). Call it after parsing fs.
func (f *Flags) ReadKubeconfig(fs *flag.FlagSet) {
	if fl := fs.Lookup("kubeconfig"); fl != nil {
		f.Kubeconfig = fl.Value.String()
	}
}

// ClusterConfig returns the cluster to run against, in controller-runtime's
// order (ctrl.GetConfig): the Kubeconfig file when set, else the files
// $KUBECONFIG lists (merged, with its current context), else the in-cluster
// config. It returns nil, nil when the demo should start its own control
// plane: with Embedded, or when none of those is configured. Unlike
// ctrl.GetConfig it does not fall back to ~/.kube/config: a demo run without
// flags stays on its embedded control plane (pass --kubeconfig
// ~/.kube/config for that cluster). A configured kubeconfig that cannot be
// loaded is an error. Like ctrl.GetConfig, it turns client-side rate
// limiting off (QPS -1) unless the kubeconfig sets a QPS: the API server's
// Priority and Fairness paces the operator, not client-go's default of 5
// requests/s.
func (f *Flags) ClusterConfig() (*rest.Config, error) {
	if f.Embedded {
		return nil, nil
	}
	if f.Kubeconfig != "" || os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "" {
		rules := clientcmd.NewDefaultClientConfigLoadingRules() // $KUBECONFIG
		rules.ExplicitPath = f.Kubeconfig
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		return unlimited(cfg), nil
	}
	if cfg, err := rest.InClusterConfig(); err == nil {
		return unlimited(cfg), nil
	}
	return nil, nil
}

// unlimited turns cfg's client-side rate limiting off when nothing set it,
// as ctrl.GetConfig does.
func unlimited(cfg *rest.Config) *rest.Config {
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS = -1
	}
	return cfg
}

// DefaultAddrs fills in MetricsAddr and ProbeAddr where they are empty: a
// free loopback port each when embedded (a demo on a laptop must not clash
// with whatever holds :8443), else :8443 (:8080 with MetricsInsecure) and
// :8081, the ports the config/ manifests use. Addresses already set, "0"
// included, are kept.
func (f *Flags) DefaultAddrs(embedded bool) {
	metrics, probe := ":8443", ":8081"
	if f.MetricsInsecure {
		metrics = ":8080"
	}
	if embedded {
		metrics, probe = FreeLoopback(), FreeLoopback()
	}
	if f.MetricsAddr == "" {
		f.MetricsAddr = metrics
	}
	if f.ProbeAddr == "" {
		f.ProbeAddr = probe
	}
}

// TLSOpts are the TLS settings of the metrics and webhook servers: without
// EnableHTTP2, ALPN offers only http/1.1, so no client can speak HTTP/2 to
// them.
func (f *Flags) TLSOpts() []func(*tls.Config) {
	if f.EnableHTTP2 {
		return nil
	}
	return []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
}

// MetricsURL is where the manager serves metrics: https://… or, with
// MetricsInsecure, http://…; "" when MetricsAddr is "0". An address without
// a host (":8443") is shown on localhost.
func (f *Flags) MetricsURL() string {
	if f.MetricsAddr == "0" || f.MetricsAddr == "" {
		return ""
	}
	addr := f.MetricsAddr
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		addr = net.JoinHostPort("localhost", port)
	}
	scheme := "https"
	if f.MetricsInsecure {
		scheme = "http"
	}
	return scheme + "://" + addr + "/metrics"
}

// ManagerOptions returns the manager options the flags decide: scheme, the
// metrics and probe addresses as they are (call [Flags.DefaultAddrs] first),
// metrics over HTTPS behind [metricsauth.FilterProvider] unless
// MetricsInsecure, [Flags.TLSOpts] on the metrics and webhook servers, and
// leader election under leaderElectionID in $POD_NAMESPACE (empty outside a
// pod: controller-runtime then uses the in-cluster namespace), and caches
// limited to WatchNamespace when it is set. A caller that
// replaces WebhookServer should give it [Flags.TLSOpts] too.
func (f *Flags) ManagerOptions(scheme *runtime.Scheme, leaderElectionID string) manager.Options {
	metrics := metricsserver.Options{BindAddress: f.MetricsAddr, SecureServing: !f.MetricsInsecure, TLSOpts: f.TLSOpts()}
	if metrics.SecureServing {
		metrics.FilterProvider = metricsauth.FilterProvider
	}
	var caches cache.Options
	if f.WatchNamespace != "" {
		caches.DefaultNamespaces = map[string]cache.Config{f.WatchNamespace: {}}
	}
	return manager.Options{
		Cache:                   caches,
		Scheme:                  scheme,
		Metrics:                 metrics,
		WebhookServer:           crwebhook.NewServer(crwebhook.Options{TLSOpts: f.TLSOpts()}),
		HealthProbeBindAddress:  f.ProbeAddr,
		LeaderElection:          f.LeaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: os.Getenv("POD_NAMESPACE"),
	}
}

// NewScheme returns a scheme with client-go's types and those each add
// registers, in order.
func NewScheme(add ...func(*runtime.Scheme) error) (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	for _, f := range add {
		if err := f(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// FreeLoopback returns an address on 127.0.0.1 with a port that was free a
// moment ago, or "0" (disabled) when none could be had. Another process may
// take the port before the caller binds it; the demo accepts that race.
func FreeLoopback() string {
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return "0"
	}
	defer l.Close()
	return l.Addr().String()
}

// WaitWebhooks waits until mgr's webhook server is serving, polling every
// 100ms, or returns ctx's error. With failurePolicy Fail, nothing the webhooks
// admit can be created before then.
func WaitWebhooks(ctx context.Context, mgr manager.Manager) error {
	check := mgr.GetWebhookServer().StartedChecker()
	for {
		if err := check(nil); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// EnsureNamespace creates namespace ns; one that exists already is fine.
func EnsureNamespace(ctx context.Context, c client.Client, ns string) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// Narrator prints an embedded demo's progress on stdout, each line prefixed
// with "[<name>-demo] ". Its value is the example's name, so it can be a
// constant.
type Narrator string

// Say prints one line of progress: format and args as for fmt.Printf, the
// prefix before and a newline after.
func (n Narrator) Say(format string, args ...any) {
	fmt.Printf("["+string(n)+"-demo] "+format+"\n", args...)
}

// StartControlPlane starts an embedded control plane with opts, saying that
// it starts (components lists what it runs, for the reader) and how long it
// took. stop stops it, saying so, and ignores the error: the demo is over by
// then. On error there is nothing to stop.
func (n Narrator) StartControlPlane(components string, opts ...testenv.Option) (env *testenv.Env, stop func(), err error) {
	n.Say("starting an embedded control plane (%s)…", components)
	t0 := time.Now()
	env, err = testenv.New(opts...)
	if err != nil {
		return nil, nil, err
	}
	n.Say("control plane up in %.1fs", time.Since(t0).Seconds())
	return env, func() {
		n.Say("stopping the embedded control plane")
		_ = env.Stop()
	}, nil
}

// ApplySamples creates each sample in namespace ns, in order, saying so; a
// sample that exists already is left as it is. It sets each sample's
// namespace to ns, and returns the samples' names in order.
func (n Narrator) ApplySamples(ctx context.Context, c client.Client, ns string, samples []*unstructured.Unstructured) ([]string, error) {
	names := make([]string, 0, len(samples))
	for _, s := range samples {
		s.SetNamespace(ns)
		if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("apply sample %s: %w", s.GetName(), err)
		}
		names = append(names, s.GetName())
		n.Say("applied %s %s/%s", s.GetKind(), ns, s.GetName())
	}
	return names, nil
}

// SetLogger sets controller-runtime's logger (and client-go's klog, so that
// nothing else writes to the terminal) from the --zap-* flags. On a cluster
// it writes to stderr, JSON unless --zap-devel or --zap-encoder say
// otherwise, for the cluster's log pipeline. An embedded demo logs as
// [Narrator.SetDemoLogger] says, with Verbose and LogFile. The returned
// function closes the log file, if any; call it when the run ends.
func (f *Flags) SetLogger(n Narrator, embedded bool) (closeLog func(), err error) {
	if embedded {
		return n.SetDemoLogger(f.Verbose, f.LogFile, f.Zap)
	}
	setLogger(crzap.New(crzap.UseFlagOptions(&f.Zap), crzap.WriteTo(os.Stderr)))
	return func() {}, nil
}

// SetDemoLogger sets controller-runtime's logger (and client-go's klog) for
// an embedded demo, whose progress owns the terminal: human-readable lines
// (zap's development mode; zopts' level and encoder flags still apply) to
// file, or to a new file in the temporary directory when file is empty,
// which n names on stdout before anything is logged; with verbose, to stderr
// instead. The returned function closes the file.
func (n Narrator) SetDemoLogger(verbose bool, file string, zopts crzap.Options) (closeLog func(), err error) {
	zopts.Development = true
	if verbose {
		setLogger(crzap.New(crzap.UseFlagOptions(&zopts), crzap.WriteTo(os.Stderr)))
		return func() {}, nil
	}
	var fh *os.File
	if file != "" {
		fh, err = os.Create(file)
	} else {
		fh, err = os.CreateTemp("", string(n)+"-demo-*.log")
	}
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	path, _ := filepath.Abs(fh.Name())
	n.Say("operator logs: %s (-v writes them here instead)", path)
	setLogger(crzap.New(crzap.UseFlagOptions(&zopts), crzap.WriteTo(fh)))
	return func() { _ = fh.Close() }, nil
}

func setLogger(log logr.Logger) {
	ctrl.SetLogger(log)
	klogTarget.Store(&log) // see klog.go
}

// Background is a manager running on its own goroutine while the embedded
// demo narrates in the foreground.
type Background struct {
	cancel context.CancelFunc
	errc   chan error
	done   chan struct{}
}

// StartBackground starts mgr on its own goroutine under a child of ctx and
// returns that child, so that the demo's waits end when the manager is
// stopped.
func StartBackground(ctx context.Context, mgr manager.Manager) (context.Context, *Background) {
	ctx, cancel := context.WithCancel(ctx)
	b := &Background{cancel: cancel, errc: make(chan error, 1), done: make(chan struct{})}
	go func() {
		b.errc <- mgr.Start(ctx)
		close(b.done)
	}()
	return ctx, b
}

// Err receives the manager's result, once: a demo selecting on it learns that
// the manager stopped without being asked to.
func (b *Background) Err() <-chan error { return b.errc }

// Cancel asks the manager to stop and does not wait: for a defer on every
// return path. Calling it again, or after Stop, does nothing.
func (b *Background) Cancel() { b.cancel() }

// Stop asks the manager to stop and waits until it has. The manager's result
// is left to Err: it was asked to stop, so how it ended is not the demo's
// failure.
func (b *Background) Stop() {
	b.cancel()
	<-b.done
}

// MetricsReader is the ServiceAccount an embedded demo creates in its demo
// namespace, bound to a ClusterRole of the same name that may get /metrics
// (the rule of config/rbac/metrics_reader_role.yaml), so that the demo can
// show a scrape of its secured metrics endpoint.
const MetricsReader = "metrics-reader"

// GrantMetricsReader creates namespace ns, the ServiceAccount ns/[MetricsReader],
// the ClusterRole [MetricsReader] (get on the non-resource URL /metrics) and
// a ClusterRoleBinding of the same name between them; objects that exist
// already are left as they are.
func GrantMetricsReader(ctx context.Context, c client.Client, ns string) error {
	if err := EnsureNamespace(ctx, c, ns); err != nil {
		return err
	}
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: MetricsReader}},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: MetricsReader},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: MetricsReader},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: MetricsReader},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: MetricsReader}},
		},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// SayEndpoints says where the operator of an embedded demo serves its
// metrics and probes. With secure metrics it first grants [MetricsReader]
// in ns ([GrantMetricsReader]) and prints the curl command that scrapes
// with that ServiceAccount's token; kubectl is the command (binary and
// --kubeconfig) that reaches env's control plane.
func (n Narrator) SayEndpoints(ctx context.Context, env *testenv.Env, f *Flags, ns, kubectl string) error {
	metrics := f.MetricsURL()
	probes := "off"
	if f.ProbeAddr != "0" && f.ProbeAddr != "" {
		probes = "http://" + f.ProbeAddr + "/readyz"
	}
	switch {
	case metrics == "":
		n.Say("operator running; metrics off, probes on %s", probes)
	case f.MetricsInsecure:
		n.Say("operator running; metrics on %s (plain HTTP, --metrics-secure=false), probes on %s", metrics, probes)
	default:
		if err := GrantMetricsReader(ctx, env.Client, ns); err != nil {
			return err
		}
		n.Say("operator running; metrics on %s (HTTPS, bearer token allowed to get /metrics), probes on %s", metrics, probes)
		n.Say("scrape:    curl -sk -H \"Authorization: Bearer $(%s create token %s -n %s)\" %s", kubectl, MetricsReader, ns, metrics)
	}
	return nil
}

// Kubectl returns the command line that runs kubectl against env: its
// binary ([testenv.Env.KubectlPath], which builds it on a first run and says
// so) and --kubeconfig.
func (n Narrator) Kubectl(ctx context.Context, env *testenv.Env) (string, error) {
	t0 := time.Now()
	path, err := env.KubectlPath(ctx)
	if err != nil {
		return "", err
	}
	if d := time.Since(t0); d > 5*time.Second {
		n.Say("built kubectl in %.0fs (once; it is cached now)", d.Seconds())
	}
	return path + " --kubeconfig " + env.KubeconfigPath, nil
}

// Tour drives a demo's steps: it prints the state report when it changed
// and waits for each step, bounded by an optional deadline and stopped by
// the manager's failure.
type Tour[T any] struct {
	// Narrator announces finished steps.
	Narrator Narrator
	// Interval is how often the state is read.
	Interval time.Duration
	// Read returns the state and its printed report.
	Read func(context.Context) (T, string, error)
	// Errc reports the manager's failure (Background.Err).
	Errc <-chan error
	// Deadline bounds every step; zero means none.
	Deadline time.Time

	last string
}

// Until reads the state every Interval, printing the report whenever it
// changed, until done accepts the state; then it says what (unless empty).
// It fails when the manager stopped, ctx ended or the deadline passed.
func (t *Tour[T]) Until(ctx context.Context, what string, done func(T) bool) error {
	tick := time.NewTicker(t.Interval)
	defer tick.Stop()
	for {
		state, report, err := t.Read(ctx)
		if err == nil {
			if report != t.last {
				fmt.Print(report)
				t.last = report
			}
			if done(state) {
				if what != "" {
					t.Narrator.Say("%s", what)
				}
				return nil
			}
		}
		var deadline <-chan time.Time
		if !t.Deadline.IsZero() {
			deadline = time.After(time.Until(t.Deadline))
		}
		select {
		case err := <-t.Errc:
			return fmt.Errorf("manager stopped: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("demo: not done within the timeout: %s", what)
		case <-tick.C:
		}
	}
}

package examplecmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/opkit/opkit/observability"
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
// the addresses [Flags.DefaultAddrs] picks and no leader election.
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
	// LeaderElect turns on the manager's leader election.
	LeaderElect bool
	// DevLogs asks for human-readable logs instead of JSON.
	DevLogs bool
}

// Register defines the shared flags on fs. exitWhenReady completes the help
// of --exit-when-ready (what the bounded demo waits for); timeout is the
// default of --timeout. --kubeconfig is not defined here: controller-runtime
// defines it on flag.CommandLine when it is imported.
func (f *Flags) Register(fs *flag.FlagSet, exitWhenReady string, timeout time.Duration) {
	fs.BoolVar(&f.Embedded, "embedded", false, "always start an embedded control plane, even when a cluster is configured")
	fs.BoolVar(&f.ExitWhenReady, "exit-when-ready", false, exitWhenReady)
	fs.DurationVar(&f.Timeout, "timeout", timeout, "with --exit-when-ready: give up after this long")
	fs.StringVar(&f.MetricsAddr, "metrics-bind-address", "", "metrics endpoint, e.g. :8080; 0 disables (default :8080 on a cluster, a free loopback port when embedded)")
	fs.StringVar(&f.ProbeAddr, "health-probe-bind-address", "", "health probe endpoint (default :8081 on a cluster, a free loopback port when embedded)")
	fs.BoolVar(&f.LeaderElect, "leader-elect", false, "enable leader election (on in the config/ manifests)")
	fs.BoolVar(&f.DevLogs, "dev-logs", false, "human-readable logs instead of JSON")
}

// ReadKubeconfig sets Kubeconfig from fs's --kubeconfig, if fs has one: a
// cluster to run against (default: in-cluster config, else an embedded
// control plane). Call it after parsing fs.
func (f *Flags) ReadKubeconfig(fs *flag.FlagSet) {
	if fl := fs.Lookup("kubeconfig"); fl != nil {
		f.Kubeconfig = fl.Value.String()
	}
}

// ClusterConfig returns the cluster to run against: the Kubeconfig file when
// set, else the in-cluster config when there is one. It returns nil, nil when
// the demo should start its own control plane: with Embedded, or when no
// cluster is configured. Only a Kubeconfig that cannot be loaded is an error.
func (f *Flags) ClusterConfig() (*rest.Config, error) {
	if f.Embedded {
		return nil, nil
	}
	if f.Kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", f.Kubeconfig)
	}
	if cfg, err := rest.InClusterConfig(); err == nil {
		return cfg, nil
	}
	return nil, nil
}

// DefaultAddrs fills in MetricsAddr and ProbeAddr where they are empty: a
// free loopback port each when embedded (a demo on a laptop must not clash
// with whatever holds :8080), else :8080 and :8081, the ports the config/
// manifests probe. Addresses already set, "0" included, are kept.
func (f *Flags) DefaultAddrs(embedded bool) {
	metrics, probe := ":8080", ":8081"
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

// ManagerOptions returns the manager options the flags decide: scheme, the
// metrics and probe addresses as they are (call [Flags.DefaultAddrs] first),
// and leader election under leaderElectionID in $POD_NAMESPACE (empty outside
// a pod: controller-runtime then uses the in-cluster namespace).
func (f *Flags) ManagerOptions(scheme *runtime.Scheme, leaderElectionID string) manager.Options {
	return manager.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: f.MetricsAddr},
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

// SetLogger sets controller-runtime's logger, writing to stderr: the demo's
// progress owns stdout. It logs JSON, for a cluster's log pipeline, unless
// the demo is embedded or DevLogs asks for human-readable lines.
func (f *Flags) SetLogger(embedded bool) {
	ctrl.SetLogger(observability.NewLogger(observability.WithLogDevelopment(f.DevLogs || embedded), observability.WithLogOutput(os.Stderr)))
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

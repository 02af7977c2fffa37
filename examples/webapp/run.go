package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/opkit/opkit/conditions"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/config"
	"github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/examples/webapp/registry"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/reconciler"
	"github.com/opkit/opkit/testenv"
	"github.com/opkit/opkit/testenv/assets"
	"github.com/opkit/opkit/webhook/webhooktest"
)

// DemoNamespace is where the embedded demo applies the sample WebApps.
const DemoNamespace = "demo"

func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := webappv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

func run(ctx context.Context, o options) error {
	cfg, err := clusterConfig(o)
	if err != nil {
		return err
	}
	embedded := cfg == nil
	webhooks := o.webhooks == "on" || ((o.webhooks == "auto" || o.webhooks == "") && embedded)
	// On a cluster: JSON logs for the log pipeline. Embedded: the demo's
	// progress owns stdout, the operator's human-readable logs go to stderr.
	ctrl.SetLogger(observability.NewLogger(observability.LogDevelopment(o.devLogs || embedded), observability.LogTo(os.Stderr)))
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	var env *testenv.Env
	if embedded {
		say("starting an embedded control plane (kube-apiserver, etcd, controller-manager, scheduler, kwok node)…")
		t0 := time.Now()
		crds, err := config.CRDs()
		if err != nil {
			return err
		}
		mutating, validating, err := config.Webhooks()
		if err != nil {
			return err
		}
		opts := []testenv.Option{testenv.WithWorkloads(), testenv.WithCRDs(crds...), testenv.WithScheme(scheme), testenv.WithBuildIfMissing()}
		if webhooks {
			opts = append(opts, testenv.WithWebhooks(envtest.WebhookInstallOptions{MutatingWebhooks: mutating, ValidatingWebhooks: validating}))
		}
		env, err = testenv.New(opts...)
		if err != nil {
			return err
		}
		defer func() {
			say("stopping the embedded control plane")
			_ = env.Stop()
		}()
		cfg = env.Config
		say("control plane up in %.1fs", time.Since(t0).Seconds())
		if o.metricsAddr == "" {
			o.metricsAddr = freeLoopback()
		}
		if o.probeAddr == "" {
			o.probeAddr = freeLoopback()
		}
	} else {
		if o.metricsAddr == "" {
			o.metricsAddr = ":8080"
		}
		if o.probeAddr == "" {
			o.probeAddr = ":8081"
		}
	}

	var webhookServer crwebhook.Server
	if embedded && webhooks {
		webhookServer = crwebhook.NewServer(webhooktest.ServerOptions(env.Envtest.WebhookInstallOptions))
	}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		WebhookServer:           webhookServer,
		Cache:                   reconciler.CacheOptions(),
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "webapp-operator.apps.example.com",
		LeaderElectionNamespace: os.Getenv("POD_NAMESPACE"),
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	obs, err := observability.Setup(mgr)
	if err != nil {
		return err
	}
	if webhooks {
		if err := controller.SetupWebhooks(mgr); err != nil {
			return err
		}
	}
	reg := registry.New()
	if err := controller.Setup(mgr, controller.Options{Registry: reg, Observability: obs}); err != nil {
		return err
	}

	if !embedded {
		return mgr.Start(ctx)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- mgr.Start(ctx) }()

	if webhooks {
		// failurePolicy is Fail: wait until the API server can reach the webhooks.
		if err := waitWebhooks(ctx, mgr); err != nil {
			return err
		}
	}
	if err := applySamples(ctx, env.Client); err != nil {
		return err
	}
	kubectl := filepath.Join(env.AssetsDir, assets.Kubectl)
	say("operator running; metrics on http://%s/metrics, probes on http://%s/readyz", o.metricsAddr, o.probeAddr)
	say("watch it:  %s --kubeconfig %s get webapps,deployments,pods -n %s", kubectl, env.KubeconfigPath, DemoNamespace)
	say("or:        %s --kubeconfig %s wait --for=condition=Ready webapps --all -n %s", kubectl, env.KubeconfigPath, DemoNamespace)

	var deadline <-chan time.Time
	if o.exitWhenReady {
		deadline = time.After(o.timeout)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := ""
	for {
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("not every WebApp became Ready within %s", o.timeout)
		case <-tick.C:
		}
		report, ready, err := progress(ctx, env.Client)
		if err != nil {
			continue // the API may be busy; try again on the next tick
		}
		if report != last {
			fmt.Print(report)
			last = report
		}
		if ready && o.exitWhenReady {
			say("every sample WebApp is Ready (routes registered: %d); exiting as asked", reg.Len())
			cancel()
			if err := <-errc; err != nil && ctx.Err() == nil {
				return err
			}
			return nil
		}
	}
}

func applySamples(ctx context.Context, c client.Client) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DemoNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	samples, err := config.Samples()
	if err != nil {
		return err
	}
	for _, s := range samples {
		s.SetNamespace(DemoNamespace)
		if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("apply sample %s: %w", s.GetName(), err)
		}
		say("applied WebApp %s/%s", DemoNamespace, s.GetName())
	}
	return nil
}

// progress renders one line per WebApp and says whether all are Ready for their current generation.
func progress(ctx context.Context, c client.Client) (string, bool, error) {
	var list webappv1.WebAppList
	if err := c.List(ctx, &list, client.InNamespace(DemoNamespace)); err != nil {
		return "", false, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	var b strings.Builder
	allReady := len(list.Items) > 0
	for i := range list.Items {
		app := &list.Items[i]
		ready := conditions.Get(app, conditions.Ready)
		state, reason := "Unknown", "NotYetReported"
		if ready != nil {
			state, reason = string(ready.Status), ready.Reason
		}
		current := conditions.IsTrue(app, conditions.Ready) && app.Status.ObservedGeneration == app.Generation
		allReady = allReady && current
		want := int32(1)
		if app.Spec.Replicas != nil {
			want = *app.Spec.Replicas
		}
		fmt.Fprintf(&b, "  webapp %-8s phase=%-11s ready=%d/%d Ready=%s (%s)\n", app.Name, app.Status.Phase, app.Status.ReadyReplicas, want, state, reason)
	}
	return b.String(), allReady, nil
}

func say(format string, args ...any) {
	fmt.Printf("[webapp-demo] "+format+"\n", args...)
}

func freeLoopback() string {
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return "0"
	}
	defer l.Close()
	return l.Addr().String()
}

func waitWebhooks(ctx context.Context, mgr manager.Manager) error {
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

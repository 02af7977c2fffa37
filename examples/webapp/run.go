package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/examples/internal/examplecmd"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	webappv1beta1 "github.com/opkit/opkit/examples/webapp/api/v1beta1"
	"github.com/opkit/opkit/examples/webapp/config"
	"github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/examples/webapp/registry"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/reconciler"
	"github.com/opkit/opkit/testenv"
	"github.com/opkit/opkit/webhook/webhooktest"
)

// DemoNamespace is where the embedded demo applies the sample WebApps.
const DemoNamespace = "demo"

func newScheme() (*runtime.Scheme, error) {
	// apiextensions.k8s.io/v1: the storage-version migrator reads the CRD.
	return examplecmd.NewScheme(webappv1.AddToScheme, webappv1beta1.AddToScheme, apiextensionsv1.AddToScheme)
}

func run(ctx context.Context, o options) error {
	cfg, err := o.ClusterConfig()
	if err != nil {
		return err
	}
	embedded := cfg == nil
	webhooks := o.webhooks == "on" || ((o.webhooks == "auto" || o.webhooks == "") && embedded)
	closeLog, err := o.SetLogger(narrator, embedded)
	if err != nil {
		return err
	}
	defer closeLog()
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	var env *testenv.Env
	if embedded {
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
		var stop func()
		env, stop, err = narrator.StartControlPlane("kube-apiserver, etcd, controller-manager, scheduler, kwok node", opts...)
		if err != nil {
			return err
		}
		defer stop()
		cfg = env.Config
	}
	o.DefaultAddrs(embedded)

	mopts := o.ManagerOptions(scheme, "webapp-operator.apps.example.com")
	if embedded && webhooks {
		wopts := webhooktest.ServerOptions(env.Envtest.WebhookInstallOptions)
		wopts.TLSOpts = append(wopts.TLSOpts, o.TLSOpts()...)
		mopts.WebhookServer = crwebhook.NewServer(wopts)
	}
	cacheOpts := controller.CacheOptions()
	cacheOpts.DefaultNamespaces = mopts.Cache.DefaultNamespaces // --watch-namespace
	mopts.Cache = cacheOpts
	mopts.NewCache = reconciler.NewCache // workers start when the caches sync, not at the next 100ms look
	mgr, err := ctrl.NewManager(cfg, mopts)
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
	if o.routeRegistry != "" {
		if reg, err = registry.Open(o.routeRegistry); err != nil {
			return err
		}
		defer func() { _ = reg.Close() }()
	}
	if err := controller.Setup(mgr, controller.Options{Registry: reg, Observability: obs, MigrateStorage: true}); err != nil {
		return err
	}

	if !embedded {
		return mgr.Start(ctx)
	}

	ctx, bg := examplecmd.StartBackground(ctx, mgr)
	defer bg.Cancel()

	if webhooks {
		// failurePolicy is Fail: wait until the API server can reach the webhooks.
		if err := examplecmd.WaitWebhooks(ctx, mgr); err != nil {
			return err
		}
	}
	if err := applySamples(ctx, env.Client); err != nil {
		return err
	}
	kubectl, err := narrator.Kubectl(ctx, env)
	if err != nil {
		return err
	}
	if err := narrator.SayEndpoints(ctx, env, &o.Flags, DemoNamespace, kubectl); err != nil {
		return err
	}
	say("watch it:  %s get webapps,deployments,pods -n %s", kubectl, DemoNamespace)
	say("or:        %s wait --for=condition=Ready webapps --all -n %s", kubectl, DemoNamespace)

	var deadline <-chan time.Time
	if o.ExitWhenReady {
		deadline = time.After(o.Timeout)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := ""
	for {
		select {
		case err := <-bg.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("not every WebApp became Ready within %s", o.Timeout)
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
		if ready && o.ExitWhenReady {
			say("every sample WebApp is Ready (routes registered: %d); exiting as asked", reg.Len())
			bg.Stop()
			return nil
		}
	}
}

func applySamples(ctx context.Context, c client.Client) error {
	if err := examplecmd.EnsureNamespace(ctx, c, DemoNamespace); err != nil {
		return err
	}
	samples, err := config.Samples()
	if err != nil {
		return err
	}
	_, err = narrator.ApplySamples(ctx, c, DemoNamespace, samples)
	return err
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

func say(format string, args ...any) { narrator.Say(format, args...) }

package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/ansible"
	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/examples/internal/examplecmd"
	webv1 "github.com/opkit/opkit/examples/playbook/api/v1"
	"github.com/opkit/opkit/examples/playbook/config"
	"github.com/opkit/opkit/examples/playbook/controller"
	"github.com/opkit/opkit/examples/playbook/playbooks"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/testenv"
)

// DemoNamespace is where the embedded demo applies the sample Sites.
const DemoNamespace = "demo"

func newScheme() (*runtime.Scheme, error) { return examplecmd.NewScheme(webv1.AddToScheme) }

func say(format string, args ...any) { narrator.Say(format, args...) }

// newRunner extracts the embedded playbooks into dir and returns the Site
// runner their watches.yaml describes; kubeconfig ("" on a cluster: the
// in-cluster config) is what kubernetes.core.k8s talks to.
func newRunner(dir, kubeconfig string, opts ...ansible.Option) (*ansible.Runner, error) {
	path, err := playbooks.Extract(dir)
	if err != nil {
		return nil, err
	}
	watches, err := ansible.LoadWatches(path)
	if err != nil {
		return nil, err
	}
	if len(watches) != 1 || watches[0].GVK != webv1.GroupVersion.WithKind("Site") {
		return nil, fmt.Errorf("%s: want exactly the Site watch, got %d entries", path, len(watches))
	}
	if kubeconfig != "" {
		opts = append([]ansible.Option{ansible.WithKubeconfig(kubeconfig)}, opts...)
	}
	return ansible.New(watches[0], opts...)
}

func run(ctx context.Context, o options) error {
	cfg, err := o.ClusterConfig()
	if err != nil {
		return err
	}
	embedded := cfg == nil
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
	kubeconfig := o.Kubeconfig
	if embedded {
		crds, err := config.CRDs()
		if err != nil {
			return err
		}
		var stop func()
		env, stop, err = narrator.StartControlPlane("etcd, kube-apiserver", testenv.WithCRDs(crds...), testenv.WithScheme(scheme), testenv.WithBuildIfMissing())
		if err != nil {
			return err
		}
		defer stop()
		cfg, kubeconfig = env.Config, env.KubeconfigPath
	}
	o.DefaultAddrs(embedded)
	dir, err := os.MkdirTemp("", "opkit-playbooks-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	runner, err := newRunner(dir, kubeconfig, ansible.WithCommand(o.ansiblePlaybook))
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, o.ManagerOptions(scheme, "playbook-operator.web.example.com"))
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	obs, err := observability.Setup(mgr)
	if err != nil {
		return err
	}
	if err := controller.Setup(mgr, runner, controller.Options{Observability: obs}); err != nil {
		return err
	}
	if !embedded {
		return mgr.Start(ctx)
	}

	ctx, bg := examplecmd.StartBackground(ctx, mgr)
	defer bg.Cancel()
	c := env.Client
	if err := examplecmd.EnsureNamespace(ctx, c, DemoNamespace); err != nil {
		return err
	}
	samples, err := config.Samples()
	if err != nil {
		return err
	}
	if _, err := narrator.ApplySamples(ctx, c, DemoNamespace, samples); err != nil {
		return err
	}
	kubectl, err := narrator.Kubectl(ctx, env)
	if err != nil {
		return err
	}
	say("watch it:  %s get sites,configmaps,deployments,services -n %s", kubectl, DemoNamespace)
	say("events:    %s events -n %s", kubectl, DemoNamespace)
	tour := &examplecmd.Tour[[]webv1.Site]{Narrator: narrator, Interval: 500 * time.Millisecond, Errc: bg.Err(), Read: func(ctx context.Context) ([]webv1.Site, string, error) {
		return report(ctx, c)
	}}
	if o.ExitWhenReady {
		tour.Deadline = time.Now().Add(o.Timeout)
	}
	if err := tour.Until(ctx, "every sample Site Ready: its playbook ran and made a ConfigMap, a Deployment and a Service", func(sites []webv1.Site) bool {
		for _, s := range sites {
			if !conditions.IsTrue(&s, conditions.Ready) || !childrenExist(ctx, c, s.Name) {
				return false
			}
		}
		return len(sites) == len(samples)
	}); err != nil {
		return err
	}

	hello := &webv1.Site{}
	// A run may be writing hello's status meanwhile: retry on conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: DemoNamespace, Name: "hello"}, hello); err != nil {
			return err
		}
		hello.Spec.Replicas = 3
		return c.Update(ctx, hello)
	}); err != nil {
		return err
	}
	say("changed Site hello: replicas 2 → 3; the playbook runs again")
	if err := tour.Until(ctx, "the playbook re-ran: Deployment hello has 3 replicas", func([]webv1.Site) bool {
		d := &appsv1.Deployment{}
		return c.Get(ctx, client.ObjectKey{Namespace: DemoNamespace, Name: "hello"}, d) == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 3
	}); err != nil {
		return err
	}

	if err := c.Delete(ctx, &webv1.Site{ObjectMeta: hello.ObjectMeta}); err != nil {
		return err
	}
	say("deleted Site hello; its finalizer playbook deletes the Service, Deployment and ConfigMap first")
	if err := tour.Until(ctx, "Site hello gone, after its finalizer playbook removed its objects", func([]webv1.Site) bool {
		err := c.Get(ctx, client.ObjectKey{Namespace: DemoNamespace, Name: "hello"}, &webv1.Site{})
		return apierrors.IsNotFound(err) && !childrenExist(ctx, c, "hello")
	}); err != nil {
		return err
	}
	if o.ExitWhenReady {
		say("every step done; exiting as asked")
		bg.Stop()
		return nil
	}
	say("the operator keeps running; edit a Site (kubectl edit site docs -n %s) and watch the playbook run again", DemoNamespace)
	select {
	case err := <-bg.Err():
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// childrenExist reports whether site's ConfigMap, Deployment and Service
// all exist in the demo namespace (any of them missing: false).
func childrenExist(ctx context.Context, c client.Client, site string) bool {
	for _, o := range []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}} {
		name := site
		if _, ok := o.(*corev1.ConfigMap); ok {
			name += "-content"
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: DemoNamespace, Name: name}, o); err != nil {
			return false
		}
	}
	return true
}

// report reads the Sites and prints one line each.
func report(ctx context.Context, c client.Client) ([]webv1.Site, string, error) {
	var list webv1.SiteList
	if err := c.List(ctx, &list, client.InNamespace(DemoNamespace)); err != nil {
		return nil, "", err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	var b strings.Builder
	for i := range list.Items {
		s := &list.Items[i]
		run := conditions.Get(s, ansible.ConditionRunning)
		last := "not run yet"
		if run != nil {
			last = run.Reason
			if run.Status == "True" {
				last = "running"
			}
		}
		ready := "Unknown"
		if r := conditions.Get(s, conditions.Ready); r != nil {
			ready = string(r.Status)
		}
		fmt.Fprintf(&b, "  site %-8s replicas=%d playbook=%-10s Ready=%s\n", s.Name, s.Spec.Replicas, last, ready)
		if f := conditions.Get(s, ansible.ConditionFailed); f != nil && f.Status == "True" {
			fmt.Fprintf(&b, "    Failed: %s\n", f.Message)
		}
	}
	return list.Items, b.String(), nil
}

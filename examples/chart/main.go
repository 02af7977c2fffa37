// Command chart is opkit's Helm-chart example operator: each ChartApp
// (examples.opkit.dev/v1) is a Helm release of the bundled guestbook chart
// (package github.com/opkit/opkit/helm), visible to `helm list` and
// `helm history`.
//
// With no cluster configured it starts an embedded control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and a kwok node,
// from opkit's testenv), applies the sample ChartApp, and walks it through an
// install, an upgrade to chart 1.1.0 (whose pre-upgrade Job hook runs) and a
// rollback:
//
//	go run ./examples/chart                    # embedded demo; Ctrl-C to stop
//	go run ./examples/chart --exit-when-ready  # bounded demo (what CI runs)
//	go run ./examples/chart --kubeconfig ~/.kube/config   # a real cluster
package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	examplesv1 "github.com/opkit/opkit/examples/chart/api/v1"
	"github.com/opkit/opkit/examples/chart/bundle"
	"github.com/opkit/opkit/examples/chart/config"
	"github.com/opkit/opkit/examples/chart/controller"
	"github.com/opkit/opkit/examples/internal/examplecmd"
	"github.com/opkit/opkit/helm"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/testenv"
)

// narrator prints the embedded demo's progress.
const narrator examplecmd.Narrator = "chart"

// DemoNamespace is where the embedded demo applies the sample ChartApp.
const DemoNamespace = "demo"

func main() {
	var o examplecmd.Flags
	o.Register(flag.CommandLine, "embedded demo: exit 0 once the sample was installed, upgraded to chart 1.1.0 and rolled back (bounded; used by CI)", 4*time.Minute)
	flag.Parse()
	o.ReadKubeconfig(flag.CommandLine)
	examplecmd.Main("chart", func(ctx context.Context) error { return run(ctx, o) })
}

func run(ctx context.Context, o examplecmd.Flags) error {
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
	scheme, err := examplecmd.NewScheme(examplesv1.AddToScheme)
	if err != nil {
		return err
	}
	charts, err := bundle.Load()
	if err != nil {
		return err
	}
	var env *testenv.Env
	if embedded {
		crds, err := config.CRDs()
		if err != nil {
			return err
		}
		var stop func()
		env, stop, err = narrator.StartControlPlane("etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok node",
			testenv.WithCRDs(crds...), testenv.WithScheme(scheme), testenv.WithWorkloads(), testenv.WithBuildIfMissing())
		if err != nil {
			return err
		}
		defer stop()
		cfg = env.Config
	}
	o.DefaultAddrs(embedded)
	mopts := o.ManagerOptions(scheme, "chart-operator.examples.opkit.dev")
	mopts.Client = client.Options{Cache: &client.CacheOptions{Unstructured: true}}
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	obs, err := observability.Setup(mgr)
	if err != nil {
		return err
	}
	if err := controller.Setup(mgr, obs, charts); err != nil {
		return err
	}
	if !embedded {
		return mgr.Start(ctx)
	}

	ctx, bg := examplecmd.StartBackground(ctx, mgr)
	defer bg.Cancel()
	if err := examplecmd.EnsureNamespace(ctx, env.Client, DemoNamespace); err != nil {
		return err
	}
	samples, err := config.Samples()
	if err != nil {
		return err
	}
	names, err := narrator.ApplySamples(ctx, env.Client, DemoNamespace, samples)
	if err != nil {
		return err
	}
	kubectl, err := narrator.Kubectl(ctx, env)
	if err != nil {
		return err
	}
	narrator.Say("watch it:  %s get chartapps,deployments,configmaps,jobs -n %s", kubectl, DemoNamespace)
	narrator.Say("helm:      helm --kubeconfig %s history %s -n %s", env.KubeconfigPath, names[0], DemoNamespace)
	tour := &examplecmd.Tour[*examplesv1.ChartApp]{Narrator: narrator, Interval: 200 * time.Millisecond, Errc: bg.Err(),
		Read: func(ctx context.Context) (*examplesv1.ChartApp, string, error) {
			app := &examplesv1.ChartApp{}
			err := env.Client.Get(ctx, types.NamespacedName{Namespace: DemoNamespace, Name: names[0]}, app)
			return app, report(app), err
		}}
	if o.ExitWhenReady {
		tour.Deadline = time.Now().Add(o.Timeout)
	}
	at := func(rev int, version string) func(*examplesv1.ChartApp) bool {
		return func(a *examplesv1.ChartApp) bool {
			return a.Status.Release.Revision == rev && a.Status.Release.ChartVersion == version &&
				a.Status.Release.Status == "deployed" && conditions.IsTrue(a, conditions.Ready)
		}
	}
	if err := tour.Until(ctx, "revision 1 (chart 1.0.0) deployed and Ready", at(1, "1.0.0")); err != nil {
		return err
	}
	narrator.Say("upgrading %s to chart 1.1.0 (its pre-upgrade migration Job runs first)", names[0])
	if err := patchSpec(ctx, env.Client, names[0], `{"spec":{"chartVersion":"1.1.0"}}`); err != nil {
		return err
	}
	if err := tour.Until(ctx, "revision 2 (chart 1.1.0) deployed and Ready", at(2, "1.1.0")); err != nil {
		return err
	}
	narrator.Say("rolling %s back to revision 1 (annotation %s=1)", names[0], helm.AnnotationRollbackTo)
	if err := patchSpec(ctx, env.Client, names[0], fmt.Sprintf(`{"metadata":{"annotations":{%q:"1"}}}`, helm.AnnotationRollbackTo)); err != nil {
		return err
	}
	if err := tour.Until(ctx, "revision 3 (a rollback to 1: chart 1.0.0) deployed and Ready", at(3, "1.0.0")); err != nil {
		return err
	}
	if o.ExitWhenReady {
		narrator.Say("every step done; exiting as asked")
		bg.Stop()
		return nil
	}
	narrator.Say("the operator keeps running: change spec.message, spec.replicas or spec.chartVersion, or edit the ConfigMap by hand")
	select {
	case err := <-bg.Err():
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// patchSpec merge-patches the ChartApp name in the demo namespace.
func patchSpec(ctx context.Context, c client.Client, name, patch string) error {
	app := &examplesv1.ChartApp{ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: name}}
	return c.Patch(ctx, app, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// report is one line about a ChartApp's release.
func report(a *examplesv1.ChartApp) string {
	r := a.Status.Release
	ready := "Ready=?"
	if c := conditions.Get(a, conditions.Ready); c != nil {
		ready = fmt.Sprintf("Ready=%s (%s)", c.Status, c.Reason)
	}
	line := fmt.Sprintf("  chartapp %-8s revision=%d chart=%s %s %s", a.Name, r.Revision, r.ChartVersion, r.Status, ready)
	if c := conditions.Get(a, conditions.Reconciling); c != nil && c.Status == metav1.ConditionTrue {
		line += " — " + strings.TrimSpace(c.Message)
	}
	return line + "\n"
}

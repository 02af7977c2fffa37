package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

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

var env *testenv.Env

func TestMain(m *testing.M) {
	scheme, err := examplecmd.NewScheme(examplesv1.AddToScheme)
	if err != nil {
		panic(err)
	}
	crds, err := config.CRDs()
	if err != nil {
		panic(err)
	}
	os.Exit(testenv.RunMain(m, &env, testenv.WithScheme(scheme), testenv.WithCRDs(crds...), testenv.WithWorkloads()))
}

// helmVersion is the Helm CLI the tests build, the version go.mod requires.
const helmVersion = "v4.3.1"

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helmCLI returns the helm binary built from this module's requirement
// (tools.go), once per machine: it is cached under the user cache directory.
// Under -race (as make test runs this test) it is built with -race: its
// dependencies, most of them the helm packages this module's operator
// imports, then come from the race compile this module's vet and test
// left in the build cache instead of being compiled again without it
// (on 2 cores: ~35 s instead of ~1 min 45 s when nothing is cached yet).
func helmCLI(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		dir, err := os.UserCacheDir()
		if err != nil {
			helmErr = err
			return
		}
		args, name := []string{"build"}, "helm-"+helmVersion
		if raceEnabled {
			args, name = append(args, "-race"), name+"-race"
		}
		helmPath = filepath.Join(dir, "opkit", name, "helm")
		if _, err := os.Stat(helmPath); err == nil {
			return
		}
		t0 := time.Now()
		cmd := exec.Command("go", append(args, "-o", helmPath, "helm.sh/helm/v4/cmd/helm")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			helmErr = fmt.Errorf("go build helm: %w\n%s", err, out)
			return
		}
		t.Logf("built the helm CLI in %s (cached at %s)", time.Since(t0).Round(time.Second), helmPath)
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

// runHelm runs the helm CLI against the test control plane, output JSON decoded into out.
func runHelm(t *testing.T, out any, args ...string) {
	t.Helper()
	cmd := exec.Command(helmCLI(t), append([]string{"--kubeconfig", env.KubeconfigPath}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	b, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, b, stderr)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

type helmListEntry struct {
	Name, Namespace, Revision, Status, Chart string
	AppVersion                               string `json:"app_version"`
}

type helmHistoryEntry struct {
	Revision    int
	Status      string
	Chart       string
	Description string
}

func helmHistory(t *testing.T, ns, name string) string {
	var hist []helmHistoryEntry
	runHelm(t, &hist, "history", name, "-n", ns, "-o", "json")
	var parts []string
	for _, h := range hist {
		parts = append(parts, fmt.Sprintf("%d %s %s %s", h.Revision, h.Status, h.Chart, h.Description))
	}
	return strings.Join(parts, "; ")
}

func startOperator(t *testing.T, ns string) *testenv.RequestCounter {
	t.Helper()
	charts, err := bundle.Load()
	if err != nil {
		t.Fatal(err)
	}
	cfg, requests := testenv.CountRequests(env.Config)
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		Client:     client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := observability.Setup(mgr, observability.WithRegisterer(prometheus.NewRegistry()), observability.WithoutHealthChecks())
	if err != nil {
		t.Fatal(err)
	}
	if err := controller.Setup(mgr, obs, charts, helm.WithHookRecheck(500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return requests
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s (last: %v)", timeout, what, last)
}

func deployedAt(t *testing.T, app *examplesv1.ChartApp, rev int, version string) func() (bool, error) {
	return func() (bool, error) {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(app), app); err != nil {
			return false, err
		}
		r := app.Status.Release
		ok := r.Revision == rev && r.ChartVersion == version && r.Status == "deployed" &&
			conditions.IsTrue(app, conditions.Ready) && app.Status.ObservedGeneration == app.Generation
		return ok, fmt.Errorf("release %+v, conditions %v", r, app.Status.Conditions)
	}
}

func patch(t *testing.T, app *examplesv1.ChartApp, p string) {
	t.Helper()
	if err := env.Client.Patch(context.Background(), app, client.RawPatch(types.MergePatchType, []byte(p))); err != nil {
		t.Fatal(err)
	}
}

// TestChartApp: install, values upgrade, chart bump with a pre-upgrade hook,
// rollback, drift, bad values, uninstall — checked with the real helm CLI.
func TestChartApp(t *testing.T) {
	helmCLI(t) // build it before the clock starts
	ns := env.Namespace(t)
	ctx := context.Background()
	requests := startOperator(t, ns)

	t0 := time.Now()
	app := &examplesv1.ChartApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: examplesv1.ChartAppSpec{ChartVersion: "1.0.0", Message: "one", Replicas: ptr.To[int32](2)}}
	if err := env.Client.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "revision 1 deployed", deployedAt(t, app, 1, "1.0.0"))
	t.Logf("install (Deployment of 2 rolled out): %s", time.Since(t0).Round(time.Millisecond))
	var list []helmListEntry
	runHelm(t, &list, "list", "-n", ns, "-o", "json")
	if len(list) != 1 || list[0].Name != "shop" || list[0].Revision != "1" || list[0].Status != "deployed" || list[0].Chart != "guestbook-1.0.0" {
		t.Fatalf("helm list: %+v", list)
	}

	// Steady state: a forced reconcile sends nothing.
	time.Sleep(time.Second)
	requests.Reset()
	patch(t, app, `{"metadata":{"annotations":{"touch":"1"}}}`)
	time.Sleep(2 * time.Second)
	if n := requests.Total(); n != 0 {
		t.Fatalf("a steady-state reconcile made %d requests:\n%s", n, requests)
	}
	t.Logf("steady re-reconcile: %d API requests", requests.Total())

	t0 = time.Now()
	patch(t, app, `{"spec":{"message":"two"}}`)
	waitFor(t, 60*time.Second, "revision 2 deployed", deployedAt(t, app, 2, "1.0.0"))
	t.Logf("upgrade (values): %s", time.Since(t0).Round(time.Millisecond))

	t0 = time.Now()
	patch(t, app, `{"spec":{"chartVersion":"1.1.0"}}`)
	waitFor(t, 90*time.Second, "revision 3 deployed", deployedAt(t, app, 3, "1.1.0"))
	t.Logf("upgrade (chart 1.0.0 -> 1.1.0, pre-upgrade Job hook): %s", time.Since(t0).Round(time.Millisecond))
	waitFor(t, 10*time.Second, "legacy ConfigMap pruned", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-legacy"}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), err
	})

	patch(t, app, fmt.Sprintf(`{"metadata":{"annotations":{%q:"1"}}}`, helm.AnnotationRollbackTo))
	waitFor(t, 60*time.Second, "revision 4 (rollback to 1) deployed", deployedAt(t, app, 4, "1.0.0"))
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-guestbook"}, cm); err != nil || cm.Data["message"] != "one" {
		t.Fatalf("after the rollback: %v %v", cm.Data, err)
	}
	want := "1 superseded guestbook-1.0.0 Install complete; 2 superseded guestbook-1.0.0 Upgrade complete; " +
		"3 superseded guestbook-1.1.0 Upgrade complete; 4 deployed guestbook-1.0.0 Rollback to 1"
	if got := helmHistory(t, ns, "shop"); got != want {
		t.Fatalf("helm history:\n%s\nwant\n%s", got, want)
	}

	// Drift: an edit by hand is undone, without a revision.
	cm.Data["message"] = "by hand"
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "drift corrected", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)
		return err == nil && cm.Data["message"] == "one", err
	})

	// Bad values (the chart's schema allows at most 10 replicas): Stalled,
	// no revision; back to good values: a new revision.
	patch(t, app, fmt.Sprintf(`{"metadata":{"annotations":{%q:null}},"spec":{"replicas":50}}`, helm.AnnotationRollbackTo))
	waitFor(t, 30*time.Second, "Stalled on invalid values", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(app), app)
		s := conditions.Get(app, conditions.Stalled)
		return s != nil && s.Status == metav1.ConditionTrue && s.Reason == helm.ReasonInvalidValues && strings.Contains(s.Message, "replicas"), err
	})
	if got := helmHistory(t, ns, "shop"); !strings.HasSuffix(got, "4 deployed guestbook-1.0.0 Rollback to 1") {
		t.Fatalf("invalid values made a revision: %s", got)
	}
	patch(t, app, `{"spec":{"replicas":1}}`)
	waitFor(t, 60*time.Second, "revision 5 deployed", deployedAt(t, app, 5, "1.1.0"))

	// Delete: uninstalled, history gone.
	if err := env.Client.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "ChartApp gone", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(app), app)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	list = nil
	runHelm(t, &list, "list", "-n", ns, "--deployed", "--failed", "--pending", "--superseded", "--uninstalled", "-o", "json")
	if len(list) != 0 {
		t.Fatalf("helm list after delete: %+v", list)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-guestbook"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("ConfigMap after uninstall: %v", err)
	}
}

var _ runtime.Object = (*examplesv1.ChartApp)(nil)

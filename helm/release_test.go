package helm_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/helm"
)

// history reads release name's records from Helm's Secret storage, oldest
// first, as "version:status:description".
func history(t testing.TB, ns, name string) []string {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	hist, err := storage.Init(driver.NewSecrets(cs.CoreV1().Secrets(ns))).History(name)
	if err != nil && !strings.Contains(err.Error(), "not found") {
		t.Fatal(err)
	}
	var recs []*rspb.Release
	for _, h := range hist {
		recs = append(recs, h.(*rspb.Release))
	}
	slices.SortFunc(recs, func(a, b *rspb.Release) int { return a.Version - b.Version })
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%d:%s:%s:%s", r.Version, r.Info.Status, r.Chart.Metadata.Version, r.Info.Description))
	}
	return out
}

func released(t testing.TB, a *App, revision int) func() (bool, error) {
	return func() (bool, error) {
		if err := get(t, a); err != nil {
			return false, err
		}
		c := conditions.Get(a, conditions.Ready)
		ok := conditions.IsTrue(a, conditions.Ready) && conditions.IsTrue(a, helm.ConditionReleased) &&
			a.Status.Release.Revision == revision && a.Status.Release.Status == string(common.StatusDeployed) &&
			a.Status.ObservedGeneration == a.Generation
		if !ok {
			return false, fmt.Errorf("status %+v, Ready %+v, conditions %v", a.Status.Release, c, a.Status.Conditions)
		}
		return true, nil
	}
}

func configMap(t testing.TB, ns, name string) (*corev1.ConfigMap, error) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm)
	return cm, err
}

// TestLifecycle walks one release through install, upgrade by values,
// upgrade by chart version, rollback, drift and uninstall, checking Helm's
// history at each step and that a steady reconcile sends no request.
func TestLifecycle(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	op := startOperator(t, ns)

	start := time.Now()
	a := &App{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: AppSpec{Chart: "app-1", Values: map[string]any{"message": "hi", "hook": true}}}
	if err := env.Client.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "revision 1 deployed", released(t, a, 1))
	t.Logf("install (with a pre-install hook Job) took %s", time.Since(start).Round(time.Millisecond))
	if cm, err := configMap(t, ns, "web-config"); err != nil || cm.Data["message"] != "hi" || cm.Data["chart"] != "1.0.0" {
		t.Fatalf("web-config: %v %v", cm.Data, err)
	}
	if _, err := configMap(t, ns, "web-extra"); err != nil {
		t.Fatalf("web-extra: %v", err)
	}
	if got := history(t, ns, "web"); !slices.Equal(got, []string{"1:deployed:1.0.0:Install complete"}) {
		t.Fatalf("history %q", got)
	}
	if a.Status.Release.Chart != "app" || a.Status.Release.ChartVersion != "1.0.0" || a.Status.Release.AppVersion != "1.0" {
		t.Fatalf("release status %+v", a.Status.Release)
	}

	// Steady state: a reconcile (forced by an annotation) sends nothing.
	time.Sleep(time.Second)
	op.requests.Reset()
	before := op.reconciles.Load()
	a.Annotations = map[string]string{"touch": "1"}
	if err := env.Client.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a reconcile after the annotation change", func() (bool, error) { return op.reconciles.Load() > before, nil })
	time.Sleep(500 * time.Millisecond)
	if n := op.requests.Total(); n != 0 {
		t.Fatalf("a steady-state reconcile made %d requests:\n%s", n, op.requests)
	}
	t.Logf("steady re-reconcile: %d API requests", op.requests.Total())

	// Values change: revision 2 (pre-upgrade hook runs again).
	start = time.Now()
	if err := get(t, a); err != nil {
		t.Fatal(err)
	}
	a.Spec.Values["message"] = "hello again"
	if err := env.Client.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "revision 2 deployed", released(t, a, 2))
	t.Logf("upgrade (values, with a pre-upgrade hook Job) took %s", time.Since(start).Round(time.Millisecond))
	if cm, err := configMap(t, ns, "web-config"); err != nil || cm.Data["message"] != "hello again" {
		t.Fatalf("web-config: %v %v", cm.Data, err)
	}

	// Chart bump: 2.0.0 drops web-extra and adds web-settings.
	start = time.Now()
	if err := get(t, a); err != nil {
		t.Fatal(err)
	}
	a.Spec.Chart = "app-2"
	a.Spec.Values["hook"] = false
	if err := env.Client.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "revision 3 deployed", released(t, a, 3))
	t.Logf("upgrade (chart 1.0.0 -> 2.0.0, no hook) took %s", time.Since(start).Round(time.Millisecond))
	waitFor(t, 10*time.Second, "web-extra pruned", func() (bool, error) {
		_, err := configMap(t, ns, "web-extra")
		return apierrors.IsNotFound(err), err
	})
	if _, err := configMap(t, ns, "web-settings"); err != nil {
		t.Fatalf("web-settings: %v", err)
	}
	if cm, _ := configMap(t, ns, "web-config"); cm.Data["chart"] != "2.0.0" {
		t.Fatalf("web-config: %v", cm.Data)
	}

	// Rollback to revision 1: revision 4 holds chart 1.0.0 with message "hi".
	if err := get(t, a); err != nil {
		t.Fatal(err)
	}
	a.Annotations[helm.AnnotationRollbackTo] = "1"
	if err := env.Client.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "revision 4 (rollback) deployed", released(t, a, 4))
	if a.Status.Release.RolledBackTo != 1 || a.Status.Release.ChartVersion != "1.0.0" {
		t.Fatalf("release status %+v", a.Status.Release)
	}
	if cm, err := configMap(t, ns, "web-config"); err != nil || cm.Data["message"] != "hi" || cm.Data["chart"] != "1.0.0" {
		t.Fatalf("web-config after rollback: %v %v", cm.Data, err)
	}
	waitFor(t, 10*time.Second, "web-settings pruned, web-extra back", func() (bool, error) {
		_, err1 := configMap(t, ns, "web-settings")
		_, err2 := configMap(t, ns, "web-extra")
		return apierrors.IsNotFound(err1) && err2 == nil, nil
	})
	want := []string{"1:superseded:1.0.0:Install complete", "2:superseded:1.0.0:Upgrade complete",
		"3:superseded:2.0.0:Upgrade complete", "4:deployed:1.0.0:Rollback to 1"}
	if got := history(t, ns, "web"); !slices.Equal(got, want) {
		t.Fatalf("history\n%q, want\n%q", got, want)
	}

	// Drift: someone edits a rendered object; the operator puts it back.
	cm, _ := configMap(t, ns, "web-config")
	cm.Data["message"] = "edited by hand"
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "drift corrected", func() (bool, error) {
		cm, err := configMap(t, ns, "web-config")
		return err == nil && cm.Data["message"] == "hi", err
	})
	if got := history(t, ns, "web"); len(got) != 4 {
		t.Fatalf("drift correction made a revision: %q", got)
	}

	// Removing the rollback annotation goes back to what the spec says.
	if err := get(t, a); err != nil {
		t.Fatal(err)
	}
	delete(a.Annotations, helm.AnnotationRollbackTo)
	if err := env.Client.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "revision 5 deployed", released(t, a, 5))
	if a.Status.Release.RolledBackTo != 0 || a.Status.Release.ChartVersion != "2.0.0" {
		t.Fatalf("release status %+v", a.Status.Release)
	}

	// Delete: the objects go, then the history, then the App.
	if err := env.Client.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "App gone", func() (bool, error) {
		err := get(t, a)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	for _, name := range []string{"web-config", "web-settings"} {
		if _, err := configMap(t, ns, name); !apierrors.IsNotFound(err) {
			t.Fatalf("%s after uninstall: %v", name, err)
		}
	}
	if got := history(t, ns, "web"); len(got) != 0 {
		t.Fatalf("history after uninstall: %q", got)
	}
}

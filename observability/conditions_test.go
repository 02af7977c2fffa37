package observability_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/observability"
)

var widgetGVK = schema.GroupVersionKind{Group: "test.opkit.dev", Version: "v1", Kind: "Widget"}

func widget(ns, name string, size int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, size, "spec", "size")
	return u
}

// widgetConditions is the reconciler's rule: Ready when the size is even,
// Degraded when it is 8 or more.
func widgetConditions(size int64) []metav1.Condition {
	st := func(b bool) metav1.ConditionStatus {
		if b {
			return metav1.ConditionTrue
		}
		return metav1.ConditionFalse
	}
	return []metav1.Condition{{Type: "Ready", Status: st(size%2 == 0)}, {Type: "Degraded", Status: st(size >= 8)}}
}

type widgetReconciler struct {
	name string
	c    client.Client
	m    *observability.Metrics
}

func (r *widgetReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetGVK)
	if err := r.c.Get(ctx, req.NamespacedName, u); err != nil {
		if apierrors.IsNotFound(err) {
			r.m.ForgetObject(r.name, req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
	r.m.SetConditions(r.name, req.NamespacedName, widgetConditions(size))
	return reconcile.Result{}, nil
}

// conditionGauges returns opkit_condition_objects for controller as
// "type/status" -> value, and how many series the family has in total.
func conditionGauges(t testing.TB, g prometheus.Gatherer, controller string) (map[string]float64, int) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out, n := map[string]float64{}, 0
	for _, mf := range mfs {
		if mf.GetName() != "opkit_condition_objects" {
			continue
		}
		n = len(mf.GetMetric())
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["controller"] == controller {
				out[l["type"]+"/"+l["status"]] = m.GetGauge().GetValue()
			}
		}
	}
	return out, n
}

func expectedGauges(sizes map[string]int64) map[string]float64 {
	want := map[string]float64{}
	for _, s := range sizes {
		for _, c := range widgetConditions(s) {
			want[c.Type+"/"+string(c.Status)]++
		}
	}
	return want
}

// equalCounts compares non-zero entries: a series whose count dropped to 0 stays at 0.
func equalCounts(got, want map[string]float64) bool {
	for k, v := range got {
		if v != want[k] {
			return false
		}
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func TestConditionGaugesCountObjectsWithBoundedSeries(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	reg := prometheus.NewRegistry()
	mgr := newManager(t, ns, mgrConfig{})
	obs, err := observability.Setup(mgr, observability.WithRegisterer(reg), observability.WithGatherer(reg))
	if err != nil {
		t.Fatal(err)
	}
	const name = "widget-conditions"
	watched := &unstructured.Unstructured{}
	watched.SetGroupVersionKind(widgetGVK)
	err = builder.ControllerManagedBy(mgr).Named(name).For(watched).
		WithOptions(controllerOpts(4)).
		Complete(obs.Wrap(name, &widgetReconciler{name: name, c: mgr.GetClient(), m: obs.Metrics()}))
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)

	sizes := map[string]int64{}
	create := func(from, to int) {
		for i := from; i < to; i++ {
			n := fmt.Sprintf("w-%03d", i)
			sizes[n] = int64(i % 11)
			if err := env.Client.Create(ctx, widget(ns, n, sizes[n])); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor := func(what string) int {
		var series int
		eventually(t, 60*time.Second, what, func() (bool, error) {
			got, n := conditionGauges(t, reg, name)
			series = n
			want := expectedGauges(sizes)
			return equalCounts(got, want), fmt.Errorf("got %v want %v", got, want)
		})
		return series
	}

	create(0, 10)
	series10 := waitFor("gauges count 10 widgets")
	create(10, 100)
	series100 := waitFor("gauges count 100 widgets")
	// 2 condition types x 2 statuses in use: the series count does not depend on the objects.
	if series10 != 4 || series100 != 4 {
		t.Fatalf("condition series: %d with 10 objects, %d with 100; want 4 and 4", series10, series100)
	}

	// Status changes move objects between series; deletes stop counting them.
	for i := 0; i < 10; i++ {
		n := fmt.Sprintf("w-%03d", i)
		sizes[n] = 1 // Ready=False, Degraded=False
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"size":1}}`))
		if err := env.Client.Patch(ctx, widget(ns, n, 0), patch); err != nil {
			t.Fatal(err)
		}
	}
	for i := 90; i < 100; i++ {
		n := fmt.Sprintf("w-%03d", i)
		delete(sizes, n)
		if err := env.Client.Delete(ctx, widget(ns, n, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if n := waitFor("gauges after 10 status changes and 10 deletes"); n != 4 {
		t.Fatalf("condition series after changes: %d, want 4", n)
	}
	got, _ := conditionGauges(t, reg, name)
	if got["Ready/True"]+got["Ready/False"] != 90 || got["Degraded/True"]+got["Degraded/False"] != 90 {
		t.Fatalf("each condition type should count the 90 live objects once: %v", got)
	}
}

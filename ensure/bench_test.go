package ensure_test

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/opkit/opkit/ensure"
)

// BenchmarkNoopReconcile measures a steady-state reconcile of three children
// (Deployment, Service, ConfigMap) on the real control plane, reading through
// an informer cache: requests sent per reconcile and reconciles per second.
func BenchmarkNoopReconcile(b *testing.B) {
	b.Run("opkit-ensure-MergePatch", func(b *testing.B) { benchEnsure(b, ensure.MergePatch) })
	b.Run("opkit-ensure-ServerSideApply", func(b *testing.B) { benchEnsure(b, ensure.ServerSideApply) })
	b.Run("controllerutil.CreateOrUpdate", benchCreateOrUpdate)
	b.Run("apply-every-time", benchApplyEveryTime)
}

func report(b *testing.B, h *harness, start time.Time, errs int) {
	b.Helper()
	elapsed := time.Since(start)
	b.ReportMetric(float64(h.counter.Total())/float64(b.N), "requests/op")
	b.ReportMetric(float64(h.counter.Writes())/float64(b.N), "writes/op")
	b.ReportMetric(float64(errs)/float64(b.N), "errors/op")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "reconciles/s")
}

func benchEnsure(b *testing.B, s ensure.Strategy) {
	ns := env.Namespace(b)
	ctx := testCtx(b)
	h := newHarness(b, ns)
	owner := newOwner(b, ns, "app")
	e := h.ensurer(b, s, ensure.WithPrune(&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}))
	dep, svc, cm := children("nginx:1.27")
	if _, err := e.Ensure(ctx, owner, dep, svc, cm); err != nil {
		b.Fatal(err)
	}
	h.waitCached(b, inNS(ns, dep, svc, cm)...)
	h.counter.Reset()
	errs := 0
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := e.Ensure(ctx, owner, dep, svc, cm); err != nil {
			errs++
		}
	}
	b.StopTimer()
	report(b, h, start, errs)
}

// benchCreateOrUpdate is the usual controller code: CreateOrUpdate per child
// with the desired spec assigned wholesale in the mutate function.
func benchCreateOrUpdate(b *testing.B) {
	ns := env.Namespace(b)
	ctx := testCtx(b)
	h := newHarness(b, ns)
	owner := newOwner(b, ns, "app")
	want, wantSvc, wantCM := children("nginx:1.27")
	reconcileOnce := func() error {
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: want.Name}}
		if _, err := controllerutil.CreateOrUpdate(ctx, h.client, dep, func() error {
			dep.Labels = want.Labels
			dep.Spec = *want.Spec.DeepCopy()
			return controllerutil.SetControllerReference(owner, dep, env.Scheme)
		}); err != nil {
			return err
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wantSvc.Name}}
		if _, err := controllerutil.CreateOrUpdate(ctx, h.client, svc, func() error {
			svc.Labels = wantSvc.Labels
			svc.Spec = *wantSvc.Spec.DeepCopy()
			return controllerutil.SetControllerReference(owner, svc, env.Scheme)
		}); err != nil {
			return err
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wantCM.Name}}
		_, err := controllerutil.CreateOrUpdate(ctx, h.client, cm, func() error {
			cm.Data = wantCM.Data
			return controllerutil.SetControllerReference(owner, cm, env.Scheme)
		})
		return err
	}
	if err := reconcileOnce(); err != nil {
		b.Fatal(err)
	}
	h.waitCached(b, inNS(ns, want, wantCM)...)
	h.counter.Reset()
	errs := 0
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		// Errors would be conflicts from updating on a stale cache.
		if err := reconcileOnce(); err != nil {
			errs++
		}
	}
	b.StopTimer()
	report(b, h, start, errs)
}

// benchApplyEveryTime server-side applies every child on every reconcile.
func benchApplyEveryTime(b *testing.B) {
	ns := env.Namespace(b)
	ctx := testCtx(b)
	h := newHarness(b, ns)
	owner := newOwner(b, ns, "app")
	dep, svc, cm := children("nginx:1.27")
	var configs []*unstructured.Unstructured
	for _, o := range inNS(ns, dep, svc, cm) {
		if err := controllerutil.SetControllerReference(owner, o, env.Scheme); err != nil {
			b.Fatal(err)
		}
		gvk, err := apiutil.GVKForObject(o, env.Scheme)
		if err != nil {
			b.Fatal(err)
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			b.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(gvk)
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
		configs = append(configs, u)
	}
	reconcileOnce := func() error {
		for _, u := range configs {
			if err := h.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner("webapp-operator"), client.ForceOwnership); err != nil {
				return err
			}
		}
		return nil
	}
	if err := reconcileOnce(); err != nil {
		b.Fatal(err)
	}
	h.counter.Reset()
	errs := 0
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := reconcileOnce(); err != nil {
			errs++
		}
	}
	b.StopTimer()
	report(b, h, start, errs)
}

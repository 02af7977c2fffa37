package ensure_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/ensure"
)

// BenchmarkCacheMemoryPer1000Bundles measures what ensure's record of
// declared fields (AnnotationDeclared) costs in an operator's informer cache,
// against the alternatives: it writes N WebApp-like bundles (Deployment,
// Service, ConfigMap) with ensure, then fills a fresh cache of the three
// kinds once per variant and reports the live heap it holds per 1,000
// bundles:
//
//	stripped-no-record   every managedFields entry and the record stripped: the floor
//	stripped-record      every managedFields entry stripped, the record kept (ensure's design)
//	own-managedFields    only the field owner's managedFields entries kept, no record (the alternative design)
//	all-managedFields    nothing stripped (controller-runtime's default)
//
// Run: go test -run '^$' -bench CacheMemory -benchtime 1x ./ensure/
func BenchmarkCacheMemoryPer1000Bundles(b *testing.B) {
	const n = 1000
	ns := env.Namespace(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e, err := ensure.New(env.Client, "webapp-operator")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("owner-%04d", i)}}
			if err := env.Client.Create(ctx, owner); err != nil {
				errs <- err
				return
			}
			dep, svc, cm := children("nginx:1.27")
			name := fmt.Sprintf("app-%04d", i)
			dep.Name, svc.Name, cm.Name = name, name, name+"-config"
			svc.Spec.ClusterIP = corev1.ClusterIPNone // the test cluster's service range holds ~250 IPs
			if _, err := e.Ensure(ctx, owner, dep, svc, cm); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}

	dropRecord := func(o client.Object) {
		a := o.GetAnnotations()
		delete(a, ensure.AnnotationDeclared)
		o.SetAnnotations(a)
	}
	variants := []struct {
		name string
		tr   toolscache.TransformFunc
	}{
		{"stripped-no-record", func(in any) (any, error) {
			if o, ok := in.(client.Object); ok {
				o.SetManagedFields(nil)
				dropRecord(o)
			}
			return in, nil
		}},
		{"stripped-record", cache.TransformStripManagedFields()},
		{"own-managedFields", func(in any) (any, error) {
			if o, ok := in.(client.Object); ok {
				var own []metav1.ManagedFieldsEntry
				for _, m := range o.GetManagedFields() {
					if m.Manager == "webapp-operator" {
						own = append(own, m)
					}
				}
				o.SetManagedFields(own)
				dropRecord(o)
			}
			return in, nil
		}},
		{"all-managedFields", nil},
	}
	heaps := map[string]float64{}
	for _, v := range variants {
		before := liveHeap()
		c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}, DefaultTransform: v.tr})
		if err != nil {
			b.Fatal(err)
		}
		cctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = c.Start(cctx) }()
		for _, k := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}} {
			if _, err := c.GetInformer(cctx, k); err != nil {
				b.Fatal(err)
			}
		}
		if !c.WaitForCacheSync(cctx) {
			b.Fatal("cache did not sync")
		}
		var deps appsv1.DeploymentList
		if err := c.List(cctx, &deps); err != nil || len(deps.Items) != n {
			b.Fatalf("cache holds %d Deployments (err %v), want %d", len(deps.Items), err, n)
		}
		deps = appsv1.DeploymentList{}
		after := liveHeap()
		heaps[v.name] = float64(after-before) / (1 << 20) * 1000 / n
		runtime.KeepAlive(c)
		stop()
		<-done
	}
	var record [3]int
	var dl appsv1.DeploymentList
	var sl corev1.ServiceList
	var cl corev1.ConfigMapList
	for i, l := range []client.ObjectList{&dl, &sl, &cl} {
		if err := env.Client.List(ctx, l, client.InNamespace(ns), client.HasLabels{ensure.LabelOwnerUID}); err != nil {
			b.Fatal(err)
		}
		items, _ := metaItems(l)
		for _, o := range items {
			record[i] += len(o.GetAnnotations()[ensure.AnnotationDeclared])
		}
		record[i] /= max(1, len(items))
	}
	for _, v := range variants {
		b.ReportMetric(heaps[v.name], "MiB/1000bundles:"+v.name)
	}
	b.Logf("heap per 1,000 bundles (MiB): %v; record bytes per Deployment/Service/ConfigMap: %v", heaps, record)
}

func metaItems(l client.ObjectList) ([]client.Object, error) {
	var out []client.Object
	switch t := l.(type) {
	case *appsv1.DeploymentList:
		for i := range t.Items {
			out = append(out, &t.Items[i])
		}
	case *corev1.ServiceList:
		for i := range t.Items {
			out = append(out, &t.Items[i])
		}
	case *corev1.ConfigMapList:
		for i := range t.Items {
			out = append(out, &t.Items[i])
		}
	}
	return out, nil
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

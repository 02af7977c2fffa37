package workflow_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/testenv"
	"github.com/opkit/opkit/workflow"
)

// fourLevels: config → db (StatefulSet) → migrate (Job) → app (Deployment),
// and an independent branch cache-config → cache (Deployment).
func fourLevels(*unstructured.Unstructured) []workflow.Node {
	return []workflow.Node{
		{Name: "config", Object: configMap("config")},
		{Name: "db", Object: statefulSet("db"), DependsOn: []string{"config"}},
		{Name: "migrate", Object: batchJob("migrate", false), DependsOn: []string{"db"}},
		{Name: "app", Object: deployment("app"), DependsOn: []string{"migrate"}},
		{Name: "cache-config", Object: configMap("cache-config")},
		{Name: "cache", Object: deployment("cache"), DependsOn: []string{"cache-config"}},
	}
}

func kstatusOf(t *testing.T, w *unstructured.Unstructured) status.Status {
	t.Helper()
	res, err := status.Compute(w)
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

// TestConvergesInOrderAndSteadyStateIsFree: the graph converges with every
// child created exactly once, no child before its dependency was ready, and
// a reconcile of the converged Widget sends no request at all.
func TestConvergesInOrderAndSteadyStateIsFree(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	r := newRig(t, ns, fourLevels)
	// Record creation order with resourceVersions through a watch.
	watched := watchCreates(t, ns)
	w := newWidget(t, ns, "w")
	key := client.ObjectKeyFromObject(w)
	testenv.WaitFor(t, 3*time.Minute, "Widget Ready", func() (bool, error) {
		return conditions.IsTrue(getWidget(t, key), conditions.Ready), nil
	})
	r.waitIdle(t)
	reconciles := r.finished.Load()
	t.Logf("converged in %d reconciles; requests: %d total, %d writes\n%s", reconciles, r.counter.Total(), r.counter.Writes(), r.counter)
	for _, res := range []string{"configmaps", "statefulsets.apps", "jobs.batch", "deployments.apps"} {
		want := map[string]int{"configmaps": 2, "deployments.apps": 2}[res]
		if want == 0 {
			want = 1
		}
		if n := r.counter.Count("create", res); n != want {
			t.Errorf("%s created %d times, want %d", res, n, want)
		}
		if n := r.counter.Count("patch", res) + r.counter.Count("update", res); n != 0 {
			t.Errorf("%s written again %d times after its create", res, n)
		}
	}
	// Order: a child is created only after its dependency was ready, as
	// the watch saw both (resourceVersions order etcd's writes).
	created, ready := watched()
	for _, edge := range [][2]string{{"config", "db"}, {"db", "migrate"}, {"migrate", "app"}, {"cache-config", "cache"}} {
		dep, child := edge[0], edge[1]
		if ready[dep] == 0 || created[child] == 0 || created[child] <= ready[dep] {
			t.Errorf("%s created at rv %d, but its dependency %s became ready at rv %d", child, created[child], dep, ready[dep])
		}
	}
	t.Logf("created at rv %v; ready at rv %v", created, ready)
	wd := getWidget(t, key)
	for _, n := range []string{"config", "db", "migrate", "app", "cache-config", "cache"} {
		if !conditions.IsTrue(wd, "Child-"+n) {
			t.Errorf("condition Child-%s not True: %+v", n, conditions.Get(wd, "Child-"+n))
		}
	}
	if c := conditions.Get(wd, workflow.ConditionChildrenReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("summary condition %+v", c)
	}
	if s := kstatusOf(t, wd); s != status.CurrentStatus {
		t.Errorf("kstatus %s, want Current", s)
	}

	// Steady state: an annotation change reconciles; nothing is sent.
	r.counter.Reset()
	before := r.finished.Load()
	wd.SetAnnotations(map[string]string{"poke": "1"})
	if err := env.Client.Update(ctx, wd); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "reconcile after the poke", func() (bool, error) { return r.finished.Load() > before, nil })
	r.waitIdle(t)
	if n := r.counter.Total(); n != 0 {
		t.Fatalf("steady-state reconcile sent %d requests:\n%s", n, r.counter)
	}
	t.Logf("steady state: %d reconciles, 0 requests", r.finished.Load()-before)
}

// waitIdle waits until no reconcile has started for a second and none runs.
func (r *rig) waitIdle(t *testing.T) {
	t.Helper()
	last, since := r.reconciles.Load(), time.Now()
	testenv.WaitForEvery(t, 100*time.Millisecond, time.Minute, "controller idle", func() (bool, error) {
		if n := r.reconciles.Load(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) > time.Second && r.finished.Load() == r.reconciles.Load(), nil
	})
}

// watchCreates records, per object name, the resourceVersion at which a
// child of the test's kinds was added and the first at which
// workflow.Default called it ready; the returned func stops the watches.
func watchCreates(t *testing.T, ns string) func() (created, ready map[string]int64) {
	t.Helper()
	var mu sync.Mutex
	created, ready := map[string]int64{}, map[string]int64{}
	stop := watchAll(t, ns, func(ev watch.Event, o client.Object) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := created[o.GetName()]; !ok && ev.Type == watch.Added {
			created[o.GetName()] = rv(o)
		}
		if _, ok := ready[o.GetName()]; !ok && ev.Type != watch.Deleted && workflow.Default(o).Ready {
			ready[o.GetName()] = rv(o)
		}
	})
	return func() (map[string]int64, map[string]int64) {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return created, ready
	}
}

func rv(o client.Object) int64 {
	var n int64
	_, _ = fmt.Sscan(o.GetResourceVersion(), &n)
	return n
}

// watchAll watches ConfigMaps, StatefulSets, Jobs and Deployments in ns.
func watchAll(t *testing.T, ns string, f func(watch.Event, client.Object)) func() {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var ws []watch.Interface
	for _, l := range []client.ObjectList{&corev1.ConfigMapList{}, unstructuredList{"apps/v1", "StatefulSetList"}.l(),
		unstructuredList{"batch/v1", "JobList"}.l(), unstructuredList{"apps/v1", "DeploymentList"}.l()} {
		w, err := wc.Watch(context.Background(), l, client.InNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range w.ResultChan() {
				if o, ok := ev.Object.(client.Object); ok {
					f(ev, o)
				}
			}
		}()
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			for _, w := range ws {
				w.Stop()
			}
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	return stop
}

type unstructuredList struct{ apiVersion, kind string }

func (u unstructuredList) l() client.ObjectList {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(u.apiVersion)
	l.SetKind(u.kind)
	return l
}

// TestFailingBranch: a Job that fails blocks only its dependent; the other
// branch becomes Ready; the Widget's conditions name the failing child;
// fixing the declaration resumes the branch.
func TestFailingBranch(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	var mu sync.Mutex
	broken := true
	r := newRig(t, ns, func(*unstructured.Unstructured) []workflow.Node {
		mu.Lock()
		defer mu.Unlock()
		return []workflow.Node{
			{Name: "config", Object: configMap("config")},
			{Name: "seed", Object: batchJob("seed", broken), DependsOn: []string{"config"}},
			{Name: "app", Object: configMap("app"), DependsOn: []string{"seed"}},
			{Name: "cache-config", Object: configMap("cache-config")},
			{Name: "cache", Object: deployment("cache"), DependsOn: []string{"cache-config"}},
		}
	})
	w := newWidget(t, ns, "w")
	key := client.ObjectKeyFromObject(w)
	testenv.WaitFor(t, 3*time.Minute, "Widget Stalled", func() (bool, error) {
		return conditions.IsTrue(getWidget(t, key), conditions.Stalled), nil
	})
	r.waitIdle(t)
	wd := getWidget(t, key)
	rep := r.report()
	for name, want := range map[string]workflow.State{"config": workflow.StateReady, "seed": workflow.StateFailed,
		"app": workflow.StateWaiting, "cache-config": workflow.StateReady, "cache": workflow.StateReady} {
		if got := rep.Node(name).State; got != want {
			t.Errorf("node %s: %s, want %s (%+v)", name, got, want, rep.Node(name))
		}
	}
	if !conditions.IsTrue(wd, "Child-cache") || !conditions.IsFalse(wd, "Child-seed") {
		t.Errorf("per-child conditions: cache %+v, seed %+v", conditions.Get(wd, "Child-cache"), conditions.Get(wd, "Child-seed"))
	}
	sum := conditions.Get(wd, workflow.ConditionChildrenReady)
	if sum == nil || sum.Status != metav1.ConditionFalse || sum.Reason != workflow.ReasonNodeFailed ||
		!strings.Contains(sum.Message, `child "seed"`) || !strings.Contains(sum.Message, `waiting for it: "app"`) {
		t.Fatalf("summary condition %+v does not name the failed child and its waiter", sum)
	}
	if s := kstatusOf(t, wd); s != status.FailedStatus {
		t.Errorf("kstatus %s, want Failed", s)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("dependent of the failed Job exists (err %v)", err)
	}
	t.Logf("failing branch settled after %d reconciles; summary: %s", r.finished.Load(), sum.Message)

	// Fix: the Job is declared schedulable; ensure recreates it (its
	// template is immutable) on the spec change that reconciles the Widget.
	mu.Lock()
	broken = false
	mu.Unlock()
	if err := unstructured.SetNestedField(wd.Object, int64(2), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Update(ctx, wd); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 3*time.Minute, "Widget Ready after the fix", func() (bool, error) {
		return conditions.IsTrue(getWidget(t, key), conditions.Ready), nil
	})
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("dependent after the fix: %v", err)
	}
}

// TestTeardownReverseOrder: on the owner's deletion, a finalizer step tears
// the children down in reverse dependency order, each only once its
// dependents are gone; a child held by a finalizer blocks its dependencies,
// and the owner's conditions name it, stuck after the deadline.
func TestTeardownReverseOrder(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	const hold = "test.opkit.dev/hold"
	r := newRig(t, ns, func(*unstructured.Unstructured) []workflow.Node {
		return []workflow.Node{
			{Name: "base", Object: configMap("base")},
			{Name: "mid", Object: configMap("mid"), DependsOn: []string{"base"}},
			{Name: "top", Object: configMap("top"), DependsOn: []string{"mid"}},
			{Name: "side", Object: configMap("side"), DependsOn: []string{"base"}},
		}
	}, workflow.WithStuckAfter(3*time.Second), workflow.WithRecheck(time.Second))
	w := newWidget(t, ns, "w", teardownFinalizer)
	key := client.ObjectKeyFromObject(w)
	testenv.WaitFor(t, time.Minute, "Widget Ready", func() (bool, error) {
		return conditions.IsTrue(getWidget(t, key), conditions.Ready), nil
	})
	// A finalizer nobody removes, on the top child.
	top := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "top"}, top); err != nil {
		t.Fatal(err)
	}
	top.Finalizers = append(top.Finalizers, hold)
	if err := env.Client.Update(ctx, top); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var deleted []string
	stop := watchAll(t, ns, func(ev watch.Event, o client.Object) {
		if ev.Type == watch.Deleted {
			mu.Lock()
			deleted = append(deleted, o.GetName())
			mu.Unlock()
		}
	})
	if err := env.Client.Delete(ctx, getWidget(t, key)); err != nil {
		t.Fatal(err)
	}
	// The held child is reported, stuck once past 3s; base and mid wait.
	testenv.WaitFor(t, time.Minute, "Widget reports the stuck child", func() (bool, error) {
		c := conditions.Get(getWidget(t, key), conditions.Reconciling)
		return c != nil && c.Reason == workflow.ReasonTeardownStuck, nil
	})
	c := conditions.Get(getWidget(t, key), conditions.Reconciling)
	if !strings.Contains(c.Message, `child "top"`) || !strings.Contains(c.Message, hold) || !strings.Contains(c.Message, `then "mid", "base"`) {
		t.Fatalf("condition message %q does not name the held child, its finalizer and what waits", c.Message)
	}
	rep, _ := r.teardownState()
	if len(rep.Blocking) != 1 || rep.Blocking[0].Name != "top" || !rep.Blocking[0].Stuck || strings.Join(rep.Pending, ",") != "mid,base" {
		t.Fatalf("teardown report: blocking %+v, pending %v", rep.Blocking, rep.Pending)
	}
	for _, n := range []string{"base", "mid"} {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &corev1.ConfigMap{}); err != nil {
			t.Fatalf("%s deleted while a dependent exists: %v", n, err)
		}
	}
	t.Logf("stuck report: %s", c.Message)
	// Release it; the teardown finishes and the Widget goes.
	top = &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "top"}, top); err != nil {
		t.Fatal(err)
	}
	top.Finalizers = nil
	if err := env.Client.Update(ctx, top); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "Widget gone", func() (bool, error) {
		err := env.Client.Get(ctx, key, getWidgetShell())
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	testenv.WaitFor(t, 30*time.Second, "four deletions watched", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(deleted) == 4, nil
	})
	stop()
	pos := map[string]int{}
	for i, n := range deleted {
		pos[n] = i
	}
	if pos["top"] > pos["mid"] || pos["mid"] > pos["base"] || pos["side"] > pos["base"] {
		t.Fatalf("deletion order %v violates the dependencies", deleted)
	}
	t.Logf("deletion order (watch): %v", deleted)
}

func getWidgetShell() *unstructured.Unstructured {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	return w
}

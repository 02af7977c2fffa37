package workflow_test

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/testenv"
	"github.com/opkit/opkit/workflow"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, &env, testenv.WithWorkloads(), testenv.WithCRDPaths("testdata/crds")))
}

var widgetGVK = schema.GroupVersionKind{Group: "test.opkit.dev", Version: "v1", Kind: "Widget"}

func testCtx(tb testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	tb.Cleanup(cancel)
	return c
}

// rig is an operator for Widgets whose children are the workflow nodes
// returns: a manager on a counted config, ensure as the Applier, the
// workflow's report in the Widget's conditions.
type rig struct {
	c          client.Client
	counter    *testenv.RequestCounter
	nodes      func(owner *unstructured.Unstructured) []workflow.Node
	opts       []workflow.Option
	applier    workflow.Applier
	reconciles atomic.Int64 // started
	finished   atomic.Int64

	mu           sync.Mutex
	last         *workflow.Report
	lastTeardown *workflow.TeardownReport
	teardownErr  error
}

func newRig(t *testing.T, ns string, nodes func(owner *unstructured.Unstructured) []workflow.Node, opts ...workflow.Option) *rig {
	t.Helper()
	cfg, counter := testenv.CountRequests(env.Config)
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:  env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Client:  client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e, err := ensure.New(mgr.GetClient(), "workflow-test", ensure.WithAPIReader(mgr.GetAPIReader()),
		ensure.WithRecreateOnImmutable(),
		ensure.WithPrune(&corev1.ConfigMap{}, &appsv1.Deployment{}, &appsv1.StatefulSet{}, &batchv1.Job{}))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{c: mgr.GetClient(), counter: counter, nodes: nodes, opts: opts,
		applier: workflow.ApplierFunc(func(ctx context.Context, owner, obj client.Object, keep []client.Object) (bool, error) {
			cs, err := e.EnsureKeeping(ctx, owner, keep, obj)
			return cs.Changed(), err
		})}
	widget := &unstructured.Unstructured{}
	widget.SetGroupVersionKind(widgetGVK)
	err = builder.ControllerManagedBy(mgr).Named("widget-"+ns).
		For(widget, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&corev1.ConfigMap{}).Owns(&appsv1.Deployment{}).Owns(&appsv1.StatefulSet{}).Owns(&batchv1.Job{}).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		Complete(r)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	t.Cleanup(func() {
		if rep := r.report(); t.Failed() && rep != nil {
			for _, n := range rep.Nodes {
				t.Logf("last report: %s %s %s: %s", n.Name, n.State, n.Reason, n.Message)
			}
		}
	})
	return r
}

func (r *rig) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.reconciles.Add(1)
	defer r.finished.Add(1)
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(widgetGVK)
	if err := r.c.Get(ctx, req.NamespacedName, owner); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	patcher := conditions.NewStatusPatcher(owner)
	w, err := workflow.New(r.c, r.applier, r.nodes(owner), r.opts...)
	if err != nil {
		return outcome.Result(outcome.Terminal("InvalidWorkflow", err))
	}
	if owner.GetDeletionTimestamp() != nil {
		return r.teardown(ctx, w, owner, patcher)
	}
	rep, err := w.Reconcile(ctx, owner)
	if rep != nil {
		r.mu.Lock()
		r.last = rep
		r.mu.Unlock()
		if cerr := workflow.SetConditions(owner, rep, workflow.WithNodeConditions("Child-")); cerr != nil {
			return reconcile.Result{}, cerr
		}
	}
	if err == nil {
		if err := conditions.MarkReady(owner, conditions.ReasonSucceeded, "all children ready"); err != nil {
			return reconcile.Result{}, err
		}
	}
	if aerr := conditions.ApplyOutcome(owner, err); aerr != nil {
		return reconcile.Result{}, aerr
	}
	if _, perr := patcher.Patch(ctx, r.c, owner); perr != nil && err == nil {
		err = perr
	}
	return outcome.Result(err)
}

// teardownFinalizer, when a Widget carries it, makes the rig tear the
// workflow down (as a finalizer step would) before the Widget goes.
const teardownFinalizer = "test.opkit.dev/teardown"

func (r *rig) teardown(ctx context.Context, w *workflow.Workflow, owner *unstructured.Unstructured, patcher *conditions.StatusPatcher[*unstructured.Unstructured]) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(owner, teardownFinalizer) {
		return reconcile.Result{}, nil
	}
	rep, err := w.Teardown(ctx, owner)
	r.mu.Lock()
	r.lastTeardown, r.teardownErr = rep, err
	r.mu.Unlock()
	if err == nil && rep.Done {
		controllerutil.RemoveFinalizer(owner, teardownFinalizer)
		return reconcile.Result{}, r.c.Update(ctx, owner)
	}
	if aerr := conditions.ApplyOutcome(owner, err); aerr != nil {
		return reconcile.Result{}, aerr
	}
	if _, perr := patcher.Patch(ctx, r.c, owner); perr != nil {
		return reconcile.Result{}, perr
	}
	return outcome.Result(err)
}

func (r *rig) teardownState() (*workflow.TeardownReport, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastTeardown, r.teardownErr
}

func (r *rig) report() *workflow.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

func newWidget(t *testing.T, ns, name string, finalizers ...string) *unstructured.Unstructured {
	t.Helper()
	w := &unstructured.Unstructured{}
	w.SetFinalizers(finalizers)
	w.SetGroupVersionKind(widgetGVK)
	w.SetNamespace(ns)
	w.SetName(name)
	if err := unstructured.SetNestedField(w.Object, int64(1), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(testCtx(t), w); err != nil {
		t.Fatal(err)
	}
	return w
}

func getWidget(t *testing.T, key client.ObjectKey) *unstructured.Unstructured {
	t.Helper()
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	if err := env.Client.Get(testCtx(t), key, w); err != nil {
		t.Fatal(err)
	}
	return w
}

// Children of the tests. Names are fixed; the namespace is the owner's.
func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "example.com/" + app + ":1"}}},
	}
}

func deployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		Template: podTemplate(name),
	}}
}

func statefulSet(name string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.StatefulSetSpec{
		Replicas:    ptr.To[int32](1),
		ServiceName: name,
		Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		Template:    podTemplate(name),
	}}
}

// batchJob runs to completion on the kwok node; with unschedulable set, its
// pod can never be scheduled and the Job fails at its 3s deadline.
func batchJob(name string, unschedulable bool) *batchv1.Job {
	t := podTemplate(name)
	t.Spec.RestartPolicy = corev1.RestartPolicyNever
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: t}}
	if unschedulable {
		j.Spec.Template.Spec.NodeSelector = map[string]string{"opkit.dev/no-such-node": "true"}
		j.Spec.ActiveDeadlineSeconds = ptr.To[int64](3)
	}
	return j
}

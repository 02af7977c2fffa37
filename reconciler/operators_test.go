package reconciler_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/reconciler"
)

// callLog counts calls per object name.
type callLog struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *callLog) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
}

func (c *callLog) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

func createGadget(t *testing.T, g *Gadget) *Gadget {
	t.Helper()
	if err := env.Client.Create(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	return g
}

func waitReady(t *testing.T, g *Gadget) {
	t.Helper()
	waitFor(t, 30*time.Second, g.Name+" Ready", func() (bool, error) {
		err := get(t, g)()
		return conditions.IsTrue(g, conditions.Ready) && g.Status.ObservedGeneration == g.Generation, err
	})
}

// mutateGadget re-reads g and applies fn with retries on conflict.
func mutateGadget(t *testing.T, g *Gadget, fn func(*Gadget)) {
	t.Helper()
	for {
		if err := get(t, g)(); err != nil {
			t.Fatal(err)
		}
		fn(g)
		err := env.Client.Update(context.Background(), g)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
}

// TestAnyKindCanBeThePrimary (point 0): a controller For ConfigMaps — no
// status, no generation — copies each labelled ConfigMap's data into a
// child; it converges with zero reconcile errors, and a data edit of the
// primary (which bumps no generation) is propagated at once.
func TestAnyKindCanBeThePrimary(t *testing.T) {
	ns := env.Namespace(t)
	const name = "cm-copy"
	isSource := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()["copy-source"] == "true" })
	startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, name, func() *corev1.ConfigMap { return &corev1.ConfigMap{} }).
			WithPredicates(isSource).
			Owns(&corev1.ConfigMap{}).
			Children(func(_ context.Context, src *corev1.ConfigMap) ([]client.Object, error) {
				return []client.Object{&corev1.ConfigMap{
					TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
					ObjectMeta: metav1.ObjectMeta{Namespace: src.Namespace, Name: src.Name + "-copy"},
					Data:       src.Data,
				}}, nil
			}).
			Observability(obs).
			Complete()
	})
	src := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Labels: map[string]string{"copy-source": "true"}},
		Data:       map[string]string{"color": "blue"},
	}
	if err := env.Client.Create(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	copyHas := func(want string) func() (bool, error) {
		return func() (bool, error) {
			var cp corev1.ConfigMap
			err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "settings-copy"}, &cp)
			return cp.Data["color"] == want, client.IgnoreNotFound(err)
		}
	}
	waitFor(t, 30*time.Second, "the copy", copyHas("blue"))
	// Any backoff would push these past a few seconds.
	for _, c := range []string{"green", "red"} {
		src.Data["color"] = c
		if err := env.Client.Update(context.Background(), src); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		waitFor(t, 5*time.Second, "the copy follows a data edit", copyHas(c))
		t.Logf("data edit %q propagated in %v", c, time.Since(start).Round(time.Millisecond))
	}
	if n := reconcileErrors(t, name); n != 0 {
		t.Fatalf("%v reconcile errors for a kind without status", n)
	}
}

// TestKubebuilderStyleTestWithADirectClient (point 1): a builder-made
// reconciler built on a direct client alone, its Reconcile called by hand as
// a scaffolded unit test does: children created, status written, pruning
// works without a cache; capabilities that need a cache are refused when
// the reconciler is built, naming themselves.
func TestKubebuilderStyleTestWithADirectClient(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	c, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	two := false
	r, err := reconciler.ForClient(c, "gadget-direct", newGadget).
		Owns(&corev1.ConfigMap{}).
		Children(func(ctx context.Context, g *Gadget) ([]client.Object, error) {
			objs, err := desiredConfigMap(&calls)(ctx, g)
			if two {
				extra := objs[0].DeepCopyObject().(*corev1.ConfigMap)
				extra.Name = g.Name + "-extra"
				objs = append(objs, extra)
			}
			return objs, err
		}).
		Status(markReady).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	g := createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "direct"}, Spec: GadgetSpec{Value: "v"}})
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(g)}
	reconcileOK := func() {
		t.Helper()
		if res, err := r.Reconcile(ctx, req); err != nil || res.RequeueAfter != 0 {
			t.Fatalf("Reconcile = %+v, %v", res, err)
		}
	}
	two = true
	reconcileOK()
	if err := get(t, g)(); err != nil || !conditions.IsTrue(g, conditions.Ready) {
		t.Fatalf("after Reconcile: %v, conditions %+v", err, g.Status.Conditions)
	}
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if names := cmNames(cms); !slices.Contains(names, "direct-data") || !slices.Contains(names, "direct-extra") {
		t.Fatalf("children %v", names)
	}
	two = false
	reconcileOK() // prunes direct-extra through a label selector: no field index needed
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "direct-extra"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the dropped child was not pruned: %v", err)
	}

	_, err = reconciler.ForClient(c, "gadget-refs", newGadget).
		References(&corev1.Secret{}, func(g *Gadget) []types.NamespacedName { return []types.NamespacedName{{Name: g.Spec.SecretRef}} }).
		Build()
	if err == nil || !strings.Contains(err.Error(), "References") || !strings.Contains(err.Error(), "cache") {
		t.Fatalf("References without a cache: err %v, want a refusal naming it", err)
	}
	if err := reconciler.ForClient(c, "gadget-complete", newGadget).Complete(); err == nil || !strings.Contains(err.Error(), "manager") {
		t.Fatalf("Complete without a manager: %v", err)
	}
}

func cmNames(l corev1.ConfigMapList) []string {
	var out []string
	for _, cm := range l.Items {
		out = append(out, cm.Name)
	}
	return out
}

// TestRequeueOnSuccessKeepsKstatusCurrent (point 2): a status function that
// says "healthy, look again in 500ms" is reconciled again and again with no
// event, while Reconciling is never set and kstatus reads Current.
func TestRequeueOnSuccessKeepsKstatusCurrent(t *testing.T) {
	ns := env.Namespace(t)
	var polls atomic.Int32
	startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, "gadget-poll", newGadget).
			Status(func(ctx context.Context, g *Gadget, o reconciler.Observed) error {
				polls.Add(1)
				if err := markReady(ctx, g, o); err != nil {
					return err
				}
				return outcome.RequeueAfter(500 * time.Millisecond)
			}).
			Observability(obs).
			Complete()
	})
	g := createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scheduled"}, Spec: GadgetSpec{Value: "v"}})
	waitReady(t, g)
	start := polls.Load()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if err := get(t, g)(); err != nil {
			t.Fatal(err)
		}
		if c := conditions.Get(g, conditions.Reconciling); c != nil {
			t.Fatalf("Reconciling set on a healthy scheduled object: %+v", c)
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(g)
		if err != nil {
			t.Fatal(err)
		}
		res, err := status.Compute(&unstructured.Unstructured{Object: u})
		if err != nil || res.Status != status.CurrentStatus {
			t.Fatalf("kstatus = %v (%v), want Current", res, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// 3 s at 500-550 ms: about 5 polls; at least 3 rules out "none".
	if n := polls.Load() - start; n < 3 || n > 8 {
		t.Fatalf("%d polls in 3s, want about 5 (every 500ms + jitter)", n)
	}
}

// TestHistoryChildrenSurviveAndAreListedAndDeleted (point 3): Jobs a
// schedule created are history, not a declared set: WithoutPrune keeps
// them when the next one is declared; Observed.Children lists them —
// including one another tool linked by an ownerReference alone — and
// Observed.Delete trims the history to a limit; with the owner index and
// without it (label selector plus a namespace scan).
func TestHistoryChildrenSurviveAndAreListedAndDeleted(t *testing.T) {
	for name, opts := range map[string][]reconciler.OwnsOption{
		"indexed":   {reconciler.WithoutPrune()},
		"unindexed": {reconciler.WithoutPrune(), reconciler.WithoutIndex()},
	} {
		t.Run(name, func(t *testing.T) { historyChildren(t, opts, nil) })
	}
	// A cache of every namespace: the owner index is in the informers'
	// stores (ensure.IndexOwner), not a field index a List can read.
	t.Run("indexed/all-namespaces", func(t *testing.T) {
		historyChildren(t, []reconciler.OwnsOption{reconciler.WithoutPrune()}, func(o *manager.Options) { o.Cache.DefaultNamespaces = nil })
	})
}

func historyChildren(t *testing.T, owns []reconciler.OwnsOption, edit func(*manager.Options)) {
	ns := env.Namespace(t)
	const limit = 2
	var listed atomic.Int32
	startManagerWith(t, ns, edit, func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, "gadget-cron", newGadget).
			Owns(&batchv1.Job{}, owns...).
			Children(func(_ context.Context, g *Gadget) ([]client.Object, error) {
				return []client.Object{job(g.Namespace, g.Name+"-"+g.Spec.Schedule)}, nil
			}).
			Status(func(ctx context.Context, g *Gadget, o reconciler.Observed) error {
				var jobs batchv1.JobList
				if err := o.Children(ctx, &jobs); err != nil {
					return err
				}
				listed.Store(int32(len(jobs.Items)))
				sort.Slice(jobs.Items, func(i, j int) bool { return jobs.Items[i].Name < jobs.Items[j].Name })
				for i := 0; i < len(jobs.Items)-limit-1; i++ { // keep the limit plus the hand-made one
					if err := o.Delete(ctx, &jobs.Items[i]); err != nil {
						return err
					}
				}
				return markReady(ctx, g, o)
			}).
			Observability(obs).
			Complete()
	})
	g := createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cron"}, Spec: GadgetSpec{Schedule: "t1"}})
	waitReady(t, g)
	// Another tool's Job, linked by a controller ownerReference only (named to sort last).
	byHand := job(ns, "zz-by-hand")
	byHand.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "test.opkit.dev/v1", Kind: "Gadget", Name: g.Name, UID: g.UID, Controller: ptr.To(true),
	}}
	if err := env.Client.Create(context.Background(), byHand); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"t2", "t3"} {
		mutateGadget(t, g, func(g *Gadget) { g.Spec.Schedule = s })
		waitReady(t, g)
	}
	jobNames := func() []string {
		var jobs batchv1.JobList
		if err := env.Client.List(context.Background(), &jobs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range jobs.Items {
			if j.DeletionTimestamp == nil {
				out = append(out, j.Name)
			}
		}
		sort.Strings(out)
		return out
	}
	want := []string{"cron-t2", "cron-t3", "zz-by-hand"}
	waitFor(t, 30*time.Second, fmt.Sprintf("jobs %v", want), func() (bool, error) {
		return slices.Equal(jobNames(), want), nil
	})
	if n := listed.Load(); n < 3 {
		t.Fatalf("Observed.Children listed %d jobs, want the history and the hand-made one", n)
	}
}

func job(ns, name string) *batchv1.Job {
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "run", Image: "busybox"}},
		}}},
	}
}

// TestCreateOnlyFieldStaysWhileReplicasChange (point 3): operator "v2"
// declares a new selector label (immutable) and 3 replicas; with
// spec.selector create-only the live selector stays, replicas change, and the
// object is Ready, not Stalled.
func TestCreateOnlyFieldStaysWhileReplicasChange(t *testing.T) {
	ns := env.Namespace(t)
	startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, "gadget-deploy", newGadget).
			Owns(&appsv1.Deployment{}, reconciler.WithCreateOnly("spec.selector")).
			Children(func(_ context.Context, g *Gadget) ([]client.Object, error) {
				labels := func() map[string]string {
					if g.Spec.Value == "v2" {
						return map[string]string{"app": g.Name, "tier": "web"}
					}
					return map[string]string{"app": g.Name}
				}
				replicas := int32(1)
				if g.Spec.Value == "v2" {
					replicas = 3
				}
				return []client.Object{&appsv1.Deployment{
					TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
					ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.Name},
					Spec: appsv1.DeploymentSpec{
						Replicas: &replicas,
						Selector: &metav1.LabelSelector{MatchLabels: labels()},
						Template: corev1.PodTemplateSpec{
							ObjectMeta: metav1.ObjectMeta{Labels: labels()},
							Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
						},
					},
				}}, nil
			}).
			Status(markReady).
			Observability(obs).
			Complete()
	})
	g := createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operand"}, Spec: GadgetSpec{Value: "v1"}})
	waitReady(t, g)
	mutateGadget(t, g, func(g *Gadget) { g.Spec.Value = "v2" })
	waitReady(t, g)
	var dep appsv1.Deployment
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "operand"}, &dep); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(dep.Spec.Replicas, 0) != 3 {
		t.Fatalf("replicas %v, want 3", dep.Spec.Replicas)
	}
	if sel := dep.Spec.Selector.MatchLabels; len(sel) != 1 || sel["app"] != "operand" {
		t.Fatalf("selector %v, want the create-time one", sel)
	}
	if conditions.Get(g, conditions.Stalled) != nil {
		t.Fatalf("Stalled: %+v", conditions.Get(g, conditions.Stalled))
	}
}

// TestReferencedSecretReconcilesExactlyItsReferrers (point 4): a change to
// a Secret reconciles the Gadgets whose spec.secretRef names it — each
// exactly once — and no other; the Secrets are watched metadata-only.
func TestReferencedSecretReconcilesExactlyItsReferrers(t *testing.T) {
	ns := env.Namespace(t)
	var calls callLog
	startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		b := reconciler.For(mgr, "gadget-refs", newGadget).
			Status(func(ctx context.Context, g *Gadget, o reconciler.Observed) error {
				calls.add(g.Name)
				return markReady(ctx, g, o)
			}).
			Observability(obs)
		return b.References(&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}},
			func(g *Gadget) []types.NamespacedName {
				return []types.NamespacedName{{Name: g.Spec.SecretRef}}
			}, builder.OnlyMetadata).
			Complete()
	})
	for _, s := range []string{"s1", "s2"} {
		if err := env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s}}); err != nil {
			t.Fatal(err)
		}
	}
	refs := map[string]string{"a": "s1", "b": "s1", "c": "s2", "d": ""}
	for name, s := range refs {
		g := createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: GadgetSpec{SecretRef: s}})
		waitReady(t, g)
	}
	time.Sleep(time.Second) // let the creates' events settle
	before := map[string]int{}
	for name := range refs {
		before[name] = calls.get(name)
	}
	s1 := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s1"}, StringData: map[string]string{"token": "rotated"}}
	if err := env.Client.Update(context.Background(), s1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a and b reconciled", func() (bool, error) {
		return calls.get("a") > before["a"] && calls.get("b") > before["b"], nil
	})
	time.Sleep(time.Second)
	for name, want := range map[string]int{"a": 1, "b": 1, "c": 0, "d": 0} {
		if got := calls.get(name) - before[name]; got != want {
			t.Errorf("%s reconciled %d times after s1 changed, want %d", name, got, want)
		}
	}
}

// TestLabelLinkedClusterScopedChildDriftIsCorrected (point 4, fix 5): a
// cluster-scoped child of a namespaced Gadget is linked by ensure's owner
// label only; a change made to it by hand reconciles the owner, which sets
// it back, without any event on the owner.
func TestLabelLinkedClusterScopedChildDriftIsCorrected(t *testing.T) {
	ns := env.Namespace(t)
	roleName := "gadget-" + ns
	startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, "gadget-rbac", newGadget).
			Owns(&rbacv1.ClusterRole{}).
			Children(func(_ context.Context, g *Gadget) ([]client.Object, error) {
				return []client.Object{&rbacv1.ClusterRole{
					TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
					ObjectMeta: metav1.ObjectMeta{Name: roleName},
					Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
				}}, nil
			}, ensure.WithCrossNamespace()).
			Status(markReady).
			Observability(obs).
			Complete()
	})
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: roleName}})
	})
	g := createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rbac"}})
	waitReady(t, g)
	var role rbacv1.ClusterRole
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: roleName}, &role); err != nil {
		t.Fatal(err)
	}
	if len(role.OwnerReferences) != 0 || role.Labels[ensure.LabelOwnerUID] != string(g.UID) {
		t.Fatalf("child link: ownerReferences %v, labels %v", role.OwnerReferences, role.Labels)
	}
	role.Rules[0].Verbs = []string{"get", "list", "delete"}
	if err := env.Client.Update(context.Background(), &role); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "drift on the cluster-scoped child corrected", func() (bool, error) {
		err := env.Client.Get(context.Background(), client.ObjectKey{Name: roleName}, &role)
		return err == nil && slices.Equal(role.Rules[0].Verbs, []string{"get"}), err
	})
}

// TestControllerOptionsPassThrough (point 5): controller-runtime options
// reach the controller: here ReconciliationTimeout puts a deadline on every
// reconcile's context.
func TestControllerOptionsPassThrough(t *testing.T) {
	ns := env.Namespace(t)
	var left atomic.Int64
	startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, "gadget-opts", newGadget).
			WithOptions(controller.Options{ReconciliationTimeout: 42 * time.Second, MaxConcurrentReconciles: 2}).
			Status(func(ctx context.Context, g *Gadget, o reconciler.Observed) error {
				if d, ok := ctx.Deadline(); ok {
					left.Store(int64(time.Until(d)))
				}
				return markReady(ctx, g, o)
			}).
			Observability(obs).
			Complete()
	})
	waitReady(t, createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "opts"}}))
	if d := time.Duration(left.Load()); d < 30*time.Second || d > 42*time.Second {
		t.Fatalf("deadline %v ahead, want about 42s", d)
	}
}

// TestFinalizerStepReportsProgressInConditions (point 6): a cleanup step
// sets its own condition on the object; it reaches the API server in the
// status write of the deletion's progress, and the object is removed once
// the step is done.
func TestFinalizerStepReportsProgressInConditions(t *testing.T) {
	ns := env.Namespace(t)
	var open atomic.Bool
	startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, "gadget-fin", newGadget).
			Finalizer("test.opkit.dev/drain", finalizer.WithStep("drain", func(_ context.Context, g *Gadget) (finalizer.StepResult, error) {
				if !open.Load() {
					if err := conditions.Set(g, metav1.Condition{Type: "Finalizing", Status: metav1.ConditionTrue, Reason: "Draining", Message: "draining connections"}); err != nil {
						return finalizer.StepResult{}, err
					}
					return finalizer.RequeueAfter(300 * time.Millisecond), nil
				}
				return finalizer.Done(), nil
			})).
			Status(markReady).
			Observability(obs).
			Complete()
	})
	g := createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fin"}})
	waitReady(t, g)
	if err := env.Client.Delete(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the step's condition on the deleting object", func() (bool, error) {
		err := get(t, g)()
		c := conditions.Get(g, "Finalizing")
		return c != nil && c.Reason == "Draining", err
	})
	open.Store(true)
	waitFor(t, 10*time.Second, "gone", func() (bool, error) { return apierrors.IsNotFound(get(t, g)()), nil })
}

// TestPauseObserveOnlyAndReconcileNow (point 8): pause writes nothing but
// its condition over a window of spec changes (request count), and resumes;
// observe-only writes status but no child; reconcile-now is handled once
// and recorded in status.lastHandledReconcileAt.
func TestPauseObserveOnlyAndReconcileNow(t *testing.T) {
	ns := env.Namespace(t)
	var calls atomic.Int32
	var statusCalls atomic.Int32
	requests := startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, "gadget-ops", newGadget).
			Owns(&corev1.ConfigMap{}).
			Finalizer("test.opkit.dev/ops", finalizer.WithStep("noop", func(context.Context, *Gadget) (finalizer.StepResult, error) {
				return finalizer.Done(), nil
			})).
			Children(desiredConfigMap(&calls)).
			Status(func(ctx context.Context, g *Gadget, o reconciler.Observed) error {
				statusCalls.Add(1)
				return markReady(ctx, g, o)
			}).
			Observability(obs).
			Complete()
	})
	g := createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"}, Spec: GadgetSpec{Value: "one"}})
	waitReady(t, g)
	childValue := func() string {
		var cm corev1.ConfigMap
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "ops-data"}, &cm); err != nil {
			t.Fatal(err)
		}
		return cm.Data["value"]
	}
	annotate := func(k, v string) {
		mutateGadget(t, g, func(g *Gadget) {
			if g.Annotations == nil {
				g.Annotations = map[string]string{}
			}
			if v == "" {
				delete(g.Annotations, k)
			} else {
				g.Annotations[k] = v
			}
		})
	}

	// Pause.
	annotate(reconciler.AnnotationPaused, "true")
	waitFor(t, 10*time.Second, "Paused condition", func() (bool, error) {
		err := get(t, g)()
		return conditions.IsTrue(g, reconciler.ConditionPaused), err
	})
	time.Sleep(500 * time.Millisecond)
	requests.Reset()
	before := calls.Load()
	for _, v := range []string{"p1", "p2", "p3"} {
		mutateGadget(t, g, func(g *Gadget) { g.Spec.Value = v })
		time.Sleep(300 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if w := requests.Writes(); w != 0 || calls.Load() != before {
		t.Fatalf("paused: %d writes and %d DesiredFunc calls over 3 spec changes:\n%s", w, calls.Load()-before, requests)
	}
	if v := childValue(); v != "one" {
		t.Fatalf("paused object's child changed to %q", v)
	}
	annotate(reconciler.AnnotationPaused, "")
	waitFor(t, 10*time.Second, "resumed", func() (bool, error) {
		err := get(t, g)()
		return conditions.Get(g, reconciler.ConditionPaused) == nil && conditions.IsTrue(g, conditions.Ready) && g.Status.ObservedGeneration == g.Generation, err
	})
	waitFor(t, 10*time.Second, "child follows after resume", func() (bool, error) { return childValue() == "p3", nil })

	// Observe-only: status computed, no child written.
	annotate(reconciler.AnnotationObserveOnly, "true")
	sBefore := statusCalls.Load()
	mutateGadget(t, g, func(g *Gadget) { g.Spec.Value = "observed" })
	waitFor(t, 10*time.Second, "status computed in observe-only", func() (bool, error) {
		err := get(t, g)()
		return statusCalls.Load() > sBefore && g.Status.ObservedGeneration == g.Generation, err
	})
	time.Sleep(500 * time.Millisecond)
	if v := childValue(); v != "p3" {
		t.Fatalf("observe-only wrote the child: %q", v)
	}
	annotate(reconciler.AnnotationObserveOnly, "")
	waitFor(t, 10*time.Second, "child follows after observe-only ends", func() (bool, error) { return childValue() == "observed", nil })

	// Reconcile now, once.
	time.Sleep(500 * time.Millisecond)
	before = calls.Load()
	annotate(reconciler.AnnotationReconcileRequestedAt, "2026-12-01T00:00:00Z")
	waitFor(t, 10*time.Second, "lastHandledReconcileAt", func() (bool, error) {
		err := get(t, g)()
		return g.Status.LastHandled == "2026-12-01T00:00:00Z", err
	})
	time.Sleep(time.Second)
	if n := calls.Load() - before; n != 1 {
		t.Fatalf("reconcile-now ran %d reconciles, want 1", n)
	}
}

// reconcileErrors reads controller-runtime's reconcile error counter of
// controller from its global registry.
func reconcileErrors(t *testing.T, controller string) float64 {
	t.Helper()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_reconcile_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no reconcile error counter for controller %s", controller)
	return 0
}

// TestTwoControllersShareOneObject (point 7): a main controller (summary
// owner: Configured, Ready) and a backup controller (BackedUp,
// status.phase) reconcile the same Gadgets under a burst of concurrent spec
// edits. Neither loses the other's condition, the summary follows the
// backup's condition, and once settled nobody writes (no ping-pong, no hot
// loop).
func TestTwoControllersShareOneObject(t *testing.T) {
	ns := env.Namespace(t)
	var mainCalls, backupCalls atomic.Int32
	requests := startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		err := reconciler.For(mgr, "gadget-main", newGadget).
			ShareStatus(reconciler.StatusShare{Conditions: []string{"Configured"}}).
			Status(func(_ context.Context, g *Gadget, _ reconciler.Observed) error {
				mainCalls.Add(1)
				if err := conditions.Set(g, metav1.Condition{Type: "Configured", Status: metav1.ConditionTrue, Reason: "Value", Message: g.Spec.Value}); err != nil {
					return err
				}
				if b := conditions.Get(g, "BackedUp"); b == nil || b.Message != g.Spec.Value {
					return conditions.Set(g, metav1.Condition{Type: conditions.Ready, Status: metav1.ConditionFalse, Reason: "WaitingForBackup", Message: "no backup of " + g.Spec.Value + " yet"})
				}
				return conditions.MarkReady(g, "BackedUp", "configured and backed up")
			}).
			Observability(obs).
			Complete()
		if err != nil {
			return err
		}
		return reconciler.For(mgr, "gadget-backup", newGadget).
			ShareStatus(reconciler.StatusShare{Outcome: "BackedUp", Fields: []string{"phase"}}).
			WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
			Status(func(_ context.Context, g *Gadget, _ reconciler.Observed) error {
				backupCalls.Add(1)
				g.Status.Phase = "backed-up-" + g.Spec.Value
				return conditions.Set(g, metav1.Condition{Type: "BackedUp", Status: metav1.ConditionTrue, Reason: "Succeeded", Message: g.Spec.Value})
			}).
			Observability(obs).
			Complete()
	})
	names := []string{"s1", "s2", "s3"}
	gs := map[string]*Gadget{}
	for _, n := range names {
		gs[n] = createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}, Spec: GadgetSpec{Value: "v0"}})
	}
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func(g *Gadget) {
			defer wg.Done()
			for i := 1; i <= 8; i++ {
				mutateGadget(t, g, func(g *Gadget) { g.Spec.Value = fmt.Sprintf("v%d", i) })
				time.Sleep(30 * time.Millisecond)
			}
		}(gs[n])
	}
	wg.Wait()
	settled := func(g *Gadget) func() (bool, error) {
		return func() (bool, error) {
			err := get(t, g)()
			b, c := conditions.Get(g, "BackedUp"), conditions.Get(g, "Configured")
			return err == nil && b != nil && b.Message == "v8" && c != nil && c.Message == "v8" &&
				g.Status.Phase == "backed-up-v8" && conditions.IsTrue(g, conditions.Ready) && g.Status.ObservedGeneration == g.Generation, err
		}
	}
	for _, n := range names {
		waitFor(t, 30*time.Second, n+" settled with both controllers' status", settled(gs[n]))
	}
	time.Sleep(time.Second)
	requests.Reset()
	m, b := mainCalls.Load(), backupCalls.Load()
	time.Sleep(2 * time.Second)
	if requests.Writes() != 0 || mainCalls.Load() != m || backupCalls.Load() != b {
		t.Fatalf("after settling: %d writes, %d main and %d backup reconciles in 2s (ping-pong or hot loop):\n%s",
			requests.Writes(), mainCalls.Load()-m, backupCalls.Load()-b, requests)
	}
	for _, n := range names {
		g := gs[n]
		for _, c := range []string{"Configured", "BackedUp", conditions.Ready} {
			if conditions.Get(g, c) == nil {
				t.Errorf("%s lost condition %s: %+v", n, c, g.Status.Conditions)
			}
		}
		if conditions.Get(g, conditions.Reconciling) != nil || conditions.Get(g, conditions.Stalled) != nil {
			t.Errorf("%s: %+v", n, g.Status.Conditions)
		}
	}
	t.Logf("reconciles: main %d, backup %d for 3 objects × 9 generations", m, b)
}

// TestWatchesAndWithoutWatch (points 3 and 4): a child kind declared
// WithoutWatch does not reconcile its owner when it changes (drift waits
// for the owner's next event), while Watches with any handler does — here
// a Secret mapped to a fixed Gadget.
func TestWatchesAndWithoutWatch(t *testing.T) {
	ns := env.Namespace(t)
	var calls atomic.Int32
	startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, "gadget-watches", newGadget).
			Owns(&corev1.ConfigMap{}, reconciler.WithoutWatch()).
			Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, s client.Object) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: s.GetNamespace(), Name: "w"}}}
			})).
			Children(desiredConfigMap(&calls)).
			Status(markReady).
			Observability(obs).
			Complete()
	})
	g := createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}, Spec: GadgetSpec{Value: "v"}})
	waitReady(t, g)
	time.Sleep(500 * time.Millisecond)
	before := calls.Load()
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "w-data"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["value"] = "drifted"
	if err := env.Client.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if calls.Load() != before {
		t.Fatalf("a change to a WithoutWatch child reconciled the owner %d times", calls.Load()-before)
	}
	if err := env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "poke"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the Secret watch reconciles the Gadget, which corrects the child", func() (bool, error) {
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "w-data"}, cm)
		return err == nil && cm.Data["value"] == "v", err
	})
}

// TestOwnsAfterEnsurerIsRefused: a declaration that would not reach the
// Ensurer, because it comes after Ensurer() made it, fails Build.
func TestOwnsAfterEnsurerIsRefused(t *testing.T) {
	c, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	b := reconciler.ForClient(c, "late", newGadget)
	if _, err := b.Ensurer(); err != nil {
		t.Fatal(err)
	}
	_, err = b.Owns(&corev1.ConfigMap{}).Build()
	if err == nil || !strings.Contains(err.Error(), "Owns after Ensurer()") {
		t.Fatalf("Build = %v, want a refusal of the late Owns", err)
	}
}

// TestClusterScopedOwnerIsReconciledUnderItsOwnKey: a namespaced child of a
// cluster-scoped owner (here a ConfigMap of a Namespace, linked by a
// controller ownerReference) reconciles the owner under the owner's key —
// no namespace — and never under a key carrying the child's namespace, which
// the work queue would treat as another object and reconcile concurrently
// with the real one.
func TestClusterScopedOwnerIsReconciledUnderItsOwnKey(t *testing.T) {
	ns := env.Namespace(t)
	var mu sync.Mutex
	keys := map[types.NamespacedName]int{}
	startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, "namespace-owner", func() *corev1.Namespace { return &corev1.Namespace{} }).
			WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == ns })).
			Owns(&corev1.ConfigMap{}).
			Children(func(_ context.Context, n *corev1.Namespace) ([]client.Object, error) {
				return []client.Object{&corev1.ConfigMap{
					TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
					ObjectMeta: metav1.ObjectMeta{Namespace: n.Name, Name: "owned"},
					Data:       map[string]string{"k": "declared"},
				}}, nil
			}).
			WithSteps(reconciler.Steps[*corev1.Namespace]{Get: func(ctx context.Context, key types.NamespacedName, n *corev1.Namespace) error {
				mu.Lock()
				keys[key]++
				mu.Unlock()
				return mgr.GetClient().Get(ctx, key, n)
			}}).
			Observability(obs).
			Complete()
	})
	cm := &corev1.ConfigMap{}
	waitFor(t, 10*time.Second, "the Namespace's ConfigMap created", func() (bool, error) {
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "owned"}, cm)
		return err == nil, err
	})
	if ref := metav1.GetControllerOf(cm); ref == nil || ref.Kind != "Namespace" || ref.Name != ns {
		t.Fatalf("the ConfigMap is not linked to its Namespace by a controller ownerReference: %v", cm.OwnerReferences)
	}
	cm.Data["k"] = "drifted"
	if err := env.Client.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the drift corrected", func() (bool, error) {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(cm), cm)
		return err == nil && cm.Data["k"] == "declared", err
	})
	mu.Lock()
	defer mu.Unlock()
	for key := range keys {
		if key != (types.NamespacedName{Name: ns}) {
			t.Errorf("the cluster-scoped owner was reconciled under key %q; want only %q (all keys: %v)", key, ns, keys)
		}
	}
}

// TestOwnerBucketPastSixtyFourIsRefinedOnTheReconcilerPath: ensure's owner
// index refines itself (ensure.OwnerFineIndex) once a read finds more than
// 64 objects in an owner's bucket; through the builder, with a cache of every
// namespace (the index in the informers' stores), prune and
// Observed.Children keep to the owner's own children while 80 other owners'
// ConfigMaps, labelled as this controller labels its children, share the
// owner's bucket — 40 of them its fine bucket too — and the informer's store
// holds the fine index after the first prune.
func TestOwnerBucketPastSixtyFourIsRefinedOnTheReconcilerPath(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	var listed atomic.Value // []string: the ConfigMaps Observed.Children returned last
	var informers cache.Informers
	startManagerWith(t, ns, func(o *manager.Options) { o.Cache.DefaultNamespaces = nil }, func(mgr manager.Manager, obs *observability.Observability) error {
		informers = mgr.GetCache()
		return reconciler.For(mgr, "gadget-fine", newGadget).
			Owns(&corev1.ConfigMap{}).
			Children(func(_ context.Context, g *Gadget) ([]client.Object, error) {
				cm := func(name string) client.Object {
					return &corev1.ConfigMap{
						TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
						ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: name},
						Data:       map[string]string{"value": g.Spec.Value},
					}
				}
				return []client.Object{cm(g.Name + "-keep"), cm(g.Name + "-" + g.Spec.Value)}, nil
			}).
			Status(func(ctx context.Context, g *Gadget, o reconciler.Observed) error {
				var cms corev1.ConfigMapList
				if err := o.Children(ctx, &cms); err != nil {
					return err
				}
				listed.Store(cmNames(cms))
				return markReady(ctx, g, o)
			}).
			Observability(obs).
			Complete()
	})
	g := createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Spec: GadgetSpec{Value: "a"}})
	waitReady(t, g)
	var child corev1.ConfigMap
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-keep"}, &child); err != nil {
		t.Fatal(err)
	}
	uid := string(g.UID)
	if child.Labels[ensure.LabelOwnerUID] != uid {
		t.Fatalf("child labels %v, want %s=%s", child.Labels, ensure.LabelOwnerUID, uid)
	}
	// Other owners' children: 40 whose owner UIDs share the owner's fine
	// bucket (three characters) and 40 that share only its bucket ("-" is no
	// hex digit, so another fine bucket).
	var decoys []string
	for _, mates := range []struct{ prefix, name string }{{ensure.OwnerFineBucket(uid), "fine"}, {ensure.OwnerBucket(uid), "coarse"}} {
		for i := range 40 {
			name := fmt.Sprintf("%s-%d", mates.name, i)
			d := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
				ensure.LabelOwnerUID: fmt.Sprintf("%s-%s", mates.prefix, name),
				ensure.LabelManager:  child.Labels[ensure.LabelManager],
			}}}
			if err := env.Client.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			decoys = append(decoys, name)
		}
	}
	inf, err := informers.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	store := inf.(interface{ GetIndexer() toolscache.Indexer }).GetIndexer()
	waitFor(t, 30*time.Second, "the decoys in the cache", func() (bool, error) {
		_, ok, err := store.GetByKey(ns + "/" + decoys[len(decoys)-1])
		return ok, err
	})
	for _, value := range []string{"b", "c"} {
		prev := "app-" + g.Spec.Value
		mutateGadget(t, g, func(g *Gadget) { g.Spec.Value = value })
		waitReady(t, g)
		want := []string{"app-" + value, "app-keep"}
		waitFor(t, 30*time.Second, fmt.Sprintf("%s pruned, Observed.Children %v", prev, want), func() (bool, error) {
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: prev}, &corev1.ConfigMap{})
			got, _ := listed.Load().([]string)
			got = slices.Sorted(slices.Values(got))
			return apierrors.IsNotFound(err) && slices.Equal(got, want), client.IgnoreNotFound(err)
		})
		if store.GetIndexers()[ensure.OwnerFineIndex] == nil {
			t.Fatalf("after reads of a bucket of more than 64 objects, the store has no %s", ensure.OwnerFineIndex)
		}
		for _, name := range decoys {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{}); err != nil {
				t.Fatalf("another owner's ConfigMap %s: %v", name, err)
			}
		}
	}
}

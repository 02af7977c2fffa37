package ensure_test

import (
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/outcome"
)

// TestCreateOnlyFieldKeepsItsLiveValueWhileOtherChangesApply: operator v2
// declares a different Deployment selector (immutable) and more replicas.
// Without a field policy the write is refused and the replica change is lost
// with it (the owner Stalls); with spec.selector create-only, the live
// selector stays, the replicas change, and the next Ensure is a no-op.
func TestCreateOnlyFieldKeepsItsLiveValueWhileOtherChangesApply(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.String(), func(t *testing.T) {
			ns := env.Namespace(t)
			ctx := testCtx(t)
			h := newHarness(t, ns)
			owner := newOwner(t, ns, "app")
			v1dep, _, _ := children("nginx:1.27")
			v1dep.Namespace = ns
			if _, err := h.ensurer(t, s).Ensure(ctx, owner, v1dep); err != nil {
				t.Fatal(err)
			}
			h.waitCached(t, v1dep)

			// v2 adds a label to the selector and the template and scales to 3.
			v2dep := v1dep.DeepCopy()
			v2labels := map[string]string{"app": "web", "tier": "frontend"}
			v2dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: v2labels}
			v2dep.Spec.Template.Labels = map[string]string{"app": "web", "tier": "frontend"}
			v2dep.Spec.Replicas = ptr.To[int32](3)

			_, err := h.ensurer(t, s).Ensure(ctx, owner, v2dep)
			if outcome.Classify(err).Class != outcome.ClassTerminal || !errors.Is(err, ensure.ErrImmutable) {
				t.Fatalf("without a field policy: err %v (class %v), want a terminal ErrImmutable", err, outcome.Classify(err).Class)
			}
			var live appsv1.Deployment
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(v1dep), &live); err != nil {
				t.Fatal(err)
			}
			if got := ptr.Deref(live.Spec.Replicas, 0); got == 3 {
				t.Fatalf("the refused write changed replicas")
			}

			e := h.ensurer(t, s, ensure.WithCreateOnly(&appsv1.Deployment{}, "spec.selector"))
			cs, err := e.Ensure(ctx, owner, v2dep)
			if err != nil {
				t.Fatalf("with spec.selector create-only: %v", err)
			}
			wantActions(t, cs, ensure.Updated)
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(v1dep), &live); err != nil {
				t.Fatal(err)
			}
			if got := live.Spec.Selector.MatchLabels; len(got) != 1 || got["app"] != "web" {
				t.Errorf("selector %v, want the create-time {app: web}", got)
			}
			if ptr.Deref(live.Spec.Replicas, 0) != 3 || live.Spec.Template.Labels["tier"] != "frontend" {
				t.Errorf("replicas %v, template labels %v: v2's other changes were not applied", live.Spec.Replicas, live.Spec.Template.Labels)
			}
			h.waitCached(t, v1dep)
			h.counter.Reset()
			cs, err = e.Ensure(ctx, owner, v2dep)
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, ensure.Unchanged)
			if got := h.counter.Total(); got != 0 {
				t.Fatalf("steady state with a create-only field sent %d requests:\n%s", got, h.counter)
			}

			// A fresh object gets the declared (v2) selector at create.
			fresh := v2dep.DeepCopy()
			fresh.Name = "web2"
			if _, err := e.Ensure(ctx, owner, v2dep, fresh); err != nil {
				t.Fatal(err)
			}
			var created appsv1.Deployment
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web2"}, &created); err != nil {
				t.Fatal(err)
			}
			if created.Spec.Selector.MatchLabels["tier"] != "frontend" {
				t.Errorf("created with selector %v, want the declared one", created.Spec.Selector.MatchLabels)
			}
		})
	}
}

// TestRecreateOnChangeReplacesTheObject: a Job's pod template is immutable;
// with spec.template recreate-on-change, a changed image replaces the Job
// (new UID) in one Ensure, and an unchanged declaration does nothing.
func TestRecreateOnChangeReplacesTheObject(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	h := newHarness(t, ns)
	owner := newOwner(t, ns, "app")
	job := func(image string) *batchv1.Job {
		return &batchv1.Job{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "migrate"},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "m", Image: image}},
			}}},
		}
	}
	e := h.ensurer(t, ensure.MergePatch, ensure.WithRecreateOnChange(&batchv1.Job{}, "spec.template"))
	if _, err := e.Ensure(ctx, owner, job("migrate:1")); err != nil {
		t.Fatal(err)
	}
	var first batchv1.Job
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "migrate"}, &first); err != nil {
		t.Fatal(err)
	}
	h.waitCached(t, &first)
	h.counter.Reset()
	cs, err := e.Ensure(ctx, owner, job("migrate:1"))
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, ensure.Unchanged)
	if h.counter.Total() != 0 {
		t.Fatalf("unchanged Job (server-defaulted template) sent requests:\n%s", h.counter)
	}
	cs, err = e.Ensure(ctx, owner, job("migrate:2"))
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, ensure.Recreated)
	var second batchv1.Job
	eventually(t, 30*time.Second, "the recreated Job", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "migrate"}, &second)
		return err == nil && second.UID != first.UID, client.IgnoreNotFound(err)
	})
	if got := second.Spec.Template.Spec.Containers[0].Image; got != "migrate:2" {
		t.Fatalf("recreated Job runs %s", got)
	}
}

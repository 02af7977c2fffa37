package reconciler_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/opkit/opkit/conditions"
	bucketv1 "github.com/opkit/opkit/examples/bucket/api/v1"
	dbv1 "github.com/opkit/opkit/examples/database/api/v1"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/reconciler"
)

// TestFinalizerConditionsReachEveryExampleType: on the reconciler path, with
// no per-type code (the example types implement no accessor), a deleting
// WebApp, Bucket and Database show FinalizerCleanup=False/CleanupFailed while
// a step fails, FinalizerCleanup=False/DeletionBlocked while a destructive
// step waits for consent, and Stalled=True/StuckDeleting past the deadline
// (finalizer guarantees 6, 7 and 9); then consent lets the object go.
func TestFinalizerConditionsReachEveryExampleType(t *testing.T) {
	t.Run("WebApp", func(t *testing.T) {
		finalizerConditions(t, func() *webappv1.WebApp { return &webappv1.WebApp{} }, func(o *webappv1.WebApp) { o.Spec.Image = "nginx:1.27" })
	})
	t.Run("Bucket", func(t *testing.T) {
		finalizerConditions(t, func() *bucketv1.Bucket { return &bucketv1.Bucket{} }, func(o *bucketv1.Bucket) { o.Spec.Region = "eu-west-1" })
	})
	t.Run("Database", func(t *testing.T) {
		finalizerConditions(t, func() *dbv1.Database { return &dbv1.Database{} }, func(o *dbv1.Database) { o.Spec.Version = "v16" })
	})
}

func finalizerConditions[T client.Object](t *testing.T, newObject func() T, valid func(T)) {
	ns := env.Namespace(t)
	ctx := context.Background()
	var failing atomic.Bool
	failing.Store(true)
	startManager(t, ns, func(mgr manager.Manager, obs *observability.Observability) error {
		return reconciler.For(mgr, "fin-conditions", newObject).
			Finalizer("test.opkit.dev/cleanup",
				finalizer.WithStep("release-dns", func(context.Context, T) (finalizer.StepResult, error) {
					if failing.Load() {
						return finalizer.StepResult{}, errors.New("dns api: 503 service unavailable")
					}
					return finalizer.Done(), nil
				}),
				finalizer.WithStep("drop-data", func(context.Context, T) (finalizer.StepResult, error) {
					return finalizer.Done(), nil
				}, finalizer.Destructive()),
				finalizer.WithDeadline(3*time.Second)).
			Observability(obs).
			Complete()
	})
	obj := newObject()
	obj.SetNamespace(ns)
	obj.SetName("doomed")
	valid(obj)
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(obj)
	waitFor(t, 30*time.Second, "finalizer added", func() (bool, error) {
		err := env.Client.Get(ctx, key, obj)
		return err == nil && len(obj.GetFinalizers()) == 1, err
	})
	if err := env.Client.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
	condition := func(typ, status, reason string) func() (bool, error) {
		return func() (bool, error) {
			if err := env.Client.Get(ctx, key, obj); err != nil {
				return false, err
			}
			c := conditions.Get(obj, typ)
			if c == nil {
				return false, errors.New(typ + " not set")
			}
			return string(c.Status) == status && c.Reason == reason, errors.New(typ + "=" + string(c.Status) + "/" + c.Reason + ": " + c.Message)
		}
	}
	waitFor(t, 30*time.Second, "FinalizerCleanup=False/CleanupFailed", condition(finalizer.ConditionCleanup, "False", finalizer.ReasonCleanupFailed))
	if c := conditions.Get(obj, finalizer.ConditionCleanup); !strings.Contains(c.Message, "release-dns") || !strings.Contains(c.Message, "503") {
		t.Errorf("CleanupFailed message does not name the step and the error: %q", c.Message)
	}
	failing.Store(false)
	waitFor(t, 30*time.Second, "FinalizerCleanup=False/DeletionBlocked", condition(finalizer.ConditionCleanup, "False", finalizer.ReasonDeletionBlocked))
	if c := conditions.Get(obj, finalizer.ConditionCleanup); !strings.Contains(c.Message, finalizer.AllowDataLossAnnotation) {
		t.Errorf("DeletionBlocked message does not name the annotation: %q", c.Message)
	}
	waitFor(t, 30*time.Second, "Stalled=True/StuckDeleting", condition(conditions.Stalled, "True", finalizer.ReasonStuckDeleting))
	if c := conditions.Get(obj, conditions.Stalled); !strings.Contains(c.Message, "drop-data") {
		t.Errorf("StuckDeleting message does not name the stuck step: %q", c.Message)
	}
	// kstatus, as Flux, Argo CD and kubectl see the object: a deleting object
	// is Terminating whatever its conditions say; the conditions above are
	// what tells a person why.
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	res, err := status.Compute(&unstructured.Unstructured{Object: content})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != status.TerminatingStatus {
		t.Errorf("kstatus = %s (%s), want Terminating", res.Status, res.Message)
	}
	t.Logf("kstatus: %s (%s); conditions: %s", res.Status, res.Message, summarize(obj))
	// Consent: the destructive step runs and the object goes.
	obj.SetAnnotations(map[string]string{finalizer.AllowDataLossAnnotation: "true"})
	if err := env.Client.Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "object gone after consent", func() (bool, error) {
		err := env.Client.Get(ctx, key, newObject())
		return client.IgnoreNotFound(err) == nil && err != nil, err
	})
}

func summarize(obj client.Object) string {
	cs, _ := conditions.List(obj)
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		parts = append(parts, c.Type+"="+string(c.Status)+"/"+c.Reason)
	}
	return strings.Join(parts, ", ")
}

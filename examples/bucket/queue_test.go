package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/opkit/opkit/conditions"
	storagev1 "github.com/opkit/opkit/examples/bucket/api/v1"
	"github.com/opkit/opkit/examples/bucket/cloud"
	"github.com/opkit/opkit/examples/bucket/controller"
	"github.com/opkit/opkit/examples/internal/e2etest"
	"github.com/opkit/opkit/external"
)

// TestQueueOperatorReusesThePackage runs the second controller built on
// package external — Queues, a different resource of the same fake cloud,
// with server-side defaults and an immediate delete — beside the bucket
// controller, both pacing their calls through one Limiter per account.
func TestQueueOperatorReusesThePackage(t *testing.T) {
	f := newFixture(t)
	mgr := e2etest.NewManager(t, env.Config, env.Scheme, f.ns, func(o *manager.Options) { o.Cache.ByObject = controller.CacheByObject() })
	o := controller.Options{
		CloudEndpoint: f.url, Observability: mgr.Observability, Limiter: external.NewLimiter(20, 10),
		ResyncInterval: time.Second, CallTimeout: 2 * time.Second, DeletePollInterval: 200 * time.Millisecond,
	}
	if err := controller.Setup(mgr, o); err != nil {
		t.Fatal(err)
	}
	if err := controller.SetupQueues(mgr, o); err != nil {
		t.Fatal(err)
	}
	mgr.Run(t)
	ctx := e2etest.Context(t, 2*time.Minute)

	q := &storagev1.Queue{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "jobs"},
		Spec: storagev1.QueueSpec{
			VisibilityTimeoutSeconds: ptr.To[int32](60),
			CredentialsSecretRef:     storagev1.SecretReference{Name: credsSecret},
		},
	}
	b := newBucket(f.ns, "beside")
	if err := env.Client.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitQueueReady := func() {
		t.Helper()
		waitFor(t, 60*time.Second, "Queue Ready for its generation", func() (bool, error) {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
				return false, err
			}
			return conditions.IsTrue(q, conditions.Ready) && q.Status.ObservedGeneration == q.Generation, nil
		})
	}
	waitQueueReady()
	waitReady(t, b)

	name := f.ns + "_jobs"
	ext, ok := f.cloud.GetQueue(name)
	if !ok || ext.ClientToken != "queue-"+string(q.UID) || ext.VisibilityTimeoutSeconds != 60 || ext.RetentionSeconds != cloud.DefaultRetentionSeconds {
		t.Fatalf("cloud queue %q: %+v (found %v)", name, ext, ok)
	}
	// Late initialisation: the retention the spec left out is the cloud's.
	waitFor(t, 30*time.Second, "spec.retentionSeconds late-initialised", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(q), q)
		return q.Spec.RetentionSeconds != nil && *q.Spec.RetentionSeconds == cloud.DefaultRetentionSeconds, err
	})
	if q.Status.URL != ext.URL || q.Annotations[external.AnnotationExternalName] != name {
		t.Fatalf("status %+v, annotations %v", q.Status, q.Annotations)
	}
	var conn corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "jobs-queue"}, &conn); err != nil {
		t.Fatal(err)
	}
	if string(conn.Data[controller.ConnectionAccessToken]) != ext.AccessToken || !metav1.IsControlledBy(&conn, q) {
		t.Fatalf("connection Secret %v, owners %v", conn.Data, conn.OwnerReferences)
	}

	// Drift made in the cloud is set back.
	ten := 10
	if _, err := f.client(t).UpdateQueue(ctx, name, cloud.UpdateQueueRequest{VisibilityTimeoutSeconds: &ten}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "cloud queue set back to the spec", func() (bool, error) {
		ext, ok := f.cloud.GetQueue(name)
		return ok && ext.VisibilityTimeoutSeconds == 60, nil
	})
	e := waitEvent(t, f.ns, "jobs", controller.ReasonDriftCorrected)
	if !strings.Contains(e.Note, "visibilityTimeoutSeconds 10→60") {
		t.Fatalf("event %q", e.Note)
	}

	// No access token in the stored Queue or any event.
	raw := &unstructured.Unstructured{}
	raw.SetGroupVersionKind(storagev1.GroupVersion.WithKind("Queue"))
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(q), raw); err != nil {
		t.Fatal(err)
	}
	stored, _ := json.Marshal(raw.Object)
	events, _ := json.Marshal(eventsFor(t, f.ns, ""))
	if strings.Contains(string(stored), ext.AccessToken) || strings.Contains(string(events), ext.AccessToken) {
		t.Fatal("the queue's access token leaked into the Queue or an event")
	}

	if err := env.Client.Delete(ctx, q); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "Queue gone", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(q), &storagev1.Queue{})
		if apierrors.IsNotFound(err) {
			if _, ok := f.cloud.GetQueue(name); ok {
				t.Fatal("the Queue went while its cloud queue exists")
			}
			return true, nil
		}
		return false, err
	})
	if n := f.cloud.CallCount(cloud.OpCreateQueue); n != 1 {
		t.Fatalf("%d CreateQueue calls, want 1", n)
	}
}

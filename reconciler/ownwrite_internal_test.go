package reconciler

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// writtenDeployment is a Deployment as a status write's response holds it:
// labels, a finalizer, managedFields and a status with conditions.
func writtenDeployment(rv string) *appsv1.Deployment {
	now := metav1.NewTime(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "web", UID: "u1", ResourceVersion: rv, Generation: 2,
			Labels:     map[string]string{"app.kubernetes.io/name": "web", "app.kubernetes.io/managed-by": "opkit"},
			Finalizers: []string{"example.com/cleanup"},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "opkit", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status",
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:readyReplicas":{}}}`),
			}},
		},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, UpdatedReplicas: 3,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: "True", Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability.", LastTransitionTime: now, LastUpdateTime: now},
				{Type: appsv1.DeploymentProgressing, Status: "True", Reason: "NewReplicaSetAvailable", Message: "ReplicaSet has successfully progressed.", LastTransitionTime: now, LastUpdateTime: now},
			},
		},
	}
}

func newDeployment() client.Object { return &appsv1.Deployment{} }

// TestOwnWritesOverlay: a read older than the remembered write gets the
// write's status, finalizers and resourceVersion (and nothing else of it);
// a read as new as the write, or of another object with the same key,
// drops the entry; the remembered copy is not changed by what its
// overlays' readers do, nor by the written object after remember.
func TestOwnWritesOverlay(t *testing.T) {
	var w ownWrites
	written := writtenDeployment("20")
	w.remember(written)
	written.Status.ReadyReplicas = 99 // the caller's object is its own after remember
	written.Finalizers[0] = "changed"

	stale := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "web", UID: "u1", ResourceVersion: "10", Generation: 3,
		Labels: map[string]string{"from": "cache"},
	}}
	stale.Status.ReadyReplicas = 1
	w.overlay(stale, newDeployment)
	if stale.ResourceVersion != "20" || stale.Status.ReadyReplicas != 3 || len(stale.Status.Conditions) != 2 {
		t.Fatalf("stale read after overlay: rv %q, readyReplicas %d, %d conditions; want 20, 3, 2",
			stale.ResourceVersion, stale.Status.ReadyReplicas, len(stale.Status.Conditions))
	}
	if !slices.Equal(stale.Finalizers, []string{"example.com/cleanup"}) {
		t.Fatalf("finalizers after overlay = %v, want the written ones", stale.Finalizers)
	}
	if stale.Generation != 3 || stale.Labels["from"] != "cache" || stale.ManagedFields != nil {
		t.Fatalf("overlay changed more than status and finalizers: %+v", stale.ObjectMeta)
	}
	// The reader owns what it got: changing it leaves the entry alone.
	stale.Status.Conditions[0].Reason = "Mutated"
	stale.Finalizers[0] = "mutated"
	again := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1", ResourceVersion: "10"}}
	w.overlay(again, newDeployment)
	if again.Status.Conditions[0].Reason != "MinimumReplicasAvailable" || again.Finalizers[0] != "example.com/cleanup" {
		t.Fatalf("second overlay saw the first reader's changes: %+v %v", again.Status.Conditions[0], again.Finalizers)
	}

	// As new as the write: left as read, and the entry is gone.
	current := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1", ResourceVersion: "20"}}
	w.overlay(current, newDeployment)
	if current.Status.ReadyReplicas != 0 || current.Finalizers != nil {
		t.Fatalf("a read as new as the write was overlaid: %+v", current)
	}
	older := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1", ResourceVersion: "10"}}
	w.overlay(older, newDeployment)
	if older.ResourceVersion != "10" {
		t.Fatalf("the entry outlived a read as new as its write")
	}

	// Another object under the same key (deleted and created again).
	w.remember(writtenDeployment("30"))
	other := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u2", ResourceVersion: "5"}}
	w.overlay(other, newDeployment)
	if other.ResourceVersion != "5" || other.Status.ReadyReplicas != 0 {
		t.Fatalf("another object's read was overlaid: %+v", other)
	}
}

// BenchmarkOwnWritesRemember is the cost the status step adds to every
// status write it makes: remembering the response.
func BenchmarkOwnWritesRemember(b *testing.B) {
	var w ownWrites
	obj := writtenDeployment("20")
	b.ReportAllocs()
	for b.Loop() {
		w.remember(obj)
	}
}

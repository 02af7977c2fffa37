package controller

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/ensure"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/registry"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/reconciler"
)

// TestStatusDoesNotJudgeADeploymentItJustWrote reproduces the race CI hit
// (TestSpecChangeRollsOutAndUpdatesObservedGeneration): the reconcile that
// patched the Deployment to 3 replicas read it back from a cache still
// holding the old, settled 1-replica Deployment, and called the WebApp
// Ready for the new generation. A pure unit test: the cache is a fake
// reader holding exactly that stale object.
func TestStatusDoesNotJudgeADeploymentItJustWrote(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	stale := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "blog", Generation: 1},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: "True", Reason: "MinimumReplicasAvailable"}},
		},
	}
	reader := fake.NewClientBuilder().WithScheme(s).WithObjects(stale).Build()
	app := &webappv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "blog", Generation: 2},
		Spec:       webappv1.WebAppSpec{Image: "nginx:1.28", Replicas: ptr.To[int32](3)},
	}
	written := ensure.ChangeSet{{GVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespace: "ns", Name: "blog", Action: ensure.Updated}}
	err := status(context.Background(), registry.New(), app, reconciler.Observed{Changes: written, Reader: reader})
	if c := outcome.Classify(err); c.Class != outcome.ClassDependencyNotReady || conditions.IsTrue(app, conditions.Ready) {
		t.Fatalf("status after writing the Deployment: %v (class %v), Ready %v; want a wait, not Ready", err, c.Class, conditions.IsTrue(app, conditions.Ready))
	}
	// The next reconcile, with nothing written, judges what the cache holds.
	err = status(context.Background(), registry.New(), app, reconciler.Observed{Reader: reader})
	if err != nil {
		t.Fatalf("status with nothing written: %v", err)
	}
}

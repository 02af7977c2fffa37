package outcome_test

import (
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opkit/opkit/outcome"
)

func ExampleClassify() {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	for _, err := range []error{
		nil,
		apierrors.NewConflict(gr, "web", errors.New("object was modified")),
		apierrors.NewInternalError(errors.New("etcd unavailable")),
		outcome.DependencyNotReady("DatabaseNotReady", "waiting for postgres", 15*time.Second),
		outcome.Terminal("InvalidSpec", errors.New("spec.replicas must be >= 0")),
	} {
		c := outcome.Classify(err)
		fmt.Printf("%s reason=%q requeueAfter=%v\n", c.Class, c.Reason, c.RequeueAfter)
	}
	// Output:
	// Success reason="" requeueAfter=0s
	// Conflict reason="Conflict" requeueAfter=100ms
	// Transient reason="InternalError" requeueAfter=0s
	// DependencyNotReady reason="DatabaseNotReady" requeueAfter=15s
	// Terminal reason="InvalidSpec" requeueAfter=0s
}

func ExampleResult() {
	res, err := outcome.Result(outcome.DependencyNotReady("DatabaseNotReady", "waiting for postgres", 15*time.Second))
	fmt.Println(res.RequeueAfter, err)

	res, err = outcome.Result(outcome.Terminal("InvalidSpec", errors.New("spec.replicas must be >= 0")))
	fmt.Println(res.RequeueAfter, err)
	// Output:
	// 15s <nil>
	// 0s terminal error: InvalidSpec: spec.replicas must be >= 0
}

// A scheduled object is healthy and wants to be looked at again in a minute:
// success, with a (jittered) requeue, and no error for controller-runtime.
func ExampleRequeueAfter() {
	res, err := outcome.Result(outcome.RequeueAfter(time.Minute))
	fmt.Println(outcome.Classify(outcome.RequeueAfter(time.Minute)).Class, err, res.RequeueAfter >= time.Minute)
	// Output: Success <nil> true
}

package workflow_test

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/workflow"
)

// A Secret-like ConfigMap, a migration Job that needs it, and an app that
// needs the migration; an optional debug ConfigMap that is switched off. The
// Applier here only creates (a fake client has no Job controller); an
// operator passes ensure's Ensurer (see the package documentation).
func Example() {
	ctx := context.Background()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "db", UID: "uid-1"}}
	c := newFake(owner)
	debug := false
	w, err := workflow.New(c, &createApplier{c: c}, []workflow.Node{
		{Name: "app", Object: configMap("app"), DependsOn: []string{"migrate"}},
		{Name: "migrate", Object: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate"}}, DependsOn: []string{"config"}},
		{Name: "config", Object: configMap("config")},
		{Name: "debug", Object: configMap("debug"), Active: func() bool { return debug }},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("order:", w.Nodes())
	pass := func() {
		rep, err := w.Reconcile(ctx, owner)
		for _, n := range rep.Nodes {
			fmt.Printf("  %-8s %-9s %s\n", n.Name, n.State, n.Reason)
		}
		cl := outcome.Classify(err)
		fmt.Printf("  summary: %s %s\n", cl.Class, cl.Reason)
	}
	fmt.Println("pass 1:")
	pass()
	fmt.Println("pass 2:")
	pass()

	// The Job completes (here by hand).
	job := &batchv1.Job{}
	_ = c.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "migrate"}, job)
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	_ = c.Status().Update(ctx, job)
	fmt.Println("pass 3:")
	pass()
	fmt.Println("pass 4:")
	pass()
	// Output:
	// order: [config migrate app debug]
	// pass 1:
	//   config   NotReady  Applied
	//   migrate  Waiting   WaitingForDependency
	//   app      Waiting   WaitingForDependency
	//   debug    Inactive  Inactive
	//   summary: DependencyNotReady ChildNotReady
	// pass 2:
	//   config   Ready     Current
	//   migrate  NotReady  Applied
	//   app      Waiting   WaitingForDependency
	//   debug    Inactive  Inactive
	//   summary: DependencyNotReady ChildNotReady
	// pass 3:
	//   config   Ready     Current
	//   migrate  Ready     Complete
	//   app      NotReady  Applied
	//   debug    Inactive  Inactive
	//   summary: DependencyNotReady ChildNotReady
	// pass 4:
	//   config   Ready     Current
	//   migrate  Ready     Complete
	//   app      Ready     Current
	//   debug    Inactive  Inactive
	//   summary: Success
}

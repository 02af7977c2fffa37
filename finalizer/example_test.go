package finalizer_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/opkit/opkit/finalizer"
)

// The fake client stands in for an API server so the examples can run.
func exampleClient(objs ...client.Object) client.Client {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func Example() {
	ctx := context.Background()
	c := exampleClient(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db", UID: "uid-1"}})

	f, err := finalizer.New[*corev1.ConfigMap](c, "example.com/cleanup",
		finalizer.WithStep("snapshot", func(context.Context, *corev1.ConfigMap) (finalizer.StepResult, error) {
			fmt.Println("snapshot taken")
			return finalizer.Done(), nil
		}),
		finalizer.WithStep("drop-tables", func(context.Context, *corev1.ConfigMap) (finalizer.StepResult, error) {
			fmt.Println("tables dropped")
			return finalizer.Done(), nil
		}, finalizer.Destructive()),
	)
	if err != nil {
		panic(err)
	}
	reconcileOnce := func() {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "db"}, cm); err != nil {
			fmt.Println("object gone:", apierrors.IsNotFound(err))
			return
		}
		res, err := f.Reconcile(ctx, cm)
		fmt.Printf("deleting=%v finalizers=%v requeue=%s err=%v\n", res.Deleting, cm.Finalizers, res.RequeueAfter, err)
	}

	reconcileOnce() // live: the finalizer is added
	_ = c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"}})
	reconcileOnce() // snapshot runs; drop-tables waits for consent

	cm := &corev1.ConfigMap{}
	_ = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "db"}, cm)
	cm.Annotations[finalizer.AllowDataLossAnnotation] = "true"
	_ = c.Update(ctx, cm)
	reconcileOnce() // drop-tables runs; the finalizer is removed
	reconcileOnce()
	// Output:
	// deleting=false finalizers=[example.com/cleanup] requeue=0s err=<nil>
	// snapshot taken
	// deleting=true finalizers=[example.com/cleanup] requeue=10m0s err=<nil>
	// tables dropped
	// deleting=true finalizers=[] requeue=0s err=<nil>
	// object gone: true
}

// A namespaced object's cleanup deletes a dependent in another namespace and
// a cluster-scoped one — links ownerReferences cannot express — and reports
// Done only when both are verifiably gone.
func Example_crossNamespaceDependents() {
	ctx := context.Background()
	c := exampleClient(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app", UID: "uid-app", Finalizers: []string{"example.com/dependents"}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shared", Name: "team-a-app"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "team-a-app"}},
	)
	dependents := func(app *corev1.ConfigMap) []client.Object {
		name := app.Namespace + "-" + app.Name
		return []client.Object{
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shared", Name: name}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}},
		}
	}
	f, err := finalizer.New[*corev1.ConfigMap](c, "example.com/dependents",
		finalizer.WithStep("dependents", func(ctx context.Context, app *corev1.ConfigMap) (finalizer.StepResult, error) {
			left := 0
			for _, d := range dependents(app) {
				err := c.Get(ctx, client.ObjectKeyFromObject(d), d)
				if apierrors.IsNotFound(err) {
					continue
				}
				if err != nil {
					return finalizer.StepResult{}, err
				}
				left++
				fmt.Printf("deleting %T %s\n", d, strings.TrimPrefix(client.ObjectKeyFromObject(d).String(), "/"))
				if err := c.Delete(ctx, d); client.IgnoreNotFound(err) != nil {
					return finalizer.StepResult{}, err
				}
			}
			if left > 0 {
				return finalizer.RequeueAfter(5 * time.Second), nil // verify on the next pass
			}
			return finalizer.Done(), nil
		}))
	if err != nil {
		panic(err)
	}
	_ = c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app"}})
	for range 3 {
		app := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "app"}, app); err != nil {
			fmt.Println("app gone:", apierrors.IsNotFound(err))
			break
		}
		res, err := f.Reconcile(ctx, app)
		fmt.Printf("finalized=%v requeue=%s err=%v\n", res.Finalized, res.RequeueAfter, err)
	}
	// Output:
	// deleting *v1.ConfigMap shared/team-a-app
	// deleting *v1.ClusterRole team-a-app
	// finalized=false requeue=5s err=<nil>
	// finalized=true requeue=0s err=<nil>
	// app gone: true
}

func ExampleValidateName() {
	fmt.Println(finalizer.ValidateName("example.com/cleanup"))
	fmt.Println(finalizer.ValidateName("cleanup"))
	// Output:
	// <nil>
	// finalizer: invalid name: metadata.finalizers: Invalid value: "cleanup": must have a domain prefix, e.g. example.com/cleanup
}

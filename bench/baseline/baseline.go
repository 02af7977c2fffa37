// Package baseline is the webapp operator written the way the kubebuilder book
// teaches, with plain controller-runtime: For + Owns, a finalizer added with
// controllerutil and r.Update, every child written with
// controllerutil.CreateOrUpdate (the desired spec assigned in the mutate
// function), and the status written with r.Status().Update at the end of every
// reconcile. It exists only so the benchmarks can compare opkit's
// examples/webapp operator with it; it is not part of the library.
//
// Its observable behaviour matches examples/webapp: the same children (built
// by the example's own controller.Children), the same finalizer releasing the
// route from the registry, status.observedGeneration, an Available condition
// mirrored from the Deployment, and Ready=True only when the Deployment's
// status describes its current spec, is Available, and every replica is
// updated and ready. It emits no events and registers no metrics of its own,
// like the opkit contender in the benchmark (which runs without observability).
package baseline

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	webapp "github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/examples/webapp/registry"
)

// Name is the baseline controller's name (the controller_runtime_* metrics label).
const Name = "webapp-baseline"

// requeueNotReady matches the example's look-again interval while the
// Deployment is not Available yet.
const requeueNotReady = 30 * time.Second

// WebAppReconciler reconciles WebApps.
type WebAppReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Registry *registry.Registry
	// Concurrency is MaxConcurrentReconciles (default 4, as in the example).
	Concurrency int
}

// Reconcile is the book's shape: fetch, handle deletion, add the finalizer,
// CreateOrUpdate each child, compute the status, Status().Update.
func (r *WebAppReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)

	app := &webappv1.WebApp{}
	if err := r.Get(ctx, req.NamespacedName, app); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	if !app.DeletionTimestamp.IsZero() {
		if controllerutil.ContainsFinalizer(app, webapp.FinalizerName) {
			if !r.Registry.Release(ctx, key(app)) {
				return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
			}
			controllerutil.RemoveFinalizer(app, webapp.FinalizerName)
			if err := r.Update(ctx, app); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, nil
	}

	if !controllerutil.ContainsFinalizer(app, webapp.FinalizerName) {
		controllerutil.AddFinalizer(app, webapp.FinalizerName)
		if err := r.Update(ctx, app); err != nil {
			return ctrl.Result{}, err
		}
	}

	for _, desired := range webapp.Children(app) {
		if err := r.createOrUpdate(ctx, app, desired); err != nil {
			log.Error(err, "Failed to reconcile child", "kind", fmt.Sprintf("%T", desired), "name", desired.GetName())
			return ctrl.Result{}, err
		}
	}

	requeue := r.computeStatus(ctx, app)
	if err := r.Status().Update(ctx, app); err != nil {
		log.Error(err, "Failed to update WebApp status")
		return ctrl.Result{}, err
	}
	if requeue {
		return ctrl.Result{RequeueAfter: requeueNotReady}, nil
	}
	return ctrl.Result{}, nil
}

// createOrUpdate writes one child the usual way: the desired labels and spec
// are assigned in the mutate function, and CreateOrUpdate sends an Update
// whenever the result differs from what the cache holds.
func (r *WebAppReconciler) createOrUpdate(ctx context.Context, app *webappv1.WebApp, desired client.Object) error {
	var obj client.Object
	var mutate func()
	switch want := desired.(type) {
	case *corev1.ConfigMap:
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: want.Namespace, Name: want.Name}}
		obj, mutate = cm, func() { cm.Labels = want.Labels; cm.Data = want.Data }
	case *appsv1.Deployment:
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: want.Namespace, Name: want.Name}}
		obj, mutate = dep, func() { dep.Labels = want.Labels; dep.Spec = *want.Spec.DeepCopy() }
	case *corev1.Service:
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: want.Namespace, Name: want.Name}}
		obj, mutate = svc, func() { svc.Labels = want.Labels; svc.Spec = *want.Spec.DeepCopy() }
	default:
		return fmt.Errorf("unexpected child %T", desired)
	}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, obj, func() error {
		mutate()
		return ctrl.SetControllerReference(app, obj, r.Scheme)
	})
	return err
}

// computeStatus fills app.Status from the Deployment in the cache and reports
// whether to look again later.
func (r *WebAppReconciler) computeStatus(ctx context.Context, app *webappv1.WebApp) bool {
	app.Status.ObservedGeneration = app.Generation
	app.Status.URL = fmt.Sprintf("http://%s.%s.svc", app.Name, app.Namespace)
	r.Registry.Register(ctx, key(app), app.Status.URL)

	setReady := func(status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&app.Status.Conditions, metav1.Condition{
			Type: "Ready", Status: status, Reason: reason, Message: message, ObservedGeneration: app.Generation,
		})
	}

	dep := &appsv1.Deployment{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: app.Name}, dep); err != nil {
		// Just created: the cache has not seen it yet; its watch event brings us back.
		reason := "DeploymentUnreadable"
		if apierrors.IsNotFound(err) {
			reason = "DeploymentNotFound"
		}
		app.Status.Phase = "Progressing"
		setReady(metav1.ConditionUnknown, reason, err.Error())
		return true
	}
	app.Status.ReadyReplicas = dep.Status.ReadyReplicas
	if dep.Status.ObservedGeneration < dep.Generation {
		app.Status.Phase = "Progressing"
		setReady(metav1.ConditionUnknown, "DeploymentProgressing", "the Deployment controller has not observed the latest spec yet")
		return true
	}

	available := metav1.Condition{Type: webapp.ConditionAvailable, Status: metav1.ConditionUnknown, Reason: "NotYetReported",
		Message: "the Deployment has not reported Available yet", ObservedGeneration: app.Generation}
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			available.Status, available.Reason, available.Message = metav1.ConditionStatus(c.Status), c.Reason, c.Message
		}
	}
	meta.SetStatusCondition(&app.Status.Conditions, available)
	if available.Status != metav1.ConditionTrue {
		app.Status.Phase = "Progressing"
		setReady(metav1.ConditionFalse, "DeploymentNotAvailable", "waiting for the Deployment to become Available")
		return true
	}
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	if dep.Status.UpdatedReplicas < want || dep.Status.ReadyReplicas < want || dep.Status.Replicas > want {
		app.Status.Phase = "Progressing"
		setReady(metav1.ConditionFalse, "RolloutInProgress", fmt.Sprintf("rollout in progress: %d of %d replicas updated and ready",
			min(dep.Status.UpdatedReplicas, dep.Status.ReadyReplicas), want))
		return true
	}
	app.Status.Phase = "Ready"
	setReady(metav1.ConditionTrue, "Available", "the Deployment is Available")
	return false
}

func key(app *webappv1.WebApp) string { return app.Namespace + "/" + app.Name }

// SetupWithManager registers the controller: the WebApp and every child kind
// it owns are watched, without predicates, as the book's scaffold does.
func (r *WebAppReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Registry == nil {
		return fmt.Errorf("baseline webapp controller: a registry is required")
	}
	if r.Concurrency == 0 {
		r.Concurrency = 4
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&webappv1.WebApp{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Named(Name).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Concurrency}).
		Complete(r)
}

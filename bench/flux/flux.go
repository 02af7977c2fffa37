// Package flux is the webapp operator written on Flux's server-side apply
// engine, github.com/fluxcd/pkg/ssa (the library closest to opkit's ensure),
// the way a Flux user writes a controller-runtime operator with it. It exists
// only so the benchmarks can compare opkit's examples/webapp operator with a
// real peer library; it is not part of opkit.
//
// Each reconcile: fetch the WebApp from the cache; on deletion release the
// route and remove the finalizer; otherwise add the finalizer (a merge
// patch), build the children (the example's own controller.Children, with a
// controller reference and ssa's ownership labels <group>/name and
// <group>/namespace via ResourceManager.SetOwnerLabels), hand them to
// ResourceManager.ApplyAll (for each child a live GET and a server-side
// dry-run apply, then a real apply only for what drifted; concurrency 4, the
// kustomize-controller default), prune stale children by ownership (the
// cached children carrying this WebApp's ownership labels that the apply's
// ChangeSet does not name, deleted with ResourceManager.DeleteAll with the
// ownership labels as Inclusions; the webapp's children are fixed by name,
// so nothing is ever stale in the benchmark), and compute the status.
//
// Readiness is kstatus (fluxcd/cli-utils status.Compute, what ssa's
// Wait/WaitForSet polls for) applied to the Deployment in the watch cache:
// Ready=True exactly when the Deployment is Current — its status describes
// its current generation, it is Available and every replica is updated and
// ready — which is the baseline's and opkit's rule. ResourceManager.Wait
// itself does not fit an operator: it blocks a reconcile worker, polling
// every 2–5 s until the set is Current; an operator that watches its children
// gets the same verdict from the Deployment's watch event without holding a
// worker. Status is written with one merge patch, only when it changed (as
// Flux's patch helper does); Reconciling=True while not Ready (Flux's
// convention), removed when Ready.
//
// Children carry a controller reference, so the garbage collector removes
// them when their WebApp goes, as for the baseline and opkit, and Owns()
// routes their events to the WebApp. The ResourceManager's client is the
// manager's client: typed reads come from the cache, but ApplyAll reads
// unstructured objects, which controller-runtime reads live by default —
// as Flux's controllers do, whose ResourceManagers use uncached clients.
package flux

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	webapp "github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/examples/webapp/registry"
)

// Name is the flux contender's controller name (the controller_runtime_*
// metrics label) and its server-side apply field manager.
const Name = "webapp-flux"

// OwnerGroup is the prefix of ssa's ownership labels on every child
// (<OwnerGroup>/name, <OwnerGroup>/namespace).
const OwnerGroup = "flux.apps.example.com"

// ownerNameIndex is the cache index of children by the value of their
// <OwnerGroup>/name label, so the prune does not scan every cached child.
const ownerNameIndex = "flux.owner.name"

// requeueNotReady matches the example's look-again interval while the
// Deployment is not Ready yet.
const requeueNotReady = 30 * time.Second

// conditionReconciling is Flux's (and kstatus's) in-progress condition.
const conditionReconciling = "Reconciling"

// WebAppReconciler reconciles WebApps with an ssa.ResourceManager.
type WebAppReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Registry *registry.Registry
	// Concurrency is MaxConcurrentReconciles (default 4, as in the example).
	Concurrency int

	manager *ssa.ResourceManager
}

// childKinds are the kinds a WebApp owns, for the prune.
var childKinds = []func() client.ObjectList{
	func() client.ObjectList { return &corev1.ConfigMapList{} },
	func() client.ObjectList { return &appsv1.DeploymentList{} },
	func() client.ObjectList { return &corev1.ServiceList{} },
}

// Reconcile applies the WebApp's children with ssa and writes its status.
func (r *WebAppReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	app := &webappv1.WebApp{}
	if err := r.Get(ctx, req.NamespacedName, app); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	if !app.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(app, webapp.FinalizerName) {
			return ctrl.Result{}, nil
		}
		if !r.Registry.Release(ctx, key(app)) {
			return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
		}
		before := app.DeepCopy()
		controllerutil.RemoveFinalizer(app, webapp.FinalizerName)
		return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, app, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
	}

	if !controllerutil.ContainsFinalizer(app, webapp.FinalizerName) {
		before := app.DeepCopy()
		controllerutil.AddFinalizer(app, webapp.FinalizerName)
		if err := r.Patch(ctx, app, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, err
		}
	}

	objects, err := r.desired(app)
	if err != nil {
		return ctrl.Result{}, err
	}
	changeSet, err := r.manager.ApplyAll(ctx, objects, ssa.DefaultApplyOptions())
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("%s/%s: apply: %w", app.Namespace, app.Name, err)
	}
	if err := r.prune(ctx, app, changeSet.ToObjMetadataSet()); err != nil {
		return ctrl.Result{}, err
	}

	before := app.DeepCopy()
	ready, err := r.computeStatus(ctx, app)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !apiequality.Semantic.DeepEqual(before.Status, app.Status) {
		if err := r.Status().Patch(ctx, app, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !ready {
		return ctrl.Result{RequeueAfter: requeueNotReady}, nil
	}
	return ctrl.Result{}, nil
}

// desired is the example's children as unstructured objects with a
// controller reference and ssa's ownership labels, as ApplyAll takes them.
func (r *WebAppReconciler) desired(app *webappv1.WebApp) ([]*unstructured.Unstructured, error) {
	children := webapp.Children(app)
	objects := make([]*unstructured.Unstructured, 0, len(children))
	for _, child := range children {
		if err := controllerutil.SetControllerReference(app, child, r.Scheme); err != nil {
			return nil, err
		}
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(child)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: content}
		// A typed object converts with an empty status and a null
		// creationTimestamp; a manifest, what ssa is written for, has neither.
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
		objects = append(objects, u)
	}
	r.manager.SetOwnerLabels(objects, app.Name, app.Namespace)
	return objects, nil
}

// prune deletes the cached children labelled as this WebApp's that the
// apply's change set does not name.
func (r *WebAppReconciler) prune(ctx context.Context, app *webappv1.WebApp, applied object.ObjMetadataSet) error {
	owner := r.manager.GetOwnerLabels(app.Name, app.Namespace)
	var stale []*unstructured.Unstructured
	for _, newList := range childKinds {
		list := newList()
		if err := r.List(ctx, list, client.InNamespace(app.Namespace), client.MatchingFields{ownerNameIndex: app.Name}); err != nil {
			return err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, item := range items {
			obj, ok := item.(client.Object)
			if !ok || !labelsMatch(obj.GetLabels(), owner) {
				continue
			}
			gvk, err := r.GroupVersionKindFor(obj)
			if err != nil {
				return err
			}
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			u.SetNamespace(obj.GetNamespace())
			u.SetName(obj.GetName())
			if !applied.Contains(object.UnstructuredToObjMetadata(u)) {
				stale = append(stale, u)
			}
		}
	}
	if len(stale) == 0 {
		return nil
	}
	opts := ssa.DefaultDeleteOptions()
	opts.Inclusions = owner
	if _, err := r.manager.DeleteAll(ctx, stale, opts); err != nil {
		return fmt.Errorf("%s/%s: prune: %w", app.Namespace, app.Name, err)
	}
	return nil
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// computeStatus fills app.Status from the Deployment in the cache and
// reports whether the WebApp is Ready.
func (r *WebAppReconciler) computeStatus(ctx context.Context, app *webappv1.WebApp) (bool, error) {
	app.Status.ObservedGeneration = app.Generation
	app.Status.URL = fmt.Sprintf("http://%s.%s.svc", app.Name, app.Namespace)
	r.Registry.Register(ctx, key(app), app.Status.URL)

	set := func(typ string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&app.Status.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: app.Generation,
		})
	}
	progressing := func(readyStatus metav1.ConditionStatus, reason, message string) (bool, error) {
		app.Status.Phase = "Progressing"
		set("Ready", readyStatus, reason, message)
		set(conditionReconciling, metav1.ConditionTrue, reason, message)
		return false, nil
	}

	dep := &appsv1.Deployment{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: app.Name}, dep); err != nil {
		// Just applied: the cache has not seen it yet; its watch event brings us back.
		return progressing(metav1.ConditionUnknown, "DeploymentNotFound", err.Error())
	}
	app.Status.Replicas = dep.Status.Replicas
	app.Status.ReadyReplicas = dep.Status.ReadyReplicas

	available := metav1.Condition{Type: webapp.ConditionAvailable, Status: metav1.ConditionUnknown, Reason: "NotYetReported",
		Message: "the Deployment has not reported Available yet", ObservedGeneration: app.Generation}
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			available.Status, available.Reason, available.Message = metav1.ConditionStatus(c.Status), c.Reason, c.Message
		}
	}
	meta.SetStatusCondition(&app.Status.Conditions, available)

	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dep)
	if err != nil {
		return false, err
	}
	res, err := status.Compute(&unstructured.Unstructured{Object: content})
	if err != nil {
		return false, err
	}
	switch res.Status {
	case status.CurrentStatus:
		app.Status.Phase = "Ready"
		set("Ready", metav1.ConditionTrue, "Available", "the Deployment is Available")
		meta.RemoveStatusCondition(&app.Status.Conditions, conditionReconciling)
		return true, nil
	case status.FailedStatus:
		return progressing(metav1.ConditionFalse, "DeploymentFailed", res.Message)
	default:
		return progressing(metav1.ConditionFalse, "Deployment"+string(res.Status), res.Message)
	}
}

func key(app *webappv1.WebApp) string { return app.Namespace + "/" + app.Name }

// SetupWithManager registers the controller: the WebApp and every child kind
// it owns are watched, as the baseline's are, and the ResourceManager is
// built on the manager's client with the field manager Name and the
// ownership label group OwnerGroup.
func (r *WebAppReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Registry == nil {
		return fmt.Errorf("flux webapp controller: a registry is required")
	}
	if r.Concurrency == 0 {
		r.Concurrency = 4
	}
	// No status poller: readiness is computed from the watch cache (see the
	// package documentation), so Wait is never called.
	r.manager = ssa.NewResourceManager(mgr.GetClient(), nil, ssa.Owner{Field: Name, Group: OwnerGroup})
	r.manager.SetConcurrency(4)
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}} {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), obj, ownerNameIndex, func(o client.Object) []string {
			if v, ok := o.GetLabels()[OwnerGroup+"/name"]; ok {
				return []string{v}
			}
			return nil
		}); err != nil {
			return err
		}
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

// Package controller is the webapp example operator's logic, composed from
// opkit's packages through the reconciler builder: a WebApp becomes a
// ConfigMap, a Deployment and a Service; its Ready condition summarises the
// Deployment's Available; a finalizer releases its route from the registry.
package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/opkit/opkit/conditions"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/registry"
	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/reconciler"
	"github.com/opkit/opkit/sharding"
	"github.com/opkit/opkit/storageversion"
)

// Name is the controller's name: field owner, event source, metrics label.
const Name = "webapp"

// FinalizerName guards the route release.
const FinalizerName = "apps.example.com/release-route"

// ConditionAvailable mirrors the Deployment's Available condition.
const ConditionAvailable = "Available"

// Options configure [Setup].
type Options struct {
	// Registry receives each WebApp's route; required.
	Registry *registry.Registry
	// Observability, when set, wires metrics, traces and events.
	Observability *observability.Observability
	// Concurrency is MaxConcurrentReconciles (default 4).
	Concurrency int
	// Shard, when set, makes this replica one member of a sharded operator:
	// it reconciles only the WebApps assigned to it (see the sharding package).
	Shard *sharding.Shard
	// MigrateStorage adds a storageversion.Migrator for [CRDName] to the
	// manager (leader only, once per start): after an upgrade that changed
	// the CRD's storage version (v1beta1 → v1), it rewrites every WebApp at
	// the storage version and trims status.storedVersions, so the old
	// version can be dropped from the CRD. Progress is on the CRD's
	// storageversion.opkit.dev/progress annotation. The migrator reads and
	// writes through its own client (no CRD informer: the role needs only
	// get and patch on this one CRD). The main binary sets it.
	MigrateStorage bool
	// MutateChildren, when set, changes the declared children (ConfigMap,
	// Deployment, Service, in that order) of every reconcile before they are
	// applied. examples/canary builds the operator's next versions with it.
	MutateChildren func(app *webappv1.WebApp, children []client.Object)
}

// CRDName is the name of the WebApp CustomResourceDefinition.
const CRDName = "webapps.apps.example.com"

// +kubebuilder:rbac:groups=apps.example.com,resources=webapps,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=apps.example.com,resources=webapps/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps.example.com,resources=webapps/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions;customresourcedefinitions/status,resourceNames=webapps.apps.example.com,verbs=get;patch

// Setup registers the webapp controller with mgr.
func Setup(mgr manager.Manager, o Options) error {
	if o.Registry == nil {
		return fmt.Errorf("webapp controller: a registry is required")
	}
	if o.Concurrency == 0 {
		o.Concurrency = 4
	}
	b := reconciler.For(mgr, Name, func() *webappv1.WebApp { return &webappv1.WebApp{} }).
		// The status step reads the Deployment through Observed.Reader, which
		// returns this reconcile's write of it: the events of the operator's
		// own child writes need not wake the WebApp again.
		Owns(&corev1.ConfigMap{}, reconciler.WithoutOwnWriteEvents()).
		Owns(&appsv1.Deployment{}, reconciler.WithoutOwnWriteEvents()).
		Owns(&corev1.Service{}, reconciler.WithoutOwnWriteEvents()).
		Finalizer(FinalizerName, finalizer.WithStep("release-route", func(ctx context.Context, app *webappv1.WebApp) (finalizer.StepResult, error) {
			if !o.Registry.Release(ctx, key(app)) {
				return finalizer.RequeueAfter(2 * time.Second), nil
			}
			return finalizer.Done(), nil
		})).
		// A change to the ConfigMap a WebApp names in spec.envFrom reconciles
		// exactly the WebApps that name it (a cache index, no List scan).
		References(&corev1.ConfigMap{}, func(app *webappv1.WebApp) []types.NamespacedName {
			return []types.NamespacedName{{Name: app.Spec.EnvFrom}}
		}).
		Children(func(ctx context.Context, app *webappv1.WebApp) ([]client.Object, error) {
			children, err := withEnvFrom(ctx, mgr.GetClient(), app, Children(app))
			if err == nil && o.MutateChildren != nil {
				o.MutateChildren(app, children)
			}
			return children, err
		}).
		Status(func(ctx context.Context, app *webappv1.WebApp, observed reconciler.Observed) error {
			return status(ctx, o.Registry, app, observed)
		}).
		Observability(o.Observability).
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: o.Concurrency})
	if o.Shard != nil {
		b = b.Shard(o.Shard)
	}
	if err := b.Complete(); err != nil {
		return err
	}
	if !o.MigrateStorage {
		return nil
	}
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("webapp storage migration: %w", err)
	}
	return mgr.Add(storageversion.New(client.WithFieldOwner(c, Name), []string{CRDName}))
}

// AnnotationEnvHash is the pod template annotation holding a hash of the
// spec.envFrom ConfigMap's data: a change to the data changes the template,
// which rolls the pods.
const AnnotationEnvHash = "apps.example.com/env-hash"

// withEnvFrom adds spec.envFrom to the Deployment among children: the
// container's envFrom and the data hash on the pod template. The ConfigMap
// is read from the cache; a missing one is a dependency not ready yet.
func withEnvFrom(ctx context.Context, r client.Reader, app *webappv1.WebApp, children []client.Object) ([]client.Object, error) {
	if app.Spec.EnvFrom == "" {
		return children, nil
	}
	var cm corev1.ConfigMap
	if err := r.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: app.Spec.EnvFrom}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, outcome.DependencyNotReady("EnvFromNotFound", fmt.Sprintf("ConfigMap %s (spec.envFrom) does not exist", app.Spec.EnvFrom), 30*time.Second)
		}
		return nil, err
	}
	for _, c := range children {
		dep, ok := c.(*appsv1.Deployment)
		if !ok {
			continue
		}
		tpl := &dep.Spec.Template
		tpl.Annotations[AnnotationEnvHash] = hash(cm.Data)
		tpl.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}}
	}
	return children, nil
}

func key(app *webappv1.WebApp) string { return app.Namespace + "/" + app.Name }

// Labels are the labels of every child and the Deployment's selector.
func Labels(app *webappv1.WebApp) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "webapp", "app.kubernetes.io/instance": app.Name, "app.kubernetes.io/managed-by": "opkit-webapp"}
}

// Children declares the ConfigMap, Deployment and Service of app. Only fields
// the operator manages are set; the Deployment's replicas stay unset when the
// WebApp leaves them unset, so an autoscaler can own them. The defaulting
// webhook's defaults (port 8080, an untagged image's ":latest") are applied
// to the children too, so a WebApp stored while that webhook was
// unreachable (failurePolicy Ignore) gets the same children.
func Children(app *webappv1.WebApp) []client.Object {
	// Each field gets its own map (Labels returns a new one): selectors are
	// immutable, and whoever adds a label to a child (e.g. a shard label) must
	// not reach them.
	// The defaulting webhook's defaults, applied again here: a WebApp
	// stored while the webhook was unreachable (failurePolicy Ignore) never
	// went through it.
	port := app.Spec.Port
	if port == 0 {
		port = 8080
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: app.Name + "-config", Labels: Labels(app)},
		Data:       app.Spec.Config,
	}
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: app.Name, Labels: Labels(app)},
		Spec: appsv1.DeploymentSpec{
			Replicas: app.Spec.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: Labels(app)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: Labels(app),
					// Config changes roll the pods: the template changes with the data.
					Annotations: map[string]string{"apps.example.com/config-hash": hash(app.Spec.Config)},
				},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:         "web",
						Image:        defaultImage(app.Spec.Image),
						Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/webapp", ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}},
					}}},
				},
			},
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: app.Name, Labels: Labels(app)},
		Spec: corev1.ServiceSpec{
			Selector: Labels(app),
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP}},
		},
	}
	if app.Spec.Headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return []client.Object{cm, dep, svc}
}

func hash(data map[string]string) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s=%d:%s;", len(k), k, len(data[k]), data[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// status mirrors the Deployment into the WebApp and registers its route.
func status(ctx context.Context, reg *registry.Registry, app *webappv1.WebApp, observed reconciler.Observed) error {
	// Read only: the cache's Deployment is shared, not copied (a copy of a
	// Deployment was an eighth of a reconcile's CPU after a restart).
	dep := &appsv1.Deployment{}
	if err := observed.Reader.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: app.Name}, dep, client.UnsafeDisableDeepCopy); err != nil {
		return outcome.Transient("DeploymentUnreadable", err)
	}
	app.Status.Replicas = dep.Status.Replicas
	app.Status.ReadyReplicas = dep.Status.ReadyReplicas
	// The scale subresource's selector: the pods' labels, which the Deployment's selector matches.
	app.Status.Selector = labels.SelectorFromSet(Labels(app)).String()
	app.Status.URL = fmt.Sprintf("http://%s.%s.svc", app.Name, app.Namespace)
	reg.Register(ctx, key(app), app.Status.URL)

	// The Deployment's own status must describe its current spec before its
	// Available condition means anything for ours.
	if dep.Status.ObservedGeneration < dep.Generation {
		app.Status.Phase = "Progressing"
		return outcome.DependencyNotReady("DeploymentProgressing", "the Deployment controller has not observed the latest spec yet", 30*time.Second)
	}
	if err := conditions.Mirror(app, dep, string(appsv1.DeploymentAvailable), ConditionAvailable,
		conditions.WithDefault(metav1.ConditionUnknown, conditions.ReasonNotYetReported, "the Deployment has not reported Available yet")); err != nil {
		return err
	}
	if err := conditions.SetSummary(app, conditions.Ready, conditions.WithPositive(ConditionAvailable), conditions.WithNegative(conditions.Degraded)); err != nil {
		return err
	}
	// Unset replicas belong to whoever scales the Deployment (an autoscaler).
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	if !conditions.IsTrue(app, ConditionAvailable) {
		app.Status.Phase = "Progressing"
		return outcome.DependencyNotReady("DeploymentNotAvailable", "waiting for the Deployment to become Available", 30*time.Second)
	}
	if dep.Status.UpdatedReplicas < want || dep.Status.ReadyReplicas < want || dep.Status.Replicas > want {
		// Available but still rolling out: not Ready until every pod runs the current spec.
		msg := fmt.Sprintf("rollout in progress: %d of %d replicas updated and ready", min(dep.Status.UpdatedReplicas, dep.Status.ReadyReplicas), want)
		if err := conditions.Set(app, metav1.Condition{Type: conditions.Ready, Status: metav1.ConditionFalse, Reason: "RolloutInProgress", Message: msg}); err != nil {
			return err
		}
		app.Status.Phase = "Progressing"
		return outcome.DependencyNotReady("RolloutInProgress", msg, 30*time.Second)
	}
	app.Status.Phase = "Ready"
	return nil
}

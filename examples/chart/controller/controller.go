// Package controller is the chart example's operator: each ChartApp is a
// release of the bundled guestbook chart, through package
// github.com/opkit/opkit/helm composed with opkit's reconciler.
package controller

import (
	"context"
	"fmt"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	examplesv1 "github.com/opkit/opkit/examples/chart/api/v1"
	"github.com/opkit/opkit/helm"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/reconciler"
)

// Name is the controller's name (field owner, metrics, events).
const Name = "chartapp"

// FinalizerName is the finalizer that uninstalls a ChartApp's release.
const FinalizerName = "examples.opkit.dev/uninstall"

// ReasonUnknownChartVersion is the Stalled reason when spec.chartVersion names no bundled chart.
const ReasonUnknownChartVersion = "UnknownChartVersion"

// +kubebuilder:rbac:groups=examples.opkit.dev,resources=chartapps,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=examples.opkit.dev,resources=chartapps/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=examples.opkit.dev,resources=chartapps/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps;services;secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Setup registers the ChartApp controller with mgr: charts are the bundled
// charts by version (bundle.Load). The manager's client must read
// unstructured objects from the cache (client.CacheOptions.Unstructured) for
// a steady state to cost no request when a chart renders kinds outside the
// scheme; the guestbook chart renders none.
func Setup(mgr manager.Manager, obs *observability.Observability, charts map[string]*chart.Chart, opts ...helm.Option) error {
	cs, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return err
	}
	rel, err := helm.New(mgr.GetClient(), cs.CoreV1(),
		func(_ context.Context, app *examplesv1.ChartApp) (*chart.Chart, error) {
			v := app.Spec.ChartVersion
			if v == "" {
				v = "1.0.0"
			}
			ch := charts[v]
			if ch == nil {
				return nil, outcome.Terminal(ReasonUnknownChartVersion, fmt.Errorf("spec.chartVersion %q: no such bundled chart", v))
			}
			return ch, nil
		},
		func(_ context.Context, app *examplesv1.ChartApp) (map[string]any, error) {
			vals, err := app.ChartValues()
			if err != nil {
				return nil, outcome.Terminal(helm.ReasonInvalidValues, fmt.Errorf("spec.values: %w", err))
			}
			return vals, nil
		}, opts...)
	if err != nil {
		return err
	}
	b := reconciler.For(mgr, Name, func() *examplesv1.ChartApp { return &examplesv1.ChartApp{} }).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&batchv1.Job{}, reconciler.WithoutPrune()).
		Observability(obs)
	return rel.Register(b, FinalizerName).Complete()
}

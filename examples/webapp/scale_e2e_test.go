package main

import (
	"fmt"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/examples/internal/e2etest"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/controller"
)

// kubectl scale drives spec.replicas through the scale subresource, and the
// subresource reports the replicas that exist and the selector of the pods.
func TestKubectlScaleDrivesReplicasThroughTheScaleSubresource(t *testing.T) {
	ns := env.Namespace(t)
	ctx := e2etest.Context(t, 3*time.Minute)
	startOperator(t, ns, nil)
	app := newApp(ns, "scaled", 1)
	if err := env.Client.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitReady(t, app)

	if out, err := env.Kubectl(ctx, "scale", "--replicas=3", "webapp/scaled", "-n", ns); err != nil {
		t.Fatal(err)
	} else {
		t.Log(out)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
		t.Fatal(err)
	}
	if app.Spec.Replicas == nil || *app.Spec.Replicas != 3 {
		t.Fatalf("after kubectl scale --replicas=3, spec.replicas = %v", app.Spec.Replicas)
	}
	waitReady(t, app)

	scale := e2etest.WaitScale(ctx, t, env.Client, app, 3, controller.Labels(app))

	// Scaling through the subresource with a client works the same way.
	scale.Spec.Replicas = 2
	if err := env.Client.SubResource("scale").Update(ctx, app, client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}
	e2etest.WaitFor(t, 90*time.Second, "status.replicas follows a scale-down to 2", func() (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
			return false, err
		}
		return app.Spec.Replicas != nil && *app.Spec.Replicas == 2 && app.Status.Replicas == 2, nil
	})
}

// A HorizontalPodAutoscaler may target a WebApp: the API server accepts one
// (dry-run; there is no metrics server here to drive it).
func TestHorizontalPodAutoscalerAcceptsAWebAppTarget(t *testing.T) {
	ns := env.Namespace(t)
	ctx := e2etest.Context(t, time.Minute)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: webappv1.GroupVersion.String(), Kind: "WebApp", Name: "web"},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    5,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)},
				},
			}},
		},
	}
	if err := env.Client.Create(ctx, hpa, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	// And kubectl can read the scale of the WebApp such an HPA would drive.
	app := newApp(ns, "web", 2)
	if err := env.Client.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	out, err := env.Kubectl(ctx, "get", "--raw", fmt.Sprintf("/apis/%s/namespaces/%s/webapps/web/scale", webappv1.GroupVersion, ns))
	if err != nil {
		t.Fatal(err)
	}
	scale := &autoscalingv1.Scale{}
	if err := env.Client.SubResource("scale").Get(ctx, app, scale); err != nil {
		t.Fatalf("%v (kubectl saw %s)", err, out)
	}
	if scale.Spec.Replicas != 2 {
		t.Fatalf("scale spec.replicas = %d, want the WebApp's 2", scale.Spec.Replicas)
	}
}

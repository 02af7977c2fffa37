package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/examples/internal/e2etest"
	"github.com/opkit/opkit/examples/internal/examplecmd"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/config"
	"github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/examples/webapp/registry"
	"github.com/opkit/opkit/testenv"
	"github.com/opkit/opkit/webhook"
	"github.com/opkit/opkit/webhook/webhooktest"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	scheme := e2etest.Must(newScheme())
	crds := e2etest.Must(config.CRDs())
	mutating, validating, err := config.Webhooks()
	if err != nil {
		panic(err)
	}
	os.Exit(testenv.RunMain(&webhookMain{m}, &env, testenv.WithWorkloads(), testenv.WithCRDs(crds...), testenv.WithScheme(scheme),
		testenv.WithWebhooks(envtest.WebhookInstallOptions{MutatingWebhooks: mutating, ValidatingWebhooks: validating})))
}

// webhookMain serves the webhooks for the whole package from a manager of
// their own, so every test (with or without an operator) meets them.
type webhookMain struct{ m *testing.M }

func (w *webhookMain) Run() int {
	mgr, err := ctrl.NewManager(env.Config, manager.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          crwebhook.NewServer(webhooktest.ServerOptions(env.Envtest.WebhookInstallOptions)),
	})
	if err != nil {
		panic(err)
	}
	if err := controller.SetupWebhooks(mgr); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if err := examplecmd.WaitWebhooks(ctx, mgr); err != nil {
		panic(err)
	}
	code := w.m.Run()
	cancel()
	if err := <-done; err != nil && code == 0 {
		code = 1
	}
	return code
}

type operator struct {
	registry *registry.Registry
	requests *testenv.RequestCounter
}

// startOperator runs the webapp operator with cfg (the admin by default) until
// the test ends, with the cache the example's binary uses
// (controller.CacheOptions: cached Deployments trimmed to what the operator
// declares) watching only namespace ns: other tests' leftovers (being
// deleted by the namespace controller) stay out of its counts.
func startOperator(t *testing.T, ns string, cfg *rest.Config) *operator {
	t.Helper()
	if cfg == nil {
		cfg = env.Config
	}
	mgr := e2etest.NewManager(t, cfg, env.Scheme, ns, func(o *manager.Options) {
		c := controller.CacheOptions()
		c.DefaultNamespaces = o.Cache.DefaultNamespaces
		o.Cache = c
	})
	op := &operator{registry: registry.New(), requests: mgr.Requests}
	if err := controller.Setup(mgr, controller.Options{Registry: op.registry, Observability: mgr.Observability}); err != nil {
		t.Fatal(err)
	}
	mgr.Run(t)
	return op
}

func newApp(ns, name string, replicas int32) *webappv1.WebApp {
	return &webappv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       webappv1.WebAppSpec{Image: "nginx:1.27", Replicas: ptr.To(replicas), Config: map[string]string{"greeting": "hello"}},
	}
}

func waitReady(t *testing.T, app *webappv1.WebApp) {
	t.Helper()
	ctx := e2etest.Context(t, 2*time.Minute)
	e2etest.WaitFor(t, 90*time.Second, "WebApp "+app.Name+" Ready for its generation", func() (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
			return false, err
		}
		return conditions.IsTrue(app, conditions.Ready) && app.Status.ObservedGeneration == app.Generation &&
			!conditions.IsTrue(app, conditions.Reconciling), nil
	})
}

func TestCreateBecomesReadyWithAvailableDeployment(t *testing.T) {
	ns := env.Namespace(t)
	op := startOperator(t, ns, nil)
	ctx := e2etest.Context(t, 2*time.Minute)
	app := newApp(ns, "shop", 2)
	if err := env.Client.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitReady(t, app)

	var dep appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop"}, &dep); err != nil {
		t.Fatal(err)
	}
	if dep.Status.ReadyReplicas != 2 || app.Status.ReadyReplicas != 2 {
		t.Fatalf("ready replicas: deployment %d, webapp %d; want 2", dep.Status.ReadyReplicas, app.Status.ReadyReplicas)
	}
	if !conditions.IsTrue(app, controller.ConditionAvailable) {
		t.Fatalf("Available not mirrored: %+v", app.Status.Conditions)
	}
	if !metav1.IsControlledBy(&dep, app) {
		t.Fatal("Deployment is not controlled by the WebApp")
	}
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Service{}} {
		name := "shop"
		if _, ok := obj.(*corev1.ConfigMap); ok {
			name = "shop-config"
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			t.Fatalf("child %T: %v", obj, err)
		}
	}
	if url, ok := op.registry.Lookup(ns + "/shop"); !ok || !strings.Contains(url, "shop."+ns) {
		t.Fatalf("route not registered: %q %v", url, ok)
	}
	if app.Status.Phase != "Ready" || app.Finalizers[0] != controller.FinalizerName {
		t.Fatalf("phase %q finalizers %v", app.Status.Phase, app.Finalizers)
	}
}

func TestSpecChangeRollsOutAndUpdatesObservedGeneration(t *testing.T) {
	ns := env.Namespace(t)
	startOperator(t, ns, nil)
	ctx := e2etest.Context(t, 2*time.Minute)
	app := newApp(ns, "blog", 1)
	if err := env.Client.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitReady(t, app)
	gen := app.Generation
	app.Spec.Image = "nginx:1.28"
	app.Spec.Replicas = ptr.To[int32](3)
	if err := env.Client.Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitReady(t, app)
	if app.Status.ObservedGeneration <= gen {
		t.Fatalf("observedGeneration %d, want > %d", app.Status.ObservedGeneration, gen)
	}
	var dep appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "blog"}, &dep); err != nil {
		t.Fatal(err)
	}
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.28" || dep.Status.UpdatedReplicas != 3 || dep.Status.ReadyReplicas != 3 {
		t.Fatalf("deployment image %s updated %d ready %d", img, dep.Status.UpdatedReplicas, dep.Status.ReadyReplicas)
	}
}

func TestKubectlWaitForReady(t *testing.T) {
	ns := env.Namespace(t)
	startOperator(t, ns, nil)
	ctx := e2etest.Context(t, 2*time.Minute)
	if err := env.Client.Create(ctx, newApp(ns, "waited", 1)); err != nil {
		t.Fatal(err)
	}
	out, err := env.Kubectl(ctx, "wait", "--for=condition=Ready", "webapps/waited", "-n", ns, "--timeout=90s")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "condition met") {
		t.Fatalf("kubectl wait: %s", out)
	}
}

func TestDeleteRunsFinalizerAndCollectsChildren(t *testing.T) {
	ns := env.Namespace(t)
	op := startOperator(t, ns, nil)
	ctx := e2etest.Context(t, 2*time.Minute)
	app := newApp(ns, "gone", 1)
	if err := env.Client.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitReady(t, app)
	if _, ok := op.registry.Lookup(ns + "/gone"); !ok {
		t.Fatal("route not registered before delete")
	}
	const webapps = "webapps.apps.example.com"
	updates, patches := op.requests.Count("update", webapps), op.requests.Count("patch", webapps)
	if err := env.Client.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	e2etest.WaitFor(t, 60*time.Second, "WebApp gone", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(app), &webappv1.WebApp{})
		return apierrors.IsNotFound(err), err
	})
	// The finalizer was the WebApp's only one: one update removed it and
	// deleted the WebApp (finalizer guarantees 1 and 5), no patch.
	if u, p := op.requests.Count("update", webapps)-updates, op.requests.Count("patch", webapps)-patches; u != 1 || p != 0 {
		t.Fatalf("deleting wrote %d updates and %d patches of the WebApp, want 1 and 0:\n%s", u, p, op.requests)
	}
	if _, ok := op.registry.Lookup(ns + "/gone"); ok {
		t.Fatal("the finalizer let the WebApp go without releasing its route")
	}
	e2etest.WaitFor(t, 60*time.Second, "children garbage-collected", func() (bool, error) {
		for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}} {
			name := "gone"
			if _, ok := obj.(*corev1.ConfigMap); ok {
				name = "gone-config"
			}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
}

// With the example's trimmed Deployment cache, drift of a declared field is
// corrected while what another actor added to the Deployment (a sidecar, an
// env var in the operator's container) and the server's defaults stay.
func TestDriftIsCorrectedAndOthersAdditionsStay(t *testing.T) {
	ns := env.Namespace(t)
	startOperator(t, ns, nil)
	ctx := e2etest.Context(t, 2*time.Minute)
	app := newApp(ns, "mixed", 1)
	if err := env.Client.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitReady(t, app)
	var dep appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mixed"}, &dep); err != nil {
		t.Fatal(err)
	}
	dnsPolicy := dep.Spec.Template.Spec.DNSPolicy
	c := &dep.Spec.Template.Spec.Containers[0]
	c.Image = "nginx:drifted"
	c.Env = append(c.Env, corev1.EnvVar{Name: "INJECTED", Value: "1"})
	dep.Spec.Template.Spec.Containers = append(dep.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "proxy:1"})
	if err := env.Client.Update(ctx, &dep); err != nil {
		t.Fatal(err)
	}
	e2etest.WaitFor(t, 60*time.Second, "the drifted image corrected", func() (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&dep), &dep); err != nil {
			return false, err
		}
		return dep.Spec.Template.Spec.Containers[0].Image == app.Spec.Image, nil
	})
	cs := dep.Spec.Template.Spec.Containers
	injected := false
	for _, e := range cs[0].Env {
		injected = injected || e.Name == "INJECTED" && e.Value == "1"
	}
	if len(cs) != 2 || cs[1].Name != "sidecar" || !injected || dep.Spec.Template.Spec.DNSPolicy != dnsPolicy {
		t.Fatalf("after the correction: containers %+v, dnsPolicy %q (was %q); want the sidecar, the injected env var and the default kept", cs, dep.Spec.Template.Spec.DNSPolicy, dnsPolicy)
	}
}

func TestSteadyStateMakesNoWrites(t *testing.T) {
	ns := env.Namespace(t)
	op := startOperator(t, ns, nil)
	ctx := e2etest.Context(t, 2*time.Minute)
	apps := []*webappv1.WebApp{newApp(ns, "a", 1), newApp(ns, "b", 2), newApp(ns, "c", 1)}
	for _, app := range apps {
		if err := env.Client.Create(ctx, app); err != nil {
			t.Fatal(err)
		}
	}
	for _, app := range apps {
		waitReady(t, app)
	}
	// Let the last status writes and Deployment status updates settle, then watch a quiet window.
	time.Sleep(3 * time.Second)
	op.requests.Reset()
	time.Sleep(5 * time.Second)
	if w := op.requests.Writes(); w != 0 {
		t.Fatalf("steady state wrote %d times:\n%s", w, op.requests)
	}
	if g := op.requests.Verb("get"); g != 0 {
		t.Fatalf("steady state made %d live GETs:\n%s", g, op.requests)
	}
}

func TestInvalidWebAppsAreRejectedBySchema(t *testing.T) {
	ns := env.Namespace(t)
	ctx := e2etest.Context(t, time.Minute)
	cases := map[string]struct {
		mutate func(*webappv1.WebApp)
		field  string
	}{
		"negative replicas": {func(a *webappv1.WebApp) { a.Spec.Replicas = ptr.To[int32](-1) }, "spec.replicas"},
		"bad image":         {func(a *webappv1.WebApp) { a.Spec.Image = "Not An Image!" }, "spec.image"},
		"port out of range": {func(a *webappv1.WebApp) { a.Spec.Port = 70000 }, "spec.port"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			app := newApp(ns, "invalid", 1)
			tc.mutate(app)
			err := env.Client.Create(ctx, app)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("want Invalid naming %s, got %v", tc.field, err)
			}
			// The error quotes what the user wrote: defaulting must not
			// rewrite an invalid value before validation reports it.
			if name == "bad image" && (!strings.Contains(err.Error(), `"Not An Image!"`) || strings.Contains(err.Error(), ":latest")) {
				t.Fatalf("the error does not quote the input as given: %v", err)
			}
		})
	}
}

func TestChildConflictIsExplainedAndRecovers(t *testing.T) {
	ns := env.Namespace(t)
	startOperator(t, ns, nil)
	ctx := e2etest.Context(t, 2*time.Minute)
	// Somebody else's Service already has the name the WebApp's Service needs.
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if err := env.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	app := newApp(ns, "taken", 1)
	if err := env.Client.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	// The conflict is fixed outside the WebApp (no generation bump), so it
	// is not terminal: Reconciling=True with reason NotOwned and a message
	// for the person running kubectl, re-checked every NotOwnedRecheck.
	e2etest.WaitFor(t, 60*time.Second, "WebApp blocked with reason NotOwned", func() (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
			return false, err
		}
		c := conditions.Get(app, conditions.Reconciling)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == ensure.ReasonNotOwned, nil
	})
	blocked := conditions.Get(app, conditions.Reconciling)
	for _, want := range []string{"Service " + ns + "/taken", "WebApp", "Delete or rename"} {
		if !strings.Contains(blocked.Message, want) {
			t.Errorf("the condition does not say %q: %q", want, blocked.Message)
		}
	}
	for _, noise := range []string{"terminal error", "WithAdoption", "ensure:", "not owned by this owner"} {
		if strings.Contains(blocked.Message, noise) {
			t.Errorf("the condition speaks Go (%q): %q", noise, blocked.Message)
		}
	}
	if conditions.IsTrue(app, conditions.Ready) {
		t.Fatal("a blocked WebApp is Ready")
	}
	var svc corev1.Service
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), &svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.OwnerReferences) != 0 {
		t.Fatal("the operator took over a Service it does not own")
	}
	// The person deletes the foreign Service: the WebApp recovers without
	// any change to its spec.
	if err := env.Client.Delete(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	e2etest.WaitFor(t, ensure.NotOwnedRecheck+60*time.Second, "WebApp recovers once the foreign Service is gone", func() (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
			return false, err
		}
		return conditions.Get(app, conditions.Reconciling) == nil || conditions.Get(app, conditions.Reconciling).Reason != ensure.ReasonNotOwned, nil
	})
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), &svc); err != nil {
		t.Fatalf("the WebApp's own Service was not created: %v", err)
	}
	if len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0].UID != app.UID {
		t.Fatalf("the new Service is not the WebApp's: %+v", svc.OwnerReferences)
	}
}

func TestGeneratedRBACIsSufficient(t *testing.T) {
	ns := env.Namespace(t)
	ctx := e2etest.Context(t, 2*time.Minute)
	objs, err := config.RBAC()
	if err != nil {
		t.Fatal(err)
	}
	limited, limitedClient := e2etest.UserBoundTo(t, env, objs, "manager-role")
	if err := limitedClient.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Fatalf("the operator's role can list Secrets: %v", err)
	}

	op := startOperator(t, ns, limited)
	app := newApp(ns, "least", 1)
	if err := env.Client.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitReady(t, app)
	if err := env.Client.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	e2etest.WaitFor(t, 60*time.Second, "WebApp deleted by the least-privileged operator", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(app), &webappv1.WebApp{})
		return apierrors.IsNotFound(err), err
	})
	if op.registry.Len() != 0 {
		t.Fatal("route not released")
	}
}

// TestDemoRunsBounded runs the README's `make demo` path in its bounded mode
// (what CI runs) so the demo cannot rot: an embedded control plane of its own,
// the samples applied, and every sample Ready.
func TestDemoRunsBounded(t *testing.T) {
	ctx := e2etest.Context(t, 4*time.Minute)
	err := run(ctx, options{Flags: examplecmd.Flags{Embedded: true, ExitWhenReady: true, Timeout: 3 * time.Minute, MetricsAddr: "0", ProbeAddr: "0"}})
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

func TestWebhooksValidateAndDefault(t *testing.T) {
	ns := env.Namespace(t)
	ctx := e2etest.Context(t, time.Minute)

	bad := newApp(ns, "badkey", 1)
	bad.Spec.Config = map[string]string{"not/a file": "x"}
	err := env.Client.Create(ctx, bad)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.config[not/a file]") {
		t.Fatalf("want Invalid naming spec.config[not/a file], got %v", err)
	}

	app := newApp(ns, "defaulted", 1)
	app.Spec.Image = "nginx"
	if err := env.Client.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	if app.Spec.Image != "nginx:latest" {
		t.Fatalf("defaulting webhook did not write the tag: %q", app.Spec.Image)
	}
	app.Spec.Headless = true
	err = env.Client.Update(ctx, app)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.headless") {
		t.Fatalf("want Invalid naming spec.headless, got %v", err)
	}
}

func TestDefaultingIsIdempotent(t *testing.T) {
	webhooktest.DefaultingIsIdempotent[*webappv1.WebApp](t, webhook.DefaultFunc[*webappv1.WebApp](controller.Default),
		newApp("ns", "a", 1),
		&webappv1.WebApp{Spec: webappv1.WebAppSpec{Image: "registry.example.com:5000/team/app"}},
		&webappv1.WebApp{Spec: webappv1.WebAppSpec{Image: "nginx@sha256:" + strings.Repeat("a", 64)}})
}

// TestImagePatternIsTheCRDs: the defaulting webhook decides "valid image"
// with the same pattern the generated CRD validates.
func TestImagePatternIsTheCRDs(t *testing.T) {
	data, err := os.ReadFile("config/crd/apps.example.com_webapps.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "pattern: "+controller.ImagePattern) {
		t.Fatalf("the CRD's spec.image pattern is not controller.ImagePattern %q", controller.ImagePattern)
	}
}

package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/opkit/opkit/conditions"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/config"
	"github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/examples/webapp/registry"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/testenv/chaos"
	"github.com/opkit/opkit/webhook/certs"
)

// webhookOperator is the webapp operator with its own webhook server (the
// defaulting and validating webhooks) in the same manager, as one pod runs
// it, and the API server reaching that server through a chaos.Proxy.
type webhookOperator struct {
	proxy *chaos.Proxy
	mon   *chaos.ReconcileMonitor
	reg   *registry.Registry
}

// startWebhookOperator starts the operator for ns and installs the webapp's
// webhook configurations (config/webhook), renamed for ns, limited to ns by
// a namespaceSelector, with failurePolicy policy, pointing at the proxy.
func startWebhookOperator(t *testing.T, ns string, policy admissionregistrationv1.FailurePolicyType) *webhookOperator {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	ca, err := certs.NewCA("webhook-outage", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(certs.LocalHosts(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "certs")
	if err := certs.WriteFiles(dir, kp, ca.CertPEM); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	wo := &webhookOperator{mon: chaos.NewReconcileMonitor(), reg: registry.New()}
	mgr, err := ctrl.NewManager(env.Config, manager.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		Logger:                 wo.mon.Logger(logr.Discard()),
		WebhookServer:          crwebhook.NewServer(crwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir}),
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	obs, err := observability.Setup(mgr, observability.WithRegisterer(reg), observability.WithGatherer(reg), observability.WithoutHealthChecks())
	if err != nil {
		t.Fatal(err)
	}
	if err := controller.Setup(mgr, controller.Options{Registry: wo.reg, Observability: obs}); err != nil {
		t.Fatal(err)
	}
	if err := controller.SetupWebhooks(mgr); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	if wo.proxy, err = chaos.NewProxy(fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wo.proxy.Close() })

	mutating, validating, err := config.Webhooks()
	if err != nil {
		t.Fatal(err)
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	point := func(cc *admissionregistrationv1.WebhookClientConfig) {
		path := ptr.Deref(cc.Service.Path, "/")
		*cc = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + wo.proxy.Addr() + path), CABundle: ca.CertPEM}
	}
	var objs []client.Object
	for _, m := range mutating {
		m = m.DeepCopy()
		m.Name += "-" + ns
		for i := range m.Webhooks {
			w := &m.Webhooks[i]
			point(&w.ClientConfig)
			w.FailurePolicy, w.NamespaceSelector, w.TimeoutSeconds = ptr.To(policy), selector, ptr.To[int32](2)
		}
		objs = append(objs, m)
	}
	for _, v := range validating {
		v = v.DeepCopy()
		v.Name += "-" + ns
		for i := range v.Webhooks {
			w := &v.Webhooks[i]
			point(&w.ClientConfig)
			w.FailurePolicy, w.NamespaceSelector, w.TimeoutSeconds = ptr.To(policy), selector, ptr.To[int32](2)
		}
		objs = append(objs, v)
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	wo.waitServing(t, ns)
	return wo
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// invalidApp is a WebApp the validating webhook refuses: a config key that
// cannot be a file name in the ConfigMap.
func invalidApp(ns, name string) *webappv1.WebApp {
	app := newApp(ns, name, "0")
	app.Spec.Config["bad/key"] = "x"
	return app
}

// untaggedApp is a valid WebApp whose image the defaulting webhook tags ":latest".
func untaggedApp(ns, name string) *webappv1.WebApp {
	app := newApp(ns, name, "0")
	app.Spec.Image = "nginx"
	return app
}

// waitServing waits until the API server calls the webhooks again: a dry-run
// create of an invalid WebApp is denied by the validating webhook.
func (wo *webhookOperator) waitServing(t *testing.T, ns string) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	waitFor(t, 30*time.Second, "the webhooks to answer", func() (bool, error) {
		err := env.Client.Create(ctx, invalidApp(ns, "probe"), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "denied the request"), err
	})
}

// TestWebhookOutage takes the operator's webhook server off the network
// (the proxy in front of it cut) while users create WebApps — valid ones the
// defaulting webhook would tag, and invalid ones the validating webhook
// would refuse — once with failurePolicy Fail and once with Ignore, then
// brings it back.
//
// Fail: every create during the outage is refused with an error naming the
// webhook, and nothing is stored; after recovery the valid creates succeed,
// defaulted, and the invalid ones are refused by validation.
//
// Ignore: every create is stored as written. The operator copes: the
// untagged image runs as ":latest" (the reconciler applies the webhook's
// default) and converges; an invalid WebApp is Stalled with a message naming
// the bad key, is not lost and not retried in a loop. After recovery the
// user fixes it (through the webhooks again) and it converges.
func TestWebhookOutage(t *testing.T) {
	var rows []row
	for _, policy := range []admissionregistrationv1.FailurePolicyType{admissionregistrationv1.Fail, admissionregistrationv1.Ignore} {
		t.Run(string(policy), func(t *testing.T) { rows = append(rows, webhookOutage(t, policy)) })
	}
	logTable(t, rows)
}

func webhookOutage(t *testing.T, policy admissionregistrationv1.FailurePolicyType) row {
	const valid, invalid = 4, 2
	p := currentProfile()
	ns := env.Namespace(t)
	ctx := ctxFor(t, 3*time.Minute)
	panics0 := panics(t)
	wo := startWebhookOperator(t, ns, policy)

	// Up: the webhooks default and validate.
	before := untaggedApp(ns, "before")
	if err := env.Client.Create(ctx, before); err != nil {
		t.Fatal(err)
	}
	if before.Spec.Image != "nginx:latest" {
		t.Fatalf("with the webhooks up, spec.image %q was not defaulted", before.Spec.Image)
	}
	if err := env.Client.Create(ctx, invalidApp(ns, "refused")); err == nil || !strings.Contains(err.Error(), "bad/key") {
		t.Fatalf("with the webhooks up, an invalid WebApp was not refused naming the key: %v", err)
	}

	// Down.
	wo.proxy.Cut()
	t0 := time.Now()
	var ops, refused int
	stored := map[string]bool{} // created during the outage and acknowledged
	var names []string
	for i := range valid + invalid {
		var app *webappv1.WebApp
		if i < valid {
			app = untaggedApp(ns, fmt.Sprintf("during-%d", i))
		} else {
			app = invalidApp(ns, fmt.Sprintf("bad-%d", i-valid))
		}
		names = append(names, app.Name)
		ops++
		err := env.Client.Create(ctx, app)
		switch {
		case policy == admissionregistrationv1.Fail:
			if err == nil {
				t.Fatalf("failurePolicy Fail, webhook down: create of %s succeeded", app.Name)
			}
			if !strings.Contains(err.Error(), `failed calling webhook "mwebapp.apps.example.com"`) {
				t.Errorf("create of %s refused without naming the unreachable webhook: %v", app.Name, err)
			}
			refused++
		case err != nil:
			t.Fatalf("failurePolicy Ignore, webhook down: create of %s: %v", app.Name, err)
		default:
			stored[app.Name] = true
			if app.Spec.Image != "nginx:1.27" && app.Spec.Image != "nginx" {
				t.Errorf("%s stored with image %q", app.Name, app.Spec.Image)
			}
		}
	}
	var list webappv1.WebAppList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	onServer := map[string]webappv1.WebApp{}
	for _, a := range list.Items {
		onServer[a.Name] = a
	}
	for _, n := range names {
		if _, ok := onServer[n]; ok != stored[n] {
			t.Errorf("%s on the server: %v, acknowledged: %v", n, ok, stored[n])
		}
	}
	if policy == admissionregistrationv1.Ignore {
		// Stored without defaults or validation: the operator must cope.
		if img := onServer["during-0"].Spec.Image; img != "nginx" {
			t.Errorf("during-0 stored with image %q: was it defaulted after all?", img)
		}
		for i := range invalid {
			name := fmt.Sprintf("bad-%d", i)
			waitFor(t, 60*time.Second, name+" Stalled with a message naming the key", func() (bool, error) {
				var app webappv1.WebApp
				if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &app); err != nil {
					return false, err
				}
				c := conditions.Get(&app, conditions.Stalled)
				return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "bad/key") && !conditions.IsTrue(&app, conditions.Ready),
					fmt.Errorf("conditions %+v", app.Status.Conditions)
			})
		}
		for i := range valid {
			waitAppReady(t, ns, fmt.Sprintf("during-%d", i), 90*time.Second)
			var dep appsv1.Deployment
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("during-%d", i)}, &dep); err != nil {
				t.Fatal(err)
			}
			if img := dep.Spec.Template.Spec.Containers[0].Image; img != "nginx:latest" {
				t.Errorf("during-%d's Deployment runs %q, want the webhook's default nginx:latest", i, img)
			}
		}
		// Stalled is final until the spec changes: no retry loop.
		mk := wo.mon.Mark()
		time.Sleep(3 * time.Second)
		for k, n := range wo.mon.Since(mk) {
			if strings.HasPrefix(k.Name, "bad-") && n > 1 {
				t.Errorf("%s reconciled %d times in 3s while Stalled: a retry loop", k, n)
			}
		}
	}
	outage := time.Since(t0)

	// Back up.
	wo.proxy.Restore()
	recoveryStart := time.Now()
	wo.waitServing(t, ns)
	if policy == admissionregistrationv1.Fail {
		// The user retries: valid creates succeed, defaulted; invalid ones
		// are refused by validation, naming the key.
		for _, n := range names {
			ops++
			if strings.HasPrefix(n, "bad-") {
				err := env.Client.Create(ctx, invalidApp(ns, n))
				if err == nil || !strings.Contains(err.Error(), "bad/key") {
					t.Errorf("retried create of %s: want a refusal naming bad/key, got %v", n, err)
				}
				continue
			}
			app := untaggedApp(ns, n)
			if err := env.Client.Create(ctx, app); err != nil {
				t.Fatalf("retried create of %s: %v", n, err)
			}
			stored[n] = true
			if app.Spec.Image != "nginx:latest" {
				t.Errorf("%s created after recovery with image %q, not defaulted", n, app.Spec.Image)
			}
		}
	} else {
		// The user fixes the invalid WebApps, through the webhooks again.
		for i := range invalid {
			ops++
			name := fmt.Sprintf("bad-%d", i)
			patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"config":{"bad/key":null,"good":"x"}}}`))
			app := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			if err := env.Client.Patch(ctx, app, patch); err != nil {
				t.Fatalf("fix %s: %v", name, err)
			}
			if app.Spec.Image != "nginx:1.27" {
				t.Errorf("%s: image %q after the fix", name, app.Spec.Image)
			}
		}
	}
	lost := 0
	expected := []string{"before"}
	for _, n := range names {
		if stored[n] {
			expected = append(expected, n)
		}
	}
	for _, n := range expected {
		waitAppReady(t, ns, n, 90*time.Second)
	}
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, a := range list.Items {
		have[a.Name] = true
		if a.Spec.Config["bad/key"] != "" {
			t.Errorf("%s holds an invalid config key after recovery", a.Name)
		}
	}
	for _, n := range expected {
		if !have[n] {
			lost++
			t.Errorf("%s acknowledged but missing", n)
		}
	}
	recovery := time.Since(recoveryStart)
	mk := wo.mon.Mark()
	time.Sleep(p.quietWindow)
	if err := errors.Join(wo.mon.Check(), wo.mon.CheckNoHotLoop(mk, p.maxQuiet)); err != nil {
		t.Error(err)
	}
	if d := panics(t) - panics0; d != 0 {
		t.Errorf("controller-runtime recovered %v reconcile panics", d)
	}
	injected := fmt.Sprintf("webhook cut %.1fs, %d refused", outage.Seconds(), refused)
	if policy == admissionregistrationv1.Ignore {
		injected = fmt.Sprintf("webhook cut %.1fs, %d unvalidated", outage.Seconds(), len(stored))
	}
	return row{
		test: "webhook", fault: "webhook server down, failurePolicy " + string(policy),
		objects: len(expected), ready: len(expected), ops: int64(ops), opsPerSec: float64(ops) / (outage + recovery).Seconds(),
		injected: injected, lost: lost, recovery: recovery, maxReconciles: maxOf(wo.mon.Since(chaos.Mark{})),
	}
}

// waitAppReady waits until ns/name is Ready for its current generation.
func waitAppReady(t *testing.T, ns, name string, timeout time.Duration) {
	t.Helper()
	ctx := ctxFor(t, timeout+10*time.Second)
	waitFor(t, timeout, name+" Ready", func() (bool, error) {
		var app webappv1.WebApp
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &app); err != nil {
			return false, err
		}
		return conditions.IsTrue(&app, conditions.Ready) && app.Status.ObservedGeneration == app.Generation,
			fmt.Errorf("conditions %+v", app.Status.Conditions)
	})
}

package chaos_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/testenv/chaos"
)

// untaggedApp is a valid WebApp whose image the defaulting webhook tags ":latest".
func untaggedApp(ns, name string) *webappv1.WebApp {
	app := newApp(ns, name, "0")
	app.Spec.Image = "nginx"
	return app
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
	wo := startWebhookOperator(t, ns, policy, true)

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

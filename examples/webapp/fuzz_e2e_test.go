package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/opkit/opkit/examples/internal/e2etest"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/testenv/chaos"
)

// fuzzedSpec returns a WebApp spec built from hostile and boundary values:
// every field is either valid, at a boundary, or wrong in a way a user (or a
// script) could get it wrong.
func fuzzedSpec(r *rand.Rand) webappv1.WebAppSpec {
	images := []string{"nginx:1.27", "nginx", "", "UPPER:case", "a@sha256:" + strings.Repeat("f", 64), "x/" + strings.Repeat("y", 600),
		"registry.example.com:5000/team/app:v1", "bad image", "nginx:latest", "-leading-dash", "\u00e9t\u00e9:1"}
	keys := []string{"index.html", "a/b", "..", "", "k", strings.Repeat("k", 300), "with space", "ok.conf", "\x00"}
	spec := webappv1.WebAppSpec{Image: images[r.IntN(len(images))], Headless: r.IntN(2) == 0}
	if r.IntN(2) == 0 {
		spec.Image = "nginx:1.27" // half the specs get past the image rules and meet the others
	}
	switch r.IntN(4) {
	case 0: // unset: an autoscaler owns replicas
	case 1:
		spec.Replicas = ptr.To(int32(r.IntN(101)))
	default:
		spec.Replicas = ptr.To(int32(r.IntN(400) - 200))
	}
	spec.Port = int32(r.IntN(70000))
	if r.IntN(3) == 0 {
		spec.Port = int32(r.IntN(140000) - 70000)
	}
	if r.IntN(3) > 0 {
		spec.Config = map[string]string{}
		for range r.IntN(5) {
			spec.Config[keys[r.IntN(len(keys))]] = strings.Repeat("v", r.IntN(64))
		}
	}
	return spec
}

// TestFuzzedSpecsAreAcceptedOrDeniedCleanly sends fuzzed WebApps through the
// schema and the webhooks (creates and updates) while the operator runs: every
// answer is a success or a clean 4xx denial naming a spec field, never a 5xx,
// and the operator never panics (a recovered panic counts).
func TestFuzzedSpecsAreAcceptedOrDeniedCleanly(t *testing.T) {
	ns := env.Namespace(t)
	startOperator(t, ns, nil)
	ctx := e2etest.Context(t, 3*time.Minute)
	panicsBefore, err := chaos.ControllerPanics(crmetrics.Registry, controller.Name)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(20261129, 1))
	accepted, denied := 0, 0
	check := func(what string, err error) {
		t.Helper()
		switch {
		case err == nil:
			accepted++
		case apierrors.IsConflict(err):
			denied++ // the operator wrote in between (its finalizer): a clean 409, retried below
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err):
			denied++
			if !strings.Contains(err.Error(), "spec") && !strings.Contains(err.Error(), "metadata") {
				t.Errorf("%s: a denial that names no field: %v", what, err)
			}
		default:
			t.Errorf("%s: neither accepted nor cleanly denied: %v", what, err)
		}
	}
	for i := range 60 {
		app := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("fuzz-%02d", i)}, Spec: fuzzedSpec(r)}
		err := env.Client.Create(ctx, app)
		check(fmt.Sprintf("create %+v", app.Spec), err)
		if err != nil {
			continue
		}
		next := fuzzedSpec(r)
		err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
				return err
			}
			app.Spec = next
			return env.Client.Update(ctx, app)
		})
		check(fmt.Sprintf("update to %+v", next), err)
	}
	if accepted == 0 || denied == 0 {
		t.Fatalf("the fuzzer is not exercising both paths: %d accepted, %d denied", accepted, denied)
	}
	// Let the operator reconcile what was accepted, then delete it all.
	time.Sleep(2 * time.Second)
	if err := env.Client.DeleteAllOf(ctx, &webappv1.WebApp{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	e2etest.WaitFor(t, 90*time.Second, "every fuzzed WebApp finalized and gone", func() (bool, error) {
		var list webappv1.WebAppList
		err := env.Client.List(ctx, &list, client.InNamespace(ns))
		return err == nil && len(list.Items) == 0, err
	})
	panicsAfter, err := chaos.ControllerPanics(crmetrics.Registry, controller.Name)
	if err != nil {
		t.Fatal(err)
	}
	if panicsAfter != panicsBefore {
		t.Fatalf("the operator panicked %v times on fuzzed specs", panicsAfter-panicsBefore)
	}
	t.Logf("fuzzed WebApps: %d requests accepted, %d denied cleanly, 0 panics", accepted, denied)
}

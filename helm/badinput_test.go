package helm_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/helm"
)

// TestBadInputStalls: a chart that fails to render, values the schema
// rejects, an unsupported hook, an object the API server rejects and a
// failing hook Job each stall the object with a message naming the cause,
// and none of them is retried in a loop.
func TestBadInputStalls(t *testing.T) {
	// The releases below that install the test chart create its cluster-scoped
	// CRD; their namespace's deletion cannot uninstall them once the operator
	// stopped, so remove the CRD here (registered first, so it runs last) or
	// TestLifecycle finds it owned by this test's release.
	t.Cleanup(func() {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		crd.SetName("widgets.charttest.opkit.dev")
		_ = env.Client.Delete(context.Background(), crd)
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) && env.Client.Get(context.Background(), client.ObjectKeyFromObject(crd), crd) == nil {
			time.Sleep(200 * time.Millisecond)
		}
	})
	ns := env.Namespace(t)
	ctx := context.Background()
	op := startOperator(t, ns)
	cases := []struct {
		name, chart string
		values      map[string]any
		reason      string
		message     string // in the Stalled message
		failed      string // ReleaseStatus.FailedObject
		history     string // Helm history ("" none)
	}{
		{"schema", "app-1", map[string]any{"message": "", "port": 80}, helm.ReasonInvalidValues, "message", "", ""},
		{"broken", "broken", nil, helm.ReasonRenderFailed, "values.size is required", "", ""},
		{"deletehook", "deletehook", nil, helm.ReasonUnsupportedHook, `"pre-delete"`, "", ""},
		{"badobject", "badobject", nil, helm.ReasonReleaseFailed, "Service " + ns + "/badobject-bad", "Service " + ns + "/badobject-bad", "1:failed"},
		{"failjob", "failjob", nil, helm.ReasonHookFailed, "pre-install hook Job " + ns + "/failjob-check", "pre-install hook Job " + ns + "/failjob-check", "1:failed"},
	}
	apps := map[string]*App{}
	for _, c := range cases {
		a := &App{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.name}, Spec: AppSpec{Chart: c.chart, Values: c.values}}
		if err := env.Client.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
		apps[c.name] = a
	}
	for _, c := range cases {
		a := apps[c.name]
		waitFor(t, 60*time.Second, c.name+" Stalled", func() (bool, error) {
			if err := get(t, a); err != nil {
				return false, err
			}
			s := conditions.Get(a, conditions.Stalled)
			if s == nil || s.Status != metav1.ConditionTrue || s.Reason != c.reason || !strings.Contains(s.Message, c.message) ||
				a.Status.Release.FailedObject != c.failed {
				return false, fmt.Errorf("Stalled %+v, release %+v", s, a.Status.Release)
			}
			return conditions.IsFalse(a, helm.ConditionReleased), nil
		})
		t.Logf("%s: Stalled %s: %s", c.name, c.reason, conditions.Get(a, conditions.Stalled).Message)
		got := strings.Join(history(t, ns, c.name), ",")
		if c.history == "" && got != "" || c.history != "" && !strings.HasPrefix(got, c.history) {
			t.Errorf("%s: history %q, want %q", c.name, got, c.history)
		}
	}
	// No hot loop: stalled objects are not reconciled again by themselves.
	time.Sleep(2 * time.Second)
	before := op.reconciles.Load()
	time.Sleep(3 * time.Second)
	if n := op.reconciles.Load() - before; n != 0 {
		t.Fatalf("%d reconciles of stalled objects in 3s", n)
	}

	// Fixing the values unstalls: a new revision installs.
	a := apps["schema"]
	if err := get(t, a); err != nil {
		t.Fatal(err)
	}
	a.Spec.Values["message"] = "fixed"
	if err := env.Client.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "schema App deployed after the fix", released(t, a, 1))
}

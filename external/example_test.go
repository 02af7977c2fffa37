package external_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/external"
	"github.com/opkit/opkit/outcome"
)

// One Limiter for an endpoint, shared by every object that calls it: two
// calls at once (the burst), then one every 500ms; a Retry-After closes the
// endpoint for everyone.
func ExampleLimiter() {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := external.NewLimiter(2, 2, external.WithClock(clk))
	for range 3 {
		wait, ok := l.Reserve("api.example.com", time.Second)
		fmt.Println(wait, ok)
	}
	l.Throttle("api.example.com", 5*time.Second)
	wait, ok := l.Reserve("api.example.com", time.Second)
	fmt.Println(wait, ok, l.ThrottledFor("api.example.com"))
	// Output:
	// 0s true
	// 0s true
	// 500ms true
	// 5s false 5s
}

// The Reconciler used alone: Sync records the external name and the create
// markers on the object, creates the resource with the object's UID as
// idempotency token, marks it Ready, and asks to be looked at again after
// the progress interval (2s by default) to observe what was made; later
// syncs ask for the drift poll interval. (env is this test package's testenv control plane; the reconciler
// package's Builder.External does all of this, plus status, the finalizer and
// the connection Secret.)
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "example-"}}
	_ = env.Client.Create(ctx, ns)

	made := map[string]string{} // the external system: name → token
	api := external.ClientFns[*Widget]{
		ObserveFn: func(_ context.Context, w *Widget, name string) (external.Observation, error) {
			_, ok := made[name]
			return external.Observation{Exists: ok, UpToDate: true}, nil
		},
		CreateFn: func(_ context.Context, w *Widget, req external.CreateRequest) (external.Creation, error) {
			made[req.Name] = req.Token
			return external.Creation{ConnectionDetails: external.ConnectionDetails{"password": []byte("s3cret")}}, nil
		},
	}
	r, err := external.New[*Widget](env.Client, "widget",
		external.ConnectorFn[*Widget](func(context.Context, *Widget) (external.Client[*Widget], error) { return api, nil }),
		external.WithExternalName(func(w *Widget) string { return "widget-" + w.Name }),
		external.WithConnectionSecret(func(w *Widget) string { return w.Name + "-connection" }),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	w := &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "w"}, Spec: WidgetSpec{Color: "red"}}
	_ = env.Client.Create(ctx, w)

	res, err := r.Sync(ctx, w)
	fmt.Println(res.Name, res.Created, outcome.Classify(err).RequeueAfter)
	fmt.Println(made[res.Name] == string(w.UID))
	var stored Widget
	_ = env.Client.Get(ctx, client.ObjectKeyFromObject(w), &stored)
	fmt.Println(stored.Annotations[external.AnnotationExternalName], stored.Annotations[external.AnnotationCreateSucceeded] != "")
	fmt.Println(r.ConnectionSecret(w, res).Name)
	// Output:
	// widget-w true 2s
	// true
	// widget-w true
	// w-connection
}

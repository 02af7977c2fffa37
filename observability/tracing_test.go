package observability_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/observability"
)

// lockedBuffer is a bytes.Buffer safe for the manager's concurrent loggers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const seenAnnotation = "observability.test.opkit.dev/seen"

// annotatingReconciler annotates each ConfigMap once through the traced
// client, and makes one external call per reconcile.
type annotatingReconciler struct{ c client.Client }

func (r *annotatingReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logf.FromContext(ctx).Info("reconciling")
	_, done := observability.StartExternal(ctx, "inventory.Lookup", attribute.String("inventory.id", req.Name))
	done(nil)
	var cm corev1.ConfigMap
	if err := r.c.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if cm.Annotations[seenAnnotation] != "" {
		return reconcile.Result{}, nil
	}
	patch := client.MergeFrom(cm.DeepCopy())
	metav1.SetMetaDataAnnotation(&cm.ObjectMeta, seenAnnotation, "true")
	return reconcile.Result{}, r.c.Patch(ctx, &cm, patch)
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	out := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value.String()
	}
	return out
}

func TestReconcileSpansCarryTriggerAndAPIWriteChildren(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	leakOpts := goleak.IgnoreCurrent()

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	var logs lockedBuffer
	mgr := newManager(t, ns, mgrConfig{logger: observability.NewLogger(observability.WithLogOutput(&logs), observability.WithoutLogTime())})
	reg := prometheus.NewRegistry()
	obs, err := observability.Setup(mgr, observability.WithRegisterer(reg), observability.WithGatherer(reg), observability.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	const name = "trace-cm"
	secretToConfigMap := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	})
	err = builder.ControllerManagedBy(mgr).Named(name).
		For(&corev1.ConfigMap{}, builder.WithPredicates(obs.TriggerPredicate(name))).
		Watches(&corev1.Secret{}, obs.TriggerHandler(name, secretToConfigMap)).
		Complete(obs.Wrap(name, &annotatingReconciler{c: obs.Client(mgr.GetClient())}, observability.WithObjectKind("ConfigMap")))
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, mgr)

	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t1"}}); err != nil {
		t.Fatal(err)
	}
	// Wait for the annotation's own update event to be reconciled, so the
	// Secret's event below cannot coalesce with it.
	reconcileSpans := func() []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range exp.GetSpans().Snapshots() {
			if s.Name() == "reconcile "+name {
				out = append(out, s)
			}
		}
		return out
	}
	findReconcile := func(kind, ev string) (sdktrace.ReadOnlySpan, bool) {
		for _, s := range reconcileSpans() {
			a := attrs(s)
			if a[observability.AttrTriggerKind] == kind && a[observability.AttrTriggerEvent] == ev && a[observability.AttrTriggerName] == "t1" {
				return s, true
			}
		}
		return nil, false
	}
	eventually(t, 30*time.Second, "reconcile span for the annotation's update", func() (bool, error) {
		_, ok := findReconcile("ConfigMap", observability.TriggerUpdate)
		return ok, fmt.Errorf("%d reconcile spans", len(reconcileSpans()))
	})
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t1"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "reconcile span triggered by the Secret", func() (bool, error) {
		_, ok := findReconcile("Secret", observability.TriggerCreate)
		return ok, nil
	})

	created, ok := findReconcile("ConfigMap", observability.TriggerCreate)
	if !ok {
		t.Fatalf("no reconcile span triggered by the ConfigMap's create; spans: %v", reconcileSpans())
	}
	a := attrs(created)
	for k, want := range map[attribute.Key]string{
		observability.AttrController:       name,
		observability.AttrObjectKind:       "ConfigMap",
		observability.AttrObjectNamespace:  ns,
		observability.AttrObjectName:       "t1",
		observability.AttrTriggerNamespace: ns,
		observability.AttrResult:           "success",
	} {
		if a[k] != want {
			t.Errorf("reconcile span %s = %q, want %q", k, a[k], want)
		}
	}
	// Children of the first reconcile: the external call and the one API write.
	children := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Parent().SpanID() == created.SpanContext().SpanID() {
			children[s.Name()] = s
		}
	}
	if len(children) != 2 || children["kube.patch"] == nil || children["inventory.Lookup"] == nil {
		t.Fatalf("children of the create-triggered reconcile = %v, want kube.patch and inventory.Lookup", children)
	}
	pa := attrs(children["kube.patch"])
	if pa[observability.AttrAPIVerb] != "patch" || pa[observability.AttrObjectKind] != "ConfigMap" || pa[observability.AttrObjectName] != "t1" {
		t.Errorf("kube.patch span attributes = %v", pa)
	}
	if children["kube.patch"].SpanContext().TraceID() != created.SpanContext().TraceID() {
		t.Error("API write span is not in the reconcile's trace")
	}
	// The update-triggered reconcile found the annotation and wrote nothing.
	updated, _ := findReconcile("ConfigMap", observability.TriggerUpdate)
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Parent().SpanID() == updated.SpanContext().SpanID() && strings.HasPrefix(s.Name(), "kube.") {
			t.Errorf("steady-state reconcile wrote: %s", s.Name())
		}
	}

	// Every "reconciling" log line carries the object, the reconcile ID and
	// the trace ID of its reconcile span.
	traceByReconcileID := map[string]string{}
	for _, s := range reconcileSpans() {
		traceByReconcileID[attrs(s)[observability.AttrReconcileID]] = s.SpanContext().TraceID().String()
	}
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		if l["msg"] != "reconciling" {
			continue
		}
		lines++
		id, _ := l[observability.LogKeyReconcileID].(string)
		if l["namespace"] != ns || l["name"] != "t1" || id == "" || l[observability.LogKeyTraceID] != traceByReconcileID[id] {
			t.Errorf("log line lacks object/reconcileID/matching traceID: %s", sc.Text())
		}
	}
	if lines < 3 {
		t.Errorf("%d reconciling log lines, want ≥3:\n%s", lines, logs.String())
	}

	stop()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, leakOpts)
}

func TestTriggerIsRequeueAfterAnErrorWithoutNewEvent(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	mgr := newManager(t, ns, mgrConfig{})
	reg := prometheus.NewRegistry()
	obs, err := observability.Setup(mgr, observability.WithRegisterer(reg), observability.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	const name = "requeue-cm"
	var mu sync.Mutex
	calls := 0
	r := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return reconcile.Result{}, apierrors.NewServiceUnavailable("try later")
		}
		return reconcile.Result{}, nil
	})
	err = builder.ControllerManagedBy(mgr).Named(name).
		For(&corev1.ConfigMap{}, builder.WithPredicates(obs.TriggerPredicate(name))).
		Complete(obs.Wrap(name, r))
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r1"}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	eventually(t, 30*time.Second, "two reconcile spans", func() (bool, error) {
		got = got[:0]
		for _, s := range exp.GetSpans().Snapshots() {
			if s.Name() == "reconcile "+name {
				a := attrs(s)
				got = append(got, a[observability.AttrTriggerEvent]+"/"+a[observability.AttrResult])
			}
		}
		return len(got) >= 2, nil
	})
	if got[0] != "create/transient" || got[1] != "requeue/success" {
		t.Fatalf("trigger/result of the reconciles = %v, want [create/transient requeue/success]", got)
	}
}

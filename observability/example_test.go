package observability_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/observability"
)

// printRecorder stands in for manager.GetEventRecorder in examples.
type printRecorder struct{}

func (printRecorder) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	fmt.Printf("%s %s/%s: %s\n", eventtype, action, reason, fmt.Sprintf(note, args...))
}

func ExampleRecorder() {
	const ReasonBackendUnavailable = "BackendUnavailable"
	rec := observability.NewRecorder(printRecorder{})
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart", UID: "1234"}}
	// A failing reconcile retried 50 times writes one Event.
	for range 50 {
		rec.Eventf(obj, nil, corev1.EventTypeWarning, ReasonBackendUnavailable, "Reconcile", "backend %s unavailable", "db-0")
	}
	recorded, suppressed := rec.Stats()
	fmt.Println("recorded", recorded, "suppressed", suppressed)
	// Output:
	// Warning Reconcile/BackendUnavailable: backend db-0 unavailable
	// recorded 1 suppressed 49
}

func ExampleMetrics_SetConditions() {
	reg := prometheus.NewRegistry()
	m, err := observability.NewMetrics(reg)
	if err != nil {
		panic(err)
	}
	ready := func(s metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: "Ready", Status: s}}
	}
	// Three objects, then one becomes ready and one is deleted.
	m.SetConditions("shop", types.NamespacedName{Name: "a"}, ready(metav1.ConditionTrue))
	m.SetConditions("shop", types.NamespacedName{Name: "b"}, ready(metav1.ConditionFalse))
	m.SetConditions("shop", types.NamespacedName{Name: "c"}, ready(metav1.ConditionFalse))
	m.SetConditions("shop", types.NamespacedName{Name: "b"}, ready(metav1.ConditionTrue))
	m.ForgetObject("shop", types.NamespacedName{Name: "c"})

	mfs, _ := reg.Gather()
	var lines []string
	for _, mf := range mfs {
		if mf.GetName() != "opkit_condition_objects" {
			continue
		}
		for _, s := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range s.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			lines = append(lines, fmt.Sprintf("%s{type=%s,status=%s} %v", mf.GetName(), l["type"], l["status"], s.GetGauge().GetValue()))
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// opkit_condition_objects{type=Ready,status=False} 0
	// opkit_condition_objects{type=Ready,status=True} 2
}

func ExampleNewLogger() {
	log := observability.NewLogger(observability.WithLogOutput(os.Stdout), observability.WithoutLogTime())
	log.Info("reconciled", "namespace", "shop", "name", "cart")
	// Output:
	// {"level":"info","msg":"reconciled","namespace":"shop","name":"cart"}
}

// Wrap and StartExternal without a manager: the reconcile span, its external
// call, and the trigger (unknown here: no watch event was recorded).
func ExampleObservability_Wrap() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	o, err := observability.New(observability.WithRegisterer(prometheus.NewRegistry()), observability.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}
	r := o.Wrap("shop", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		trig, _ := observability.TriggerFromContext(ctx)
		fmt.Println("trigger:", trig.Event)
		_, done := observability.StartExternal(ctx, "payments.Capture")
		done(errors.New("card declined"))
		return reconcile.Result{}, reconcile.TerminalError(errors.New("card declined"))
	}))
	_, _ = r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "order-1"}})
	for _, s := range exp.GetSpans().Snapshots() {
		fmt.Println("span:", s.Name(), s.Status().Code)
	}
	// Output:
	// trigger: unknown
	// span: payments.Capture Error
	// span: reconcile shop Error
}

// Setup wires everything for a manager; the reconciler then uses the traced
// client, the deduplicating Recorder and the Metrics.
func ExampleSetup() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Logger:                 observability.NewLogger(),
		HealthProbeBindAddress: ":8081",
	})
	if err != nil {
		panic(err)
	}
	obs, err := observability.Setup(mgr) // metrics, /healthz, /readyz, debug endpoint, event recorders
	if err != nil {
		panic(err) // e.g. metrics already registered: reported at start-up, never at scrape time
	}
	const name = "configmap-annotator"
	c := obs.Client(mgr.GetClient()) // every write is a child span of the reconcile span
	rec := obs.Recorder(name)
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		logf.FromContext(ctx).Info("reconciling") // carries namespace, name, reconcileID, traceID
		var cm corev1.ConfigMap
		if err := c.Get(ctx, req.NamespacedName, &cm); err != nil {
			if apierrors.IsNotFound(err) {
				obs.Metrics().ForgetObject(name, req.NamespacedName)
			}
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		rec.Eventf(&cm, nil, corev1.EventTypeNormal, "Seen", "Reconcile", "configmap observed")
		return reconcile.Result{}, nil
	})
	err = builder.ControllerManagedBy(mgr).Named(name).
		For(&corev1.ConfigMap{}, builder.WithPredicates(obs.TriggerPredicate(name))).
		Complete(obs.Wrap(name, r))
	if err != nil {
		panic(err)
	}
	_ = mgr.Start(ctrl.SetupSignalHandler())
}

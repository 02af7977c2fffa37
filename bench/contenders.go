package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/opkit/opkit/bench/baseline"
	"github.com/opkit/opkit/bench/flux"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	webapp "github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/examples/webapp/registry"
	"github.com/opkit/opkit/reconciler"
	"github.com/opkit/opkit/testenv"
)

// contenders are every contender's name, in report order.
var contenders = []string{Ceiling, Baseline, Flux, Opkit}

// Contender names, in report order.
const (
	Ceiling  = "ceiling"
	Baseline = "baseline"
	// Flux is the webapp operator written on fluxcd/pkg/ssa's
	// ResourceManager (package flux), the peer library in the race.
	Flux  = "flux"
	Opkit = "opkit"
)

// instance is one running contender. The hooks tell the ceiling's raw client
// loop what the load generator did (operators learn it from their watches and
// ignore them).
type instance interface {
	created(app *webappv1.WebApp)
	changed(app *webappv1.WebApp)
	deleting(name string)
	// reconciles is the controller's reconcile count so far (NaN for the ceiling).
	reconciles() float64
	requests() *testenv.RequestCounter
	failures() *failureCounter
	stop() error
}

// startContender starts one contender on a transport of its own, inside its
// pprof label, so that its CPU can be told from the harness's (cpu.go).
func startContender(ctx context.Context, name string, cl *cluster, s Settings) (inst instance, err error) {
	cfg := withOwnTransport(cl.env.Config)
	cfg.QPS, cfg.Burst = s.QPS, s.Burst
	cfg, req := testenv.CountRequests(cfg)
	cfg, fail := countFailures(cfg)
	labelled(ctx, name, func(ctx context.Context) {
		switch name {
		case Ceiling:
			inst, err = startCeiling(ctx, cfg, cl, s, req, fail)
		case Baseline, Flux, Opkit:
			inst, err = startOperator(ctx, name, cfg, cl, s, req, fail)
		default:
			err = fmt.Errorf("unknown contender %q", name)
		}
	})
	return inst, err
}

// operator runs the baseline, the flux or the opkit webapp operator in its
// own manager.
type operator struct {
	controller string
	cancel     context.CancelFunc
	done       chan error
	req        *testenv.RequestCounter
	fail       *failureCounter
}

func startOperator(ctx context.Context, name string, cfg *rest.Config, cl *cluster, s Settings, req *testenv.RequestCounter, fail *failureCounter) (*operator, error) {
	opts := manager.Options{
		Scheme:                 cl.scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Every scenario starts a new manager with the same controller name.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	}
	if name == Opkit {
		// The webapp example's cache options, as its main uses them
		// (managedFields stripped, equal label maps shared, Deployments
		// cached with only their declared fields, metadata and status); the
		// baseline keeps the defaults.
		opts.Cache = webapp.CacheOptions()
		opts.NewCache = reconciler.NewCache
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	op := &operator{controller: controllerName(name), req: req, fail: fail, done: make(chan error, 1)}
	switch name {
	case Baseline:
		r := &baseline.WebAppReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Registry: registry.New(), Concurrency: s.Workers}
		err = r.SetupWithManager(mgr)
	case Flux:
		r := &flux.WebAppReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Registry: registry.New(), Concurrency: s.Workers}
		err = r.SetupWithManager(mgr)
	default:
		err = webapp.Setup(mgr, webapp.Options{Registry: registry.New(), Concurrency: s.Workers})
	}
	if err != nil {
		return nil, err
	}
	ctx, op.cancel = context.WithCancel(ctx)
	go func() { op.done <- mgr.Start(ctx) }()
	// The controller's informers are the manager's shared ones: once they have
	// synced, the initial LISTs and WATCHes are behind us. The wait is woken
	// by each informer's sync itself (client-go's DoneChecker), not by the
	// cache's WaitForCacheSync, which looks every 100ms: the restart's
	// "synced" figure is exact, as the ceiling's LIST timing is.
	var checkers []toolscache.DoneChecker
	for _, obj := range []client.Object{&webappv1.WebApp{}, &corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}} {
		inf, err := mgr.GetCache().GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return nil, errors.Join(err, op.stop())
		}
		checkers = append(checkers, inf.HasSyncedChecker())
	}
	if !toolscache.WaitFor(ctx, "", checkers...) {
		return nil, errors.Join(errors.New("manager cache did not sync"), op.stop())
	}
	return op, nil
}

// controllerName is the controller name of an operator contender (its
// controller_runtime_reconcile_total label); "" for the ceiling.
func controllerName(contender string) string {
	switch contender {
	case Baseline:
		return baseline.Name
	case Flux:
		return flux.Name
	case Opkit:
		return webapp.Name
	}
	return ""
}

func (o *operator) created(*webappv1.WebApp)          {}
func (o *operator) changed(*webappv1.WebApp)          {}
func (o *operator) deleting(string)                   {}
func (o *operator) requests() *testenv.RequestCounter { return o.req }
func (o *operator) failures() *failureCounter         { return o.fail }
func (o *operator) reconciles() float64               { return reconcileTotal(o.controller) }

func (o *operator) stop() error {
	o.cancel()
	select {
	case err := <-o.done:
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	case <-time.After(time.Minute):
		return errors.New("manager did not stop within a minute")
	}
}

// reconcileTotal sums controller_runtime_reconcile_total for one controller
// over every result; every manager in the process shares the counter, so
// callers use differences. It reads the counter itself, not the registry:
// the restart scenario calls it every 10ms while the contender's reconciles
// run in this process, and a Gather of controller-runtime's registry (every
// workqueue, REST client and reconcile-time histogram of every manager the
// run has started) took about 2ms of CPU per poll, 80ms against 310ms for
// the 1,000 reconciles in a restart CPU profile: CPU taken from the
// contender being timed. NaN when the counter cannot be found.
func reconcileTotal(controller string) float64 {
	vec := reconcileCounter()
	if vec == nil {
		return math.NaN()
	}
	ch := make(chan prometheus.Metric, 16)
	go func() {
		vec.Collect(ch)
		close(ch)
	}()
	sum := 0.0
	var m dto.Metric
	for metric := range ch {
		m.Reset()
		if err := metric.Write(&m); err != nil {
			continue
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == "controller" && l.GetValue() == controller {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// reconcileCounter is the controller_runtime_reconcile_total vector
// controller-runtime registers on its registry (its package is internal):
// registering a vector with the same name, help and labels fails with an
// AlreadyRegisteredError that carries the registered one. Nil when it is not
// there (then the probe is taken off again).
var reconcileCounter = sync.OnceValue(func() *prometheus.CounterVec {
	probe := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_runtime_reconcile_total",
		Help: "Total number of reconciliations per controller",
	}, []string{"controller", "result"})
	err := ctrlmetrics.Registry.Register(probe)
	if err == nil {
		ctrlmetrics.Registry.Unregister(probe)
		return nil
	}
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		return nil
	}
	vec, _ := are.ExistingCollector.(*prometheus.CounterVec)
	return vec
})

// ceiling is the API server's own throughput for the writes an ideal webapp
// operator makes: a raw client loop (no cache, no watch, no read) with the
// same worker count and client QPS/Burst, told directly by the load
// generator what to do. Per created WebApp: add the finalizer, create the
// ConfigMap, Deployment and Service, write the status twice (Progressing,
// then Ready) — the writes of a two-reconcile converge. Per spec change:
// patch the ConfigMap and the Deployment, write the status twice. Per
// deletion: remove the finalizer.
type ceiling struct {
	c      client.Client
	cl     *cluster
	req    *testenv.RequestCounter
	fail   *failureCounter
	work   chan func(context.Context)
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startCeiling(ctx context.Context, cfg *rest.Config, cl *cluster, s Settings, req *testenv.RequestCounter, fail *failureCounter) (*ceiling, error) {
	c, err := client.New(cfg, client.Options{Scheme: cl.scheme})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &ceiling{c: c, cl: cl, req: req, fail: fail, work: make(chan func(context.Context), 1<<16), cancel: cancel}
	for range s.Workers {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case fn := <-r.work:
					fn(ctx)
				}
			}
		}()
	}
	return r, nil
}

func (r *ceiling) requests() *testenv.RequestCounter { return r.req }
func (r *ceiling) failures() *failureCounter         { return r.fail }
func (r *ceiling) reconciles() float64               { return math.NaN() }

func (r *ceiling) stop() error {
	r.cancel()
	r.wg.Wait()
	return nil
}

func (r *ceiling) patch(ctx context.Context, obj client.Object, body map[string]any, status bool) {
	data, err := json.Marshal(body)
	if err != nil {
		return
	}
	p := client.RawPatch(types.MergePatchType, data)
	if status {
		_ = r.c.Status().Patch(ctx, obj, p)
		return
	}
	_ = r.c.Patch(ctx, obj, p)
}

func (r *ceiling) created(app *webappv1.WebApp) {
	app = app.DeepCopy()
	r.work <- func(ctx context.Context) {
		r.patch(ctx, app, map[string]any{"metadata": map[string]any{"finalizers": []string{webapp.FinalizerName}}}, false)
		for _, child := range webapp.Children(app) {
			if err := controllerutil.SetControllerReference(app, child, r.cl.scheme); err != nil {
				continue
			}
			_ = r.c.Create(ctx, child)
		}
		r.writeStatus(ctx, app)
	}
}

func (r *ceiling) changed(app *webappv1.WebApp) {
	app = app.DeepCopy()
	r.work <- func(ctx context.Context) {
		for _, child := range webapp.Children(app) {
			switch obj := child.(type) {
			case *corev1.ConfigMap:
				r.patch(ctx, obj, map[string]any{"data": obj.Data}, false)
			case *appsv1.Deployment:
				r.patch(ctx, obj, map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
					"annotations": obj.Spec.Template.Annotations}}}}, false)
			}
		}
		r.writeStatus(ctx, app)
	}
}

func (r *ceiling) writeStatus(ctx context.Context, app *webappv1.WebApp) {
	gen := app.Generation
	progressing := map[string]any{"status": map[string]any{
		"observedGeneration": gen, "phase": "Progressing",
		"conditions": []map[string]any{condition("Ready", "Unknown", "DeploymentProgressing", gen)},
	}}
	r.patch(ctx, app, progressing, true)
	ready := map[string]any{"status": map[string]any{
		"observedGeneration": gen, "phase": "Ready", "readyReplicas": 1, "url": fmt.Sprintf("http://%s.%s.svc", app.Name, app.Namespace),
		"conditions": []map[string]any{condition("Ready", "True", "Available", gen), condition("Available", "True", "MinimumReplicasAvailable", gen)},
	}}
	r.patch(ctx, app, ready, true)
}

func condition(typ, status, reason string, gen int64) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": reason, "observedGeneration": gen,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
}

func (r *ceiling) deleting(name string) {
	r.work <- func(ctx context.Context) {
		app := &webappv1.WebApp{}
		app.Namespace, app.Name = namespace, name
		r.patch(ctx, app, map[string]any{"metadata": map[string]any{"finalizers": nil}}, false)
	}
}

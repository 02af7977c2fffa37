package phase_test

import (
	"context"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crrecorder "sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/phase"
	"github.com/opkit/opkit/testenv"
)

// controller-runtime's manager.GetEventRecorder result must be accepted as is.
var _ events.EventRecorder = crrecorder.EventRecorder(nil)

const (
	Configuring phase.Phase = "Configuring"
)

// counters counts handler invocations per phase, shared by every manager
// of a test, so a restart cannot hide repeated work.
type counters struct {
	mu sync.Mutex
	n  map[phase.Phase]int
}

func (c *counters) inc(p phase.Phase) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[p]++
}

func (c *counters) get(p phase.Phase) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[p]
}

// pipelineMachine: Pending → Provisioning → Configuring → Ready, where
// Configuring waits until spec.gate is "open" — something the test controls.
func pipelineMachine(t *testing.T, cnt *counters, rec events.EventRecorder) *phase.Machine[*Pipeline] {
	t.Helper()
	count := func(p phase.Phase, next func(*Pipeline) phase.Outcome) phase.Handler[*Pipeline] {
		return func(_ context.Context, obj *Pipeline) (phase.Outcome, error) {
			cnt.inc(p)
			return next(obj), nil
		}
	}
	m, err := phase.New[*Pipeline]("pipeline", phase.WithEventRecorder(rec)).
		Initial(phase.Pending).
		On(phase.Pending, count(phase.Pending, func(*Pipeline) phase.Outcome { return phase.Next(phase.Provisioning) }),
			phase.To(phase.Provisioning)).
		On(phase.Provisioning, count(phase.Provisioning, func(*Pipeline) phase.Outcome { return phase.Next(Configuring) }),
			phase.To(Configuring)).
		On(Configuring, count(Configuring, func(p *Pipeline) phase.Outcome {
			if p.Spec.Gate != "open" {
				return phase.Wait().WithMessage("waiting for spec.gate=open")
			}
			return phase.Next(phase.Ready)
		}), phase.To(phase.Ready), phase.Timeout(time.Hour, phase.Degraded)).
		On(phase.Ready, count(phase.Ready, func(*Pipeline) phase.Outcome { return phase.Wait() })).
		On(phase.Degraded, nil).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// pipelineReconciler is the composition the package documentation shows:
// read from the cache, snapshot, Step, patch the status, return the result.
type pipelineReconciler struct {
	client  client.Client
	machine *phase.Machine[*Pipeline]
}

func (r *pipelineReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &Pipeline{}
	if err := r.client.Get(ctx, req.NamespacedName, p); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	patcher := conditions.NewStatusPatcher(p, conditions.WithOptimisticLock())
	res, err := r.machine.Step(ctx, p)
	if _, perr := patcher.Patch(ctx, r.client, p); perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	return res.Result, nil
}

// startManager runs a real manager with a new machine instance. The
// controller filters its own status writes (GenerationChangedPredicate), so
// the machine's requeues alone drive it between phases. The returned stop
// function stops the manager and waits for it.
func startManager(t *testing.T, ns string, cnt *counters) (stop func()) {
	t.Helper()
	mgr, err := manager.New(env.Config, manager.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &pipelineReconciler{client: mgr.GetClient(), machine: pipelineMachine(t, cnt, mgr.GetEventRecorder("pipeline-controller"))}
	if err := builder.ControllerManagedBy(mgr).Named("pipeline").
		For(&Pipeline{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// eventually polls cond with testenv.WaitForEvery (every 50ms).
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	testenv.WaitForEvery(t, 50*time.Millisecond, timeout, what, cond)
}

func getPipeline(ctx context.Context, t *testing.T, key types.NamespacedName) *Pipeline {
	t.Helper()
	p := &Pipeline{}
	if err := env.Client.Get(ctx, key, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestResumesAfterRestart runs the machine in a real manager until it waits
// in Configuring, stops that manager, starts a new one with a new machine,
// and shows that the object resumes in Configuring: the handlers of the
// finished phases (Pending, Provisioning) never run again, and the
// persisted entered-at time of Configuring is kept.
func TestResumesAfterRestart(t *testing.T) {
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cnt := &counters{n: map[phase.Phase]int{}}
	key := types.NamespacedName{Namespace: ns, Name: "p1"}

	stop1 := startManager(t, ns, cnt)
	if err := env.Client.Create(ctx, &Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}}); err != nil {
		t.Fatal(err)
	}
	var waiting *Pipeline
	eventually(t, 30*time.Second, "persisted phase Configuring with its handler waiting", func() (bool, error) {
		waiting = getPipeline(ctx, t, key)
		c := conditions.Get(waiting, conditions.Reconciling)
		return waiting.Status.Phase == "Configuring" && c != nil && c.Message == "waiting for spec.gate=open", nil
	})
	stop1()

	pending, provisioning, configuring := cnt.get(phase.Pending), cnt.get(phase.Provisioning), cnt.get(Configuring)
	t.Logf("first manager: handler calls Pending=%d Provisioning=%d Configuring=%d", pending, provisioning, configuring)
	// The stale-read guard keeps cache lag from re-running finished handlers
	// even within one process.
	if pending != 1 || provisioning != 1 || configuring < 1 {
		t.Fatalf("first manager: Pending=%d Provisioning=%d Configuring=%d, want 1, 1, >=1", pending, provisioning, configuring)
	}
	if waiting.Status.PhaseTransitionTime == nil {
		t.Fatal("no phaseTransitionTime persisted")
	}
	enteredConfiguring := waiting.Status.PhaseTransitionTime.Time

	startManager(t, ns, cnt)
	eventually(t, 30*time.Second, "the new manager resumes in Configuring", func() (bool, error) {
		return cnt.get(Configuring) > configuring, nil
	})
	if got := getPipeline(ctx, t, key); got.Status.Phase != "Configuring" || !got.Status.PhaseTransitionTime.Time.Equal(enteredConfiguring) {
		t.Fatalf("after restart: phase %q entered %v, want Configuring entered %v", got.Status.Phase, got.Status.PhaseTransitionTime, enteredConfiguring)
	}

	// Open the gate (a spec change, hence a reconcile): Configuring finishes.
	p := getPipeline(ctx, t, key)
	p.Spec.Gate = "open"
	if err := env.Client.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "Ready=True with phase Ready on the server", func() (bool, error) {
		p = getPipeline(ctx, t, key)
		return p.Status.Phase == "Ready" && conditions.IsTrue(p, conditions.Ready), nil
	})
	if cnt.get(phase.Pending) != pending || cnt.get(phase.Provisioning) != provisioning {
		t.Fatalf("finished phases ran again: Pending %d→%d, Provisioning %d→%d",
			pending, cnt.get(phase.Pending), provisioning, cnt.get(phase.Provisioning))
	}
	eventually(t, 30*time.Second, "the Ready handler ran", func() (bool, error) { return cnt.get(phase.Ready) >= 1, nil })
	if conditions.Get(p, conditions.Reconciling) != nil || conditions.Get(p, conditions.Stalled) != nil {
		t.Fatalf("conditions in Ready: %+v", p.Status.Conditions)
	}
	if c := conditions.Get(p, conditions.Ready); c.Reason != "Ready" || c.ObservedGeneration != p.Generation {
		t.Fatalf("Ready condition %+v (generation %d)", c, p.Generation)
	}

	// The transitions were recorded as events.k8s.io/v1 Events.
	eventually(t, 30*time.Second, "PhaseTransition events for the object", func() (bool, error) {
		var evs eventsv1.EventList
		if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		n := 0
		for _, e := range evs.Items {
			if e.Regarding.Name == key.Name && e.Reason == phase.EventPhaseTransition {
				n++
			}
		}
		return n >= 4, nil
	})
}

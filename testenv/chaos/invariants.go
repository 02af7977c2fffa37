package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/testenv"
)

// Idempotent runs pass twice and returns an error when the second run sent
// any write through the config counter counts: a controller that has
// converged must reconcile again without writing. pass runs one reconcile
// (call the reconciler directly, or trigger one and wait for it with
// [ReconcileMonitor.Pass]). The counter is reset between the passes; writes
// other clients make through the same counted config in that window (another
// object's reconcile) count too, so run it on a quiet controller.
func Idempotent(ctx context.Context, counter *testenv.RequestCounter, pass func(context.Context) error) error {
	if err := pass(ctx); err != nil {
		return fmt.Errorf("chaos: idempotence: first pass: %w", err)
	}
	counter.Reset()
	if err := pass(ctx); err != nil {
		return fmt.Errorf("chaos: idempotence: second pass: %w", err)
	}
	if w := counter.Writes(); w != 0 {
		return fmt.Errorf("chaos: not idempotent: the second pass wrote %d times:\n%s", w, counter)
	}
	return nil
}

// Pass returns a pass for [Idempotent] that calls trigger (e.g. touch an
// annotation of key's object, with a client the counter does not count) and
// waits until a new reconcile of key has finished.
func (m *ReconcileMonitor) Pass(key types.NamespacedName, trigger func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		before := m.Reconciles(key)
		if err := trigger(ctx); err != nil {
			return err
		}
		return m.WaitIdle(ctx, key, before)
	}
}

// ControllerPanics returns controller-runtime's count of reconcile panics for
// the named controller (controller_runtime_reconcile_panics_total) from g,
// usually sigs.k8s.io/controller-runtime/pkg/metrics.Registry. Panics are
// counted whether or not they were recovered; compare the value before and
// after a run. A controller with no panic series yet counts 0.
func ControllerPanics(g prometheus.Gatherer, controller string) (float64, error) {
	return controllerCounter(g, "controller_runtime_reconcile_panics_total", controller)
}

// ControllerReconciles returns controller-runtime's count of finished
// reconciles for the named controller (controller_runtime_reconcile_total,
// summed over its result label: success, error, requeue, requeue_after) from
// g, usually sigs.k8s.io/controller-runtime/pkg/metrics.Registry. A reconcile
// is counted when the reconciler returns, a recovered panic included (as an
// error); compare the value before and after a run. A controller with no
// series yet counts 0.
func ControllerReconciles(g prometheus.Gatherer, controller string) (float64, error) {
	return controllerCounter(g, "controller_runtime_reconcile_total", controller)
}

// controllerCounter sums the counter family name over the series whose
// "controller" label is controller.
func controllerCounter(g prometheus.Gatherer, name, controller string) (float64, error) {
	families, err := g.Gather()
	if err != nil {
		return 0, fmt.Errorf("chaos: gather metrics: %w", err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total, nil
}

// FinalizerChecker verifies that a finalizer is removed from a deleting
// object only after the object's cleanup finished. It learns about cleanup
// from [FinalizerChecker.CleanupDone] (call it from the operator's cleanup
// step when it succeeds) or from a probe asked at removal time
// ([WithCleanupProbe]), and about removals from watch events
// ([FinalizerChecker.Handler] on an informer of the object's type). A
// removal it sees before cleanup is a violation. Recreating an object under
// the same name is told apart by UID. It is safe for concurrent use.
type FinalizerChecker struct {
	finalizer string
	probe     func(types.NamespacedName) bool

	mu         sync.Mutex
	cleaned    map[types.UID]bool
	holding    map[types.NamespacedName]types.UID // last seen with the finalizer
	finalized  int
	violations []string
	nViolation int
}

// FinalizerCheckerOption configures [NewFinalizerChecker].
type FinalizerCheckerOption func(*FinalizerChecker)

// WithCleanupProbe makes the checker ask probe, when it sees the finalizer
// removed from a deleting object it was not told about, whether the object's
// cleanup is complete (e.g. "is the route gone from the registry?"). The
// probe runs after the removal happened on the server, so it sees every
// effect of a cleanup that preceded the removal; it must not be fooled by a
// new object of the same name (use fresh names).
func WithCleanupProbe(probe func(types.NamespacedName) bool) FinalizerCheckerOption {
	return func(c *FinalizerChecker) { c.probe = probe }
}

// NewFinalizerChecker checks the finalizer named finalizer.
func NewFinalizerChecker(finalizer string, opts ...FinalizerCheckerOption) *FinalizerChecker {
	c := &FinalizerChecker{finalizer: finalizer, cleaned: map[types.UID]bool{}, holding: map[types.NamespacedName]types.UID{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// CleanupDone records that obj's cleanup completed.
func (c *FinalizerChecker) CleanupDone(obj client.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cleaned[obj.GetUID()] = true
}

// Handler returns an event handler to add to an informer of the checked type
// (e.g. a controller-runtime cache that does not share the operator's
// network path: the checker must keep seeing events while the operator is cut off).
func (c *FinalizerChecker) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if obj, ok := o.(client.Object); ok {
				c.observe(obj, false)
			}
		},
		UpdateFunc: func(_, o any) {
			if obj, ok := o.(client.Object); ok {
				c.observe(obj, false)
			}
		},
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if obj, ok := o.(client.Object); ok {
				c.observe(obj, true)
			}
		},
	}
}

func (c *FinalizerChecker) observe(obj client.Object, deleted bool) {
	key := client.ObjectKeyFromObject(obj)
	has := slices.Contains(obj.GetFinalizers(), c.finalizer) && !deleted
	c.mu.Lock()
	held := c.holding[key] == obj.GetUID() && obj.GetUID() != ""
	if has {
		c.holding[key] = obj.GetUID()
		c.mu.Unlock()
		return
	}
	delete(c.holding, key)
	gone := held && (deleted || !obj.GetDeletionTimestamp().IsZero())
	if !gone {
		c.mu.Unlock()
		return
	}
	done := c.cleaned[obj.GetUID()]
	c.mu.Unlock()
	if !done && c.probe != nil {
		done = c.probe(key)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if done {
		c.finalized++
		return
	}
	c.nViolation++
	if len(c.violations) < maxRecorded {
		c.violations = append(c.violations, key.String())
	}
}

// Finalized returns how many deleting objects lost the finalizer after their cleanup.
func (c *FinalizerChecker) Finalized() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.finalized
}

// Check returns an error naming the objects whose finalizer was removed
// before their cleanup completed.
func (c *FinalizerChecker) Check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nViolation == 0 {
		return nil
	}
	return fmt.Errorf("chaos: finalizer %s removed before cleanup from %d objects: %s", c.finalizer, c.nViolation, strings.Join(c.violations, ", "))
}

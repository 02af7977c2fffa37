package phase_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/phase"
)

var sprintf = fmt.Sprintf

func (o *observer) Transition(machine string, from, to phase.Phase, inFrom time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, transition{string(from), string(to), inFrom.String()})
}

func (o *observer) take() []transition {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.got
	o.got = nil
	return out
}

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture is a machine over *Pipeline with scripted handlers.
type fixture struct {
	clock *clocktesting.FakeClock
	rec   *recorder
	obs   *observer
	m     *phase.Machine[*Pipeline]
	calls map[phase.Phase]int
	// next scripts what each phase's handler returns.
	next map[phase.Phase]func() (phase.Outcome, error)
}

func newFixture(t *testing.T, opts ...phase.Option) *fixture {
	t.Helper()
	f := &fixture{clock: clocktesting.NewFakeClock(t0), rec: &recorder{}, obs: &observer{},
		calls: map[phase.Phase]int{}, next: map[phase.Phase]func() (phase.Outcome, error){}}
	h := func(ctx context.Context, p *Pipeline) (phase.Outcome, error) {
		cur := phase.Phase(p.Status.Phase)
		f.calls[cur]++
		if fn := f.next[cur]; fn != nil {
			return fn()
		}
		return phase.Wait(), nil
	}
	opts = append([]phase.Option{phase.WithClock(f.clock), phase.WithEventRecorder(f.rec), phase.WithObserver(f.obs)}, opts...)
	m, err := phase.New[*Pipeline]("pipeline", opts...).
		Initial(phase.Pending).
		On(phase.Pending, h, phase.To(phase.Provisioning)).
		On(phase.Provisioning, h, phase.To(phase.Ready), phase.Timeout(5*time.Minute, phase.Degraded)).
		On(phase.Ready, h, phase.To("Migrating", phase.Degraded)).
		On("Migrating", h, phase.To(phase.Ready), phase.RequireApproval()).
		On(phase.Degraded, h, phase.To(phase.Provisioning, "Failed")).
		On("Failed", h, phase.As(phase.KindFailed)).
		OnDelete(phase.Deleting, h).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return f
}

func newPipeline() *Pipeline {
	return &Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-1", Generation: 1}}
}

func (f *fixture) step(t *testing.T, p *Pipeline) phase.Result {
	t.Helper()
	res, err := f.m.Step(context.Background(), p)
	if err != nil {
		t.Fatalf("Step: %v", err)
	}
	return res
}

func cond(t *testing.T, p *Pipeline, typ string) *metav1.Condition {
	t.Helper()
	return conditions.Get(p, typ)
}

func wantCond(t *testing.T, p *Pipeline, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := conditions.Get(p, typ)
	if c == nil {
		t.Fatalf("no %s condition; conditions: %+v", typ, p.Status.Conditions)
	}
	if c.Status != status || c.Reason != reason {
		t.Fatalf("%s = %s/%s (%q), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
	}
}

func wantNoCond(t *testing.T, p *Pipeline, typ string) {
	t.Helper()
	if c := conditions.Get(p, typ); c != nil {
		t.Fatalf("unexpected %s condition %+v", typ, c)
	}
}

// TestOneTransitionPerStep walks Pending → Provisioning → Ready and checks,
// at every Step, the persisted phase and time, the conditions of the phase's
// kind, events, the observer and the requeue.
func TestOneTransitionPerStep(t *testing.T) {
	f := newFixture(t)
	p := newPipeline()

	res := f.step(t, p)
	if !res.Transitioned || res.From != "" || res.Phase != phase.Pending || res.RequeueAfter != phase.DefaultTransitionRequeue {
		t.Fatalf("first step: %+v", res)
	}
	if f.calls[phase.Pending] != 0 {
		t.Fatal("entering the initial phase must not run its handler in the same Step")
	}
	if p.Status.Phase != "Pending" || !p.Status.PhaseTransitionTime.Time.Equal(t0) {
		t.Fatalf("status %+v", p.Status)
	}
	wantCond(t, p, conditions.Reconciling, metav1.ConditionTrue, "Pending")
	wantCond(t, p, conditions.Ready, metav1.ConditionFalse, "Pending")

	// Pending's handler waits: nothing changes, no requeue.
	before := p.DeepCopyObject()
	f.clock.Step(time.Minute)
	res = f.step(t, p)
	if res.Transitioned || res.RequeueAfter != 0 || f.calls[phase.Pending] != 1 {
		t.Fatalf("waiting step: %+v, calls %v", res, f.calls)
	}
	if d := cmp.Diff(before, p); d != "" {
		t.Fatalf("a steady Step changed the object:\n%s", d)
	}

	f.next[phase.Pending] = func() (phase.Outcome, error) { return phase.Next(phase.Provisioning), nil }
	f.clock.Step(30 * time.Second)
	res = f.step(t, p)
	if !res.Transitioned || res.From != phase.Pending || res.Phase != phase.Provisioning {
		t.Fatalf("transition step: %+v", res)
	}
	if f.calls[phase.Provisioning] != 0 {
		t.Fatal("the next phase's handler must not run in the Step that enters it")
	}
	if want := t0.Add(90 * time.Second); !p.Status.PhaseTransitionTime.Time.Equal(want) {
		t.Fatalf("entered at %v, want %v", p.Status.PhaseTransitionTime, want)
	}
	wantCond(t, p, conditions.Reconciling, metav1.ConditionTrue, "Provisioning")

	f.next[phase.Provisioning] = func() (phase.Outcome, error) {
		return phase.Next(phase.Ready).WithMessage("database answers"), nil
	}
	f.step(t, p)
	if p.Status.Phase != "Ready" {
		t.Fatalf("phase %q", p.Status.Phase)
	}
	wantCond(t, p, conditions.Ready, metav1.ConditionTrue, "Ready")
	wantNoCond(t, p, conditions.Reconciling)
	wantNoCond(t, p, conditions.Stalled)
	if c := cond(t, p, conditions.Ready); c.Message != "database answers" || c.ObservedGeneration != 1 {
		t.Fatalf("Ready %+v", c)
	}
	if p.Status.ObservedGeneration != 1 {
		t.Fatalf("observedGeneration %d", p.Status.ObservedGeneration)
	}

	wantEvents := []event{
		{"Normal", "PhaseTransition", "Transition", "pipeline: entered the initial phase Pending"},
		{"Normal", "PhaseTransition", "Transition", "pipeline: moved from Pending to Provisioning"},
		{"Normal", "PhaseTransition", "Transition", "database answers"},
	}
	if d := cmp.Diff(wantEvents, f.rec.take()); d != "" {
		t.Fatalf("events (-want +got):\n%s", d)
	}
	wantObs := []transition{{"", "Pending", "0s"}, {"Pending", "Provisioning", "1m30s"}, {"Provisioning", "Ready", "0s"}}
	if d := cmp.Diff(wantObs, f.obs.take()); d != "" {
		t.Fatalf("observer (-want +got):\n%s", d)
	}

	// Steady state in Ready: the object does not change at all.
	before = p.DeepCopyObject()
	f.clock.Step(time.Hour)
	if res := f.step(t, p); res.Transitioned || res.RequeueAfter != 0 {
		t.Fatalf("steady step %+v", res)
	}
	if d := cmp.Diff(before, p); d != "" {
		t.Fatalf("steady state changed the object:\n%s", d)
	}
	// A spec change (new generation) re-asserts the conditions for it.
	p.Generation = 2
	f.step(t, p)
	if c := cond(t, p, conditions.Ready); c.ObservedGeneration != 2 || c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready after generation bump %+v", c)
	}
}

func TestRefusedTransitionIsTerminal(t *testing.T) {
	f := newFixture(t)
	p := newPipeline()
	f.step(t, p) // → Pending
	f.next[phase.Pending] = func() (phase.Outcome, error) { return phase.Next(phase.Ready), nil }
	res, err := f.m.Step(context.Background(), p)
	if !errors.Is(err, phase.ErrTransitionRefused) || !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Fatalf("err = %v, want terminal ErrTransitionRefused", err)
	}
	if !strings.Contains(err.Error(), "ns/p") || !strings.Contains(err.Error(), "Pending -> Ready") {
		t.Fatalf("error does not name the object and transition: %v", err)
	}
	if res.Transitioned || p.Status.Phase != "Pending" {
		t.Fatalf("refused transition moved the object: %+v %q", res, p.Status.Phase)
	}
	wantCond(t, p, conditions.Stalled, metav1.ConditionTrue, phase.ReasonTransitionRefused)
	if msg := cond(t, p, conditions.Stalled).Message; !strings.Contains(msg, "declared targets of Pending: Provisioning") {
		t.Fatalf("Stalled message %q", msg)
	}
	if ev := f.rec.take(); ev[len(ev)-1].Reason != phase.ReasonTransitionRefused || ev[len(ev)-1].Type != "Warning" {
		t.Fatalf("events %+v", ev)
	}

	// Done() outside the deletion phase is refused the same way.
	f.next[phase.Pending] = func() (phase.Outcome, error) { return phase.Done(), nil }
	if _, err := f.m.Step(context.Background(), p); !errors.Is(err, phase.ErrTransitionRefused) {
		t.Fatalf("Done outside deletion: %v", err)
	}

	// Once the handler behaves, the phase's conditions come back.
	f.next[phase.Pending] = nil
	f.step(t, p)
	wantNoCond(t, p, conditions.Stalled)
	wantCond(t, p, conditions.Reconciling, metav1.ConditionTrue, "Pending")
}

func TestTimeout(t *testing.T) {
	f := newFixture(t)
	p := newPipeline()
	f.step(t, p)
	f.next[phase.Pending] = func() (phase.Outcome, error) { return phase.Next(phase.Provisioning), nil }
	f.step(t, p) // → Provisioning at t0
	f.rec.take()

	f.clock.Step(time.Minute)
	if res := f.step(t, p); res.RequeueAfter != 4*time.Minute {
		t.Fatalf("Wait in a phase with a timeout must requeue at the deadline, got %v", res.RequeueAfter)
	}
	f.next[phase.Provisioning] = func() (phase.Outcome, error) { return phase.RequeueAfter(30 * time.Second), nil }
	if res := f.step(t, p); res.RequeueAfter != 30*time.Second {
		t.Fatalf("RequeueAfter(30s) before the deadline: %v", res.RequeueAfter)
	}
	f.next[phase.Provisioning] = func() (phase.Outcome, error) { return phase.RequeueAfter(time.Hour), nil }
	if res := f.step(t, p); res.RequeueAfter != 4*time.Minute {
		t.Fatalf("RequeueAfter(1h) must be cut to the deadline: %v", res.RequeueAfter)
	}
	calls := f.calls[phase.Provisioning]

	f.clock.Step(4*time.Minute - time.Nanosecond)
	f.step(t, p)
	if p.Status.Phase != "Provisioning" {
		t.Fatal("timed out before the deadline")
	}
	f.clock.Step(time.Nanosecond)
	res := f.step(t, p)
	if !res.Transitioned || res.Phase != phase.Degraded || p.Status.Phase != "Degraded" {
		t.Fatalf("at the deadline: %+v", res)
	}
	if f.calls[phase.Provisioning] != calls+1 {
		t.Fatal("the handler must not run once the budget is spent")
	}
	wantCond(t, p, conditions.Degraded, metav1.ConditionTrue, phase.ReasonPhaseTimeout)
	wantCond(t, p, conditions.Ready, metav1.ConditionFalse, phase.ReasonPhaseTimeout)
	wantNoCond(t, p, conditions.Reconciling)
	msg := cond(t, p, conditions.Degraded).Message
	if !strings.Contains(msg, "phase Provisioning exceeded its timeout of 5m0s") {
		t.Fatalf("message %q does not name the budget", msg)
	}
	ev := f.rec.take()
	if len(ev) != 1 || ev[0].Type != "Warning" || ev[0].Reason != phase.ReasonPhaseTimeout {
		t.Fatalf("events %+v", ev)
	}
	if got := f.obs.take(); got[len(got)-1] != (transition{"Provisioning", "Degraded", "5m0s"}) {
		t.Fatalf("observer %+v", got)
	}
	// The timeout reason survives steady Steps in the new phase.
	f.step(t, p)
	wantCond(t, p, conditions.Degraded, metav1.ConditionTrue, phase.ReasonPhaseTimeout)
}

// TestTimeoutSurvivesRestart: the budget is measured from the persisted
// entered-at time, so a new machine (a restarted process) times out an
// object that has been in its phase too long without running the handler.
func TestTimeoutSurvivesRestart(t *testing.T) {
	f := newFixture(t)
	p := newPipeline()
	p.Status.Phase = "Provisioning"
	p.Status.PhaseTransitionTime = &metav1.Time{Time: t0.Add(-10 * time.Minute)}
	f.step(t, p)
	if p.Status.Phase != "Degraded" || f.calls[phase.Provisioning] != 0 {
		t.Fatalf("phase %q, calls %v", p.Status.Phase, f.calls)
	}
}

func TestMissingEnteredAtStartsTheBudgetNow(t *testing.T) {
	f := newFixture(t)
	p := newPipeline()
	p.Status.Phase = "Provisioning"
	res := f.step(t, p)
	if res.Transitioned || p.Status.PhaseTransitionTime == nil || !p.Status.PhaseTransitionTime.Time.Equal(t0) {
		t.Fatalf("res %+v status %+v", res, p.Status)
	}
	if res.RequeueAfter != 5*time.Minute {
		t.Fatalf("requeue %v", res.RequeueAfter)
	}
}

func TestApprovalGuard(t *testing.T) {
	f := newFixture(t)
	p := newPipeline()
	p.Status.Phase = "Ready"
	p.Status.PhaseTransitionTime = &metav1.Time{Time: t0}
	f.next[phase.Ready] = func() (phase.Outcome, error) { return phase.Next("Migrating"), nil }

	res := f.step(t, p)
	if res.Transitioned || !res.AwaitingApproval || res.RequeueAfter != 0 || p.Status.Phase != "Ready" {
		t.Fatalf("blocked step: %+v phase %q", res, p.Status.Phase)
	}
	wantCond(t, p, conditions.Reconciling, metav1.ConditionTrue, phase.ReasonAwaitingApproval)
	msg := cond(t, p, conditions.Reconciling).Message
	if !strings.Contains(msg, "phase.opkit.dev/approve=Migrating") || !strings.Contains(msg, "Ready -> Migrating") {
		t.Fatalf("message %q does not say which annotation to add", msg)
	}
	if ev := f.rec.take(); len(ev) != 1 || ev[0].Reason != phase.ReasonAwaitingApproval {
		t.Fatalf("events %+v", ev)
	}

	// Repeated Steps while blocked change nothing and emit nothing: no loop.
	before := p.DeepCopyObject()
	for range 3 {
		if res := f.step(t, p); res.RequeueAfter != 0 || !res.AwaitingApproval {
			t.Fatalf("blocked step %+v", res)
		}
	}
	if d := cmp.Diff(before, p); d != "" {
		t.Fatalf("blocked Steps changed the object:\n%s", d)
	}
	if ev := f.rec.take(); len(ev) != 0 {
		t.Fatalf("blocked Steps emitted %+v", ev)
	}

	// An approval for another phase does not count.
	p.Annotations = map[string]string{phase.ApproveAnnotation: "Deleting"}
	if res := f.step(t, p); !res.AwaitingApproval {
		t.Fatal("approval for another phase accepted")
	}
	p.Annotations[phase.ApproveAnnotation] = "Migrating"
	res = f.step(t, p)
	if !res.Transitioned || p.Status.Phase != "Migrating" || res.AwaitingApproval {
		t.Fatalf("approved step %+v", res)
	}
	wantCond(t, p, conditions.Reconciling, metav1.ConditionTrue, "Migrating")
}

func TestUnknownPhaseRestartsFromInitial(t *testing.T) {
	for _, bad := range []string{"Bogus", "Deleting"} {
		t.Run(bad, func(t *testing.T) {
			f := newFixture(t)
			p := newPipeline()
			p.Status.Phase = PipelinePhase(bad)
			p.Status.PhaseTransitionTime = &metav1.Time{Time: t0.Add(-time.Hour)}
			res := f.step(t, p)
			if !res.Transitioned || res.From != phase.Phase(bad) || p.Status.Phase != "Pending" {
				t.Fatalf("res %+v phase %q", res, p.Status.Phase)
			}
			wantCond(t, p, conditions.Reconciling, metav1.ConditionTrue, phase.ReasonUnknownPhase)
			msg := cond(t, p, conditions.Reconciling).Message
			if !strings.Contains(msg, `"`+bad+`"`) || !strings.Contains(msg, "restarted from the initial phase Pending") {
				t.Fatalf("message %q", msg)
			}
			if ev := f.rec.take(); len(ev) != 1 || ev[0].Type != "Warning" || ev[0].Reason != phase.ReasonUnknownPhase {
				t.Fatalf("events %+v", ev)
			}
			// The recovery is one transition; the next Step is ordinary.
			if res := f.step(t, p); res.Transitioned || f.calls[phase.Pending] != 1 {
				t.Fatalf("after recovery %+v calls %v", res, f.calls)
			}
		})
	}
}

func TestDeletionHandOver(t *testing.T) {
	f := newFixture(t)
	p := newPipeline()
	p.Status.Phase = "Provisioning"
	p.Status.PhaseTransitionTime = &metav1.Time{Time: t0}
	now := metav1.NewTime(t0)
	p.DeletionTimestamp = &now

	res := f.step(t, p)
	if !res.Deleting || res.DeletionHandled || !res.Transitioned || p.Status.Phase != "Deleting" {
		t.Fatalf("first deleting step %+v phase %q", res, p.Status.Phase)
	}
	if f.calls[phase.Provisioning] != 0 || f.calls[phase.Deleting] != 0 {
		t.Fatalf("handlers ran on the way into deletion: %v", f.calls)
	}
	wantCond(t, p, conditions.Reconciling, metav1.ConditionTrue, "Deleting")

	f.next[phase.Deleting] = func() (phase.Outcome, error) { return phase.RequeueAfter(time.Second).WithMessage("backing up"), nil }
	res = f.step(t, p)
	if !res.Deleting || res.DeletionHandled || res.RequeueAfter != time.Second {
		t.Fatalf("backup in progress %+v", res)
	}
	if c := cond(t, p, conditions.Reconciling); c.Message != "backing up" {
		t.Fatalf("Reconciling %+v", c)
	}
	f.next[phase.Deleting] = func() (phase.Outcome, error) { return phase.Next(phase.Ready), nil }
	if _, err := f.m.Step(context.Background(), p); !errors.Is(err, phase.ErrTransitionRefused) {
		t.Fatalf("leaving the deletion phase: %v", err)
	}
	f.next[phase.Deleting] = func() (phase.Outcome, error) { return phase.Done(), nil }
	res = f.step(t, p)
	if !res.Deleting || !res.DeletionHandled || res.RequeueAfter != 0 {
		t.Fatalf("done %+v", res)
	}
	wantCond(t, p, conditions.Reconciling, metav1.ConditionTrue, phase.ReasonDeletionHandled)
	// Handled is persisted in the condition: the handler does not run again.
	calls := f.calls[phase.Deleting]
	res = f.step(t, p)
	if !res.DeletionHandled || f.calls[phase.Deleting] != calls {
		t.Fatalf("after done %+v, calls %d → %d", res, calls, f.calls[phase.Deleting])
	}
}

func TestDeletionWithoutDeletionPhase(t *testing.T) {
	calls := 0
	m, err := phase.New[*Pipeline]("plain").Initial(phase.Pending).
		On(phase.Pending, func(context.Context, *Pipeline) (phase.Outcome, error) { calls++; return phase.Wait(), nil }).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	p := newPipeline()
	p.Status.Phase = "Pending"
	now := metav1.Now()
	p.DeletionTimestamp = &now
	before := p.DeepCopyObject()
	res, err := m.Step(context.Background(), p)
	if err != nil || !res.Deleting || !res.DeletionHandled || res.Transitioned || calls != 0 {
		t.Fatalf("res %+v err %v calls %d", res, err, calls)
	}
	if d := cmp.Diff(before, p); d != "" {
		t.Fatalf("object changed:\n%s", d)
	}
}

func TestHandlerErrorsAndPanics(t *testing.T) {
	f := newFixture(t)
	p := newPipeline()
	f.step(t, p)
	f.next[phase.Pending] = func() (phase.Outcome, error) { return phase.Outcome{}, errors.New("backend unavailable") }
	res, err := f.m.Step(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "ns/p") || !strings.Contains(err.Error(), "backend unavailable") || res.Transitioned {
		t.Fatalf("err %v res %+v", err, res)
	}
	wantCond(t, p, conditions.Reconciling, metav1.ConditionTrue, "TransientError")

	f.next[phase.Pending] = func() (phase.Outcome, error) {
		return phase.Outcome{}, reconcile.TerminalError(errors.New("bad spec"))
	}
	if _, err := f.m.Step(context.Background(), p); !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Fatalf("terminal handler error lost its class: %v", err)
	}
	wantCond(t, p, conditions.Stalled, metav1.ConditionTrue, "TerminalError")

	f.next[phase.Pending] = func() (phase.Outcome, error) { panic("boom") }
	if _, err := f.m.Step(context.Background(), p); !errors.Is(err, phase.ErrHandlerPanic) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("panic: %v", err)
	}
	if p.Status.Phase != "Pending" {
		t.Fatalf("phase %q", p.Status.Phase)
	}
}

// TestStaleRead: a requeue that reads the object from before the machine's
// own transition (a cache that is behind) runs no handler; after the window
// the persisted state wins again.
func TestStaleRead(t *testing.T) {
	f := newFixture(t, phase.WithStaleReadWindow(2*time.Second))
	p := newPipeline()
	f.step(t, p)
	f.next[phase.Pending] = func() (phase.Outcome, error) { return phase.Next(phase.Provisioning), nil }
	stale := p.DeepCopyObject().(*Pipeline)
	f.step(t, p) // → Provisioning
	calls := f.calls[phase.Pending]

	res := f.step(t, stale.DeepCopyObject().(*Pipeline))
	if !res.StaleRead || res.RequeueAfter <= 0 || res.Transitioned || f.calls[phase.Pending] != calls {
		t.Fatalf("stale read %+v, calls %d → %d", res, calls, f.calls[phase.Pending])
	}
	// A fresh read confirms the transition and is handled normally.
	if res := f.step(t, p); res.StaleRead || f.calls[phase.Provisioning] != 1 {
		t.Fatalf("fresh read %+v", res)
	}
	// Another object (other UID) is never affected.
	other := stale.DeepCopyObject().(*Pipeline)
	other.UID = types.UID("uid-2")
	if res := f.step(t, other); res.StaleRead {
		t.Fatal("other object treated as stale")
	}
	// Transition again; past the window the stale state is believed (the
	// caller evidently failed to persist).
	f.next[phase.Provisioning] = func() (phase.Outcome, error) { return phase.Next(phase.Ready), nil }
	stale = p.DeepCopyObject().(*Pipeline)
	f.step(t, p)
	f.clock.Step(2 * time.Second)
	if res := f.step(t, stale); res.StaleRead {
		t.Fatal("stale-read window did not expire")
	}
}

func TestObjectLayouts(t *testing.T) {
	ctx := context.Background()
	h := func(context.Context, *unstructured.Unstructured) (phase.Outcome, error) {
		return phase.Next(phase.Ready), nil
	}
	clk := clocktesting.NewFakeClock(t0)
	mu, err := phase.New[*unstructured.Unstructured]("u", phase.WithClock(clk),
		phase.WithStatusFields("stage", "stageSince")).
		Initial(phase.Pending).On(phase.Pending, h, phase.To(phase.Ready)).On(phase.Ready, nil).Build()
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "u", "namespace": "ns"}}}
	for range 2 {
		if _, err := mu.Step(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	st, _, _ := unstructured.NestedString(u.Object, "status", "stage")
	since, _, _ := unstructured.NestedString(u.Object, "status", "stageSince")
	if st != "Ready" || since != "2030-01-02T03:04:05Z" || !conditions.IsTrue(u, conditions.Ready) {
		t.Fatalf("unstructured status %v", u.Object["status"])
	}
	if p, at, err := mu.Current(u); err != nil || p != phase.Ready || !at.Equal(t0) {
		t.Fatalf("Current = %q %v %v", p, at, err)
	}
	u.Object["status"] = "garbage"
	if _, err := mu.Step(ctx, u); !errors.Is(err, phase.ErrNoPhaseField) {
		t.Fatalf("malformed unstructured status: %v", err)
	}

	mc, err := phase.New[*custom]("c", phase.WithClock(clk)).Initial(phase.Pending).On(phase.Pending, nil).Build()
	if err != nil {
		t.Fatal(err)
	}
	c := &custom{}
	if _, err := mc.Step(ctx, c); err != nil {
		t.Fatal(err)
	}
	if c.State.Step != "Pending" || !c.State.Since.Time.Equal(t0) || !conditions.IsTrue(c, conditions.Reconciling) {
		t.Fatalf("accessor object %+v", c.State)
	}

	mn, err := phase.New[*noPhase]("n").Initial(phase.Pending).On(phase.Pending, nil).Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = mn.Step(ctx, &noPhase{})
	if !errors.Is(err, phase.ErrNoPhaseField) || !strings.Contains(err.Error(), `"phase"`) {
		t.Fatalf("missing fields: %v", err)
	}
	if _, err := mn.Step(ctx, nil); err == nil {
		t.Fatal("nil object accepted")
	}
	var nilPtr *noPhase
	if _, err := mn.Step(ctx, nilPtr); err == nil {
		t.Fatal("nil pointer accepted")
	}
}

func TestBuildValidation(t *testing.T) {
	h := func(context.Context, *Pipeline) (phase.Outcome, error) { return phase.Wait(), nil }
	cases := []struct {
		name  string
		build func() error
		want  []string
	}{
		{"no initial", func() error {
			_, err := phase.New[*Pipeline]("m").On(phase.Pending, h).Build()
			return err
		}, []string{"no initial phase"}},
		{"undeclared initial", func() error {
			_, err := phase.New[*Pipeline]("m").Initial("Nope").On(phase.Pending, h).Build()
			return err
		}, []string{`initial phase "Nope" is not declared`}},
		{"undeclared target and timeout target", func() error {
			_, err := phase.New[*Pipeline]("m").Initial(phase.Pending).
				On(phase.Pending, h, phase.To("Ghost"), phase.Timeout(time.Minute, "Void")).Build()
			return err
		}, []string{`phase "Pending": target "Ghost" is not declared`, `timeout target "Void" is not declared`}},
		{"bad timeout, duplicate, bad name, empty machine name", func() error {
			_, err := phase.New[*Pipeline]("").Initial(phase.Pending).
				On(phase.Pending, h, phase.Timeout(0, phase.Pending)).
				On(phase.Pending, h).
				On("bad name", h).Build()
			return err
		}, []string{"machine name is empty", `timeout 0s is not positive`, `phase "Pending" declared twice`, `phase name "bad name"`}},
		{"deletion phase misuse", func() error {
			_, err := phase.New[*Pipeline]("m").Initial(phase.Pending).
				On(phase.Pending, h, phase.To(phase.Deleting)).
				OnDelete(phase.Deleting, h).OnDelete("Gone", h).Build()
			return err
		}, []string{`target "Deleting" is the deletion phase`, `both declared with OnDelete`}},
		{"unreachable", func() error {
			_, err := phase.New[*Pipeline]("m").Initial(phase.Pending).
				On(phase.Pending, h).On("Island", h).Build()
			return err
		}, []string{`phase "Island" cannot be reached from the initial phase "Pending"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.build()
			if !errors.Is(err, phase.ErrInvalidMachine) {
				t.Fatalf("err = %v, want ErrInvalidMachine", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestRenderDeterministic: rendering depends only on the declaration, so
// building the same declaration again renders byte-identical text.
func TestRenderDeterministic(t *testing.T) {
	first := database()
	for range 20 {
		m := database()
		if m.Mermaid() != first.Mermaid() || m.DOT() != first.DOT() {
			t.Fatal("rendering differs between identical declarations")
		}
	}
	if got := first.Targets(phase.Provisioning); !cmp.Equal(got, []phase.Phase{phase.Ready, phase.Degraded}) {
		t.Fatalf("Targets(Provisioning) = %v", got)
	}
	if got := first.Phases(); len(got) != 7 || got[0] != phase.Pending || got[6] != phase.Deleting {
		t.Fatalf("Phases() = %v", got)
	}
}

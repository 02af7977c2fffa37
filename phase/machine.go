package phase

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/conditions"
)

// Result is what one [Machine.Step] did and what the caller should do next.
type Result struct {
	// Result is what Reconcile should return when Step returned no error:
	// RequeueAfter is the transition requeue after a transition, the
	// handler's RequeueAfter duration or the phase's timeout deadline (whichever
	// comes first) while staying, and zero when the machine waits for a
	// watch event (including while awaiting approval without a timeout).
	reconcile.Result
	// From is the persisted phase Step started from ("" for a new object).
	From Phase
	// Phase is the phase the object is in now (in memory); equal to From
	// unless Transitioned.
	Phase Phase
	// Transitioned reports that Step moved the object to a new phase (or
	// re-entered the same one); the caller must persist the status.
	Transitioned bool
	// Deleting reports that the object's deletionTimestamp is set.
	Deleting bool
	// DeletionHandled reports, for a Deleting object, that the machine is done
	// with it: the deletion phase's handler has returned [Done] (now or
	// earlier), or the machine declares no deletion phase. Only then should
	// the caller run finalizer cleanup and remove its finalizer.
	DeletionHandled bool
	// AwaitingApproval reports that a transition is blocked until the object
	// carries [ApproveAnnotation] with the target phase as value.
	AwaitingApproval bool
	// StaleRead reports that the object read is older than this machine's
	// own last transition of it (see [WithStaleReadWindow]); nothing was done.
	StaleRead bool
}

// Machine runs a declared state machine over objects of type T. It is safe
// for concurrent use by the workers of one controller; build it once with
// [Builder.Build] and share it.
type Machine[T client.Object] struct {
	c        *machineCore
	handlers map[Phase]Handler[T]
}

// machineCore is the part of a machine that does not depend on T.
type machineCore struct {
	name     string
	opts     options
	initial  Phase
	order    []*phaseSpec
	specs    map[Phase]*phaseSpec
	deletion *phaseSpec

	mu     sync.Mutex
	recent map[types.UID]recentTransition
}

// recentTransition is this machine's last transition of one object, kept
// for at most the stale-read window.
type recentTransition struct {
	phase Phase
	at    time.Time
}

func newMachine[T client.Object](b *Builder[T], specs map[Phase]*phaseSpec, deletion *phaseSpec) *Machine[T] {
	o := options{
		clock:      clock.RealClock{},
		phaseField: DefaultPhaseField, timeField: DefaultTransitionTimeField,
		transitionRequeue: DefaultTransitionRequeue, staleWindow: DefaultStaleReadWindow,
	}
	for _, opt := range b.opts {
		opt(&o)
	}
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
	if o.phaseField == "" {
		o.phaseField = DefaultPhaseField
	}
	if o.timeField == "" {
		o.timeField = DefaultTransitionTimeField
	}
	if o.transitionRequeue <= 0 {
		o.transitionRequeue = DefaultTransitionRequeue
	}
	handlers := make(map[Phase]Handler[T], len(b.handlers))
	for p, h := range b.handlers {
		handlers[p] = h
	}
	return &Machine[T]{
		c: &machineCore{
			name: b.name, opts: o, initial: b.initial, order: slices.Clone(b.phases),
			specs: specs, deletion: deletion, recent: map[types.UID]recentTransition{},
		},
		handlers: handlers,
	}
}

// Name returns the machine's name.
func (m *Machine[T]) Name() string { return m.c.name }

// Initial returns the entry phase.
func (m *Machine[T]) Initial() Phase { return m.c.initial }

// Phases returns the declared phases in declaration order.
func (m *Machine[T]) Phases() []Phase {
	out := make([]Phase, 0, len(m.c.order))
	for _, s := range m.c.order {
		out = append(out, s.name)
	}
	return out
}

// Targets returns the declared targets of p (in declaration order, the
// timeout target last when it is not also a declared target), or nil for an
// undeclared phase.
func (m *Machine[T]) Targets(p Phase) []Phase {
	s := m.c.specs[p]
	if s == nil {
		return nil
	}
	out := slices.Clone(s.targets)
	if s.hasTimeout && !slices.Contains(out, s.timeoutTarget) {
		out = append(out, s.timeoutTarget)
	}
	return out
}

// Current returns obj's persisted phase and the time it was entered ("" and
// the zero time for an object that has not entered a phase). It does not
// check that the phase is declared.
func (m *Machine[T]) Current(obj T) (Phase, time.Time, error) {
	if isNil(obj) {
		return "", time.Time{}, errors.New("phase: nil object")
	}
	f, _, err := m.c.fieldsFor(obj)
	if err != nil {
		return "", time.Time{}, m.c.wrap(obj, err)
	}
	p, t, err := f.get()
	if err != nil {
		return "", time.Time{}, m.c.wrap(obj, err)
	}
	return p, t, nil
}

// Step advances obj by at most one transition, in memory. The caller
// persists obj's status afterwards (e.g. with conditions.StatusPatcher),
// whatever Step returned, and returns Result.Result (or the error) from
// Reconcile. In order:
//
//  1. Stale read: if this machine moved obj (same UID) to another phase less
//     than the stale-read window ago, the read is older than that transition:
//     nothing happens, Result.StaleRead, short requeue.
//  2. Deletion: with deletionTimestamp set, Result.Deleting. Without a
//     deletion phase, Result.DeletionHandled and nothing else. Otherwise the
//     object moves into the deletion phase (one transition, no guard); once
//     there, its handler runs until it returns [Done], which sets
//     Reconciling=True with reason DeletionHandled and Result.DeletionHandled.
//  3. No persisted phase: the object enters the initial phase.
//  4. Undeclared persisted phase (hand-edited, or written by another version):
//     the object moves to the initial phase with reason UnknownPhase and a
//     Warning event naming the value — a restart from the entry phase, whose
//     handler must cope with whatever exists.
//  5. Missing entered-at time: it is set to now (no transition).
//  6. Timeout: when the phase's budget is spent, the object moves to the
//     timeout target with reason PhaseTimeout; the handler does not run.
//  7. The phase's handler runs. An error keeps the phase: it is recorded with
//     conditions.ApplyOutcome and returned wrapped with the object's
//     namespace/name (a reconcile.TerminalError stays terminal). [Next] to a
//     declared target makes the transition; to anything else (or [Done]
//     outside the deletion phase) it is refused: Stalled=True with reason
//     TransitionRefused naming the transition, a Warning event, and an error
//     wrapping [ErrTransitionRefused] inside reconcile.TerminalError. [RequeueAfter] and
//     [Wait] keep the phase.
//
// A transition into a phase declared with [RequireApproval] happens only
// while obj carries [ApproveAnnotation] set to that phase; otherwise obj
// stays, Reconciling=True with reason AwaitingApproval says which annotation
// to add, Result.AwaitingApproval is set, and there is no requeue (the
// annotation change is the event that resumes; the controller must not
// filter it out). A staying phase with a timeout still requeues at its deadline.
//
// A transition sets the phase and its entered-at time (the clock, truncated to
// whole seconds as the API stores it), writes the new phase's conditions (see
// [Kind]), emits a Normal PhaseTransition event (or a more specific one),
// calls the [Observer], and asks for a requeue after the transition requeue.
// Only one transition happens per Step, so the persisted phase always names a
// phase whose predecessors' handlers have completed.
//
// While staying, the phase's conditions are only re-asserted when they do not
// match its kind or describe an older generation, or when the handler gave a
// message with [Outcome.WithMessage]: a steady state changes nothing, so the
// status patch sends nothing.
func (m *Machine[T]) Step(ctx context.Context, obj T) (Result, error) {
	if isNil(obj) {
		return Result{}, errors.New("phase: Step on a nil object")
	}
	c := m.c
	f, st, err := c.fieldsFor(obj)
	if err != nil {
		return Result{}, c.wrap(obj, err)
	}
	cur, entered, err := f.get()
	if err != nil {
		return Result{}, c.wrap(obj, err)
	}
	s := &step[T]{m: m, obj: obj, st: st, f: f, cur: cur, entered: entered, now: c.opts.clock.Now(),
		res: Result{From: cur, Phase: cur}}
	if c.staleRead(obj.GetUID(), cur, s.now) {
		s.res.StaleRead = true
		s.res.RequeueAfter = staleRetry
		return s.res, nil
	}
	if obj.GetDeletionTimestamp() != nil {
		return s.deleting(ctx)
	}
	if cur == "" {
		return s.transition(c.initial, move{reason: string(c.initial),
			message: fmt.Sprintf("%s: entered the initial phase %s", c.name, c.initial)})
	}
	spec := c.specs[cur]
	if spec == nil || spec.deletion {
		why := "is not a declared phase"
		if spec != nil {
			why = "is the deletion phase but the object is not being deleted"
		}
		msg := fmt.Sprintf("%s: status.%s %q %s; restarted from the initial phase %s (its handler runs again and must cope with what exists)",
			c.name, c.opts.phaseField, cur, why, c.initial)
		return s.transition(c.initial, move{reason: ReasonUnknownPhase, message: msg,
			eventType: corev1.EventTypeWarning, eventReason: ReasonUnknownPhase, noGuard: true})
	}
	if entered.IsZero() {
		s.entered = s.enteredNow()
		if err := f.set(cur, s.entered); err != nil {
			return s.res, c.wrap(obj, err)
		}
	}
	if spec.hasTimeout {
		if deadline := s.entered.Add(spec.timeout); !s.now.Before(deadline) {
			msg := fmt.Sprintf("%s: phase %s exceeded its timeout of %s (entered at %s); moved to %s",
				c.name, cur, spec.timeout, s.entered.UTC().Format(time.RFC3339), spec.timeoutTarget)
			return s.transition(spec.timeoutTarget, move{reason: ReasonPhaseTimeout, message: msg,
				eventType: corev1.EventTypeWarning, eventReason: ReasonPhaseTimeout})
		}
	}
	out, herr := m.run(ctx, spec, obj)
	if herr != nil {
		return s.handlerError(herr)
	}
	switch out.kind {
	case outcomeNext:
		if !slices.Contains(spec.targets, out.next) {
			return s.refuse(out, spec)
		}
		msg := out.message
		if msg == "" {
			msg = fmt.Sprintf("%s: moved from %s to %s", c.name, cur, out.next)
		}
		return s.transition(out.next, move{reason: string(out.next), message: msg})
	case outcomeDone:
		return s.refuse(out, spec)
	}
	if err := s.assertKind(spec, out.message); err != nil {
		return s.res, err
	}
	s.res.RequeueAfter = s.untilDeadline(spec, out.after)
	return s.res, nil
}

// step is the state of one Step call.
type step[T client.Object] struct {
	m       *Machine[T]
	obj     T
	st      *conditions.Status
	f       *fields
	cur     Phase
	entered time.Time
	now     time.Time
	res     Result
}

// move describes a transition.
type move struct {
	reason      string
	message     string
	eventType   string // default Normal
	eventReason string // default EventPhaseTransition
	noGuard     bool
}

func (s *step[T]) copts() conditions.ClockOption { return conditions.WithClock(s.m.c.opts.clock) }

// enteredNow is the clock's time as the API stores it (whole seconds), so the
// in-memory entered-at time equals the persisted one.
func (s *step[T]) enteredNow() time.Time { return metav1.NewTime(s.now).Rfc3339Copy().Time }

func (s *step[T]) transition(to Phase, mv move) (Result, error) {
	c := s.m.c
	spec := c.specs[to]
	if spec.approval && !mv.noGuard && s.obj.GetAnnotations()[ApproveAnnotation] != string(to) {
		return s.awaitApproval(to)
	}
	if err := s.applyKind(spec.kind, mv.reason, mv.message, true); err != nil {
		return s.res, err
	}
	entered := s.enteredNow()
	if err := s.f.set(to, entered); err != nil {
		return s.res, c.wrap(s.obj, err)
	}
	eventType, eventReason := mv.eventType, mv.eventReason
	if eventType == "" {
		eventType = corev1.EventTypeNormal
	}
	if eventReason == "" {
		eventReason = EventPhaseTransition
	}
	s.event(eventType, eventReason, "Transition", mv.message)
	var inFrom time.Duration
	if s.cur != "" && !s.entered.IsZero() {
		inFrom = max(s.now.Sub(s.entered), 0)
	}
	for _, obs := range c.opts.observers {
		obs.Transition(c.name, s.cur, to, inFrom)
	}
	c.remember(s.obj.GetUID(), to, s.now)
	s.res.Phase, s.res.Transitioned = to, true
	s.res.RequeueAfter = c.opts.transitionRequeue
	return s.res, nil
}

func (s *step[T]) awaitApproval(to Phase) (Result, error) {
	c := s.m.c
	from := s.cur
	if from == "" {
		from = "(none)"
	}
	ref := strings.ToLower(s.obj.GetObjectKind().GroupVersionKind().Kind)
	if ref == "" {
		ref = "<kind>"
	}
	ref += "/" + s.obj.GetName()
	if ns := s.obj.GetNamespace(); ns != "" {
		ref = "-n " + ns + " " + ref
	}
	msg := fmt.Sprintf("%s: transition %s -> %s requires approval: add the annotation %s=%s (kubectl annotate %s %s=%s)",
		c.name, from, to, ApproveAnnotation, to, ref, ApproveAnnotation, to)
	prev := s.st.Get(conditions.Reconciling)
	if err := s.st.MarkReconciling(ReasonAwaitingApproval, msg, s.copts()); err != nil {
		return s.res, c.wrap(s.obj, err)
	}
	if prev == nil || prev.Reason != ReasonAwaitingApproval || prev.Message != msg {
		s.event(corev1.EventTypeNormal, ReasonAwaitingApproval, "Guard", msg)
	}
	s.res.AwaitingApproval = true
	if spec := c.specs[s.cur]; spec != nil {
		s.res.RequeueAfter = s.untilDeadline(spec, 0)
	}
	return s.res, nil
}

func (s *step[T]) deleting(ctx context.Context) (Result, error) {
	c := s.m.c
	s.res.Deleting = true
	d := c.deletion
	if d == nil {
		s.res.DeletionHandled = true
		return s.res, nil
	}
	if s.cur != d.name {
		from := s.cur
		if from == "" {
			from = "(none)"
		}
		return s.transition(d.name, move{reason: string(d.name), noGuard: true,
			message: fmt.Sprintf("%s: the object is being deleted; moved from %s to %s", c.name, from, d.name)})
	}
	if r := s.st.Get(conditions.Reconciling); r != nil && r.Status == metav1.ConditionTrue && r.Reason == ReasonDeletionHandled {
		s.res.DeletionHandled = true
		return s.res, nil
	}
	out, herr := s.m.run(ctx, d, s.obj)
	if herr != nil {
		return s.handlerError(herr)
	}
	switch out.kind {
	case outcomeDone:
		msg := out.message
		if msg == "" {
			msg = fmt.Sprintf("%s: the %s handler has finished; finalizers may proceed", c.name, d.name)
		}
		if err := s.st.MarkReconciling(ReasonDeletionHandled, msg, s.copts()); err != nil {
			return s.res, c.wrap(s.obj, err)
		}
		s.event(corev1.EventTypeNormal, ReasonDeletionHandled, "Delete", msg)
		s.res.DeletionHandled = true
		return s.res, nil
	case outcomeNext:
		return s.refuse(out, d)
	}
	if err := s.assertKind(d, out.message); err != nil {
		return s.res, err
	}
	s.res.RequeueAfter = out.after
	return s.res, nil
}

func (s *step[T]) handlerError(herr error) (Result, error) {
	c := s.m.c
	err := fmt.Errorf("phase: %s: machine %s, phase %s: %w", objectKey(s.obj), c.name, s.cur, herr)
	if aerr := s.st.ApplyOutcome(herr, s.copts()); aerr != nil {
		err = errors.Join(err, c.wrap(s.obj, aerr))
	}
	return s.res, err
}

func (s *step[T]) refuse(out Outcome, spec *phaseSpec) (Result, error) {
	c := s.m.c
	declared := "none"
	if len(spec.targets) > 0 {
		names := make([]string, len(spec.targets))
		for i, t := range spec.targets {
			names[i] = string(t)
		}
		declared = strings.Join(names, ", ")
	}
	var msg string
	switch {
	case out.kind == outcomeDone:
		msg = fmt.Sprintf("%s: phase %s handler returned Done(), which only the deletion phase may return", c.name, s.cur)
	case spec.deletion:
		msg = fmt.Sprintf("%s: deletion phase %s handler returned %s; the deletion phase has no transitions", c.name, s.cur, out)
	default:
		msg = fmt.Sprintf("%s: transition %s -> %s refused: not declared (declared targets of %s: %s)",
			c.name, s.cur, out.next, s.cur, declared)
	}
	err := reconcile.TerminalError(fmt.Errorf("phase: %s: %w: %s", objectKey(s.obj), ErrTransitionRefused, msg))
	if merr := s.st.MarkStalled(ReasonTransitionRefused, msg, s.copts()); merr != nil {
		return s.res, errors.Join(err, c.wrap(s.obj, merr))
	}
	s.event(corev1.EventTypeWarning, ReasonTransitionRefused, "Transition", msg)
	return s.res, err
}

// untilDeadline combines a handler's requested requeue (0: none) with the
// phase's timeout deadline.
func (s *step[T]) untilDeadline(spec *phaseSpec, after time.Duration) time.Duration {
	if !spec.hasTimeout || s.entered.IsZero() {
		return after
	}
	rem := s.entered.Add(spec.timeout).Sub(s.now)
	if rem <= 0 {
		return after
	}
	if after <= 0 || rem < after {
		return rem
	}
	return after
}

// assertKind re-writes the phase's conditions while staying: always when
// the handler gave a message, otherwise only when they do not match.
func (s *step[T]) assertKind(spec *phaseSpec, message string) error {
	if message != "" {
		return s.applyKind(spec.kind, string(spec.name), message, true)
	}
	return s.applyKind(spec.kind, string(spec.name), fmt.Sprintf("%s: in phase %s", s.m.c.name, spec.name), false)
}

func (s *step[T]) applyKind(k Kind, reason, message string, force bool) error {
	obj, st := s.obj, s.st
	if !force && satisfied(st, obj.GetGeneration(), k) {
		return nil
	}
	o := s.copts()
	var err error
	clearDegraded := func() error {
		if st.IsTrue(conditions.Degraded) {
			return st.Set(metav1.Condition{Type: conditions.Degraded, Status: metav1.ConditionFalse, Reason: reason, Message: message}, o)
		}
		return nil
	}
	notReady := metav1.Condition{Type: conditions.Ready, Status: metav1.ConditionFalse, Reason: reason, Message: message}
	switch k {
	case KindProgressing:
		if err = st.Set(notReady, o); err == nil {
			if err = st.MarkReconciling(reason, message, o); err == nil {
				err = clearDegraded()
			}
		}
	case KindReady:
		if err = st.MarkReady(reason, message, o); err == nil {
			err = clearDegraded()
		}
	case KindDegraded:
		if err = st.Set(metav1.Condition{Type: conditions.Degraded, Status: metav1.ConditionTrue, Reason: reason, Message: message}, o); err == nil {
			if err = st.Set(notReady, o); err == nil {
				// Success removes Reconciling and Stalled and records observedGeneration.
				err = st.ApplyOutcome(nil, o)
			}
		}
	case KindFailed:
		err = st.MarkStalled(reason, message, o)
	}
	if err != nil {
		return s.m.c.wrap(obj, err)
	}
	return nil
}

// satisfied reports whether the object's standard conditions already say what kind
// k says, for generation gen.
func satisfied(st *conditions.Status, gen int64, k Kind) bool {
	is := func(t string, want metav1.ConditionStatus) bool {
		c := st.Get(t)
		return c != nil && c.Status == want && c.ObservedGeneration == gen
	}
	absent := func(t string) bool { return st.Get(t) == nil }
	notDegraded := !st.IsTrue(conditions.Degraded)
	switch k {
	case KindProgressing:
		return is(conditions.Reconciling, metav1.ConditionTrue) && is(conditions.Ready, metav1.ConditionFalse) &&
			absent(conditions.Stalled) && notDegraded
	case KindReady:
		return is(conditions.Ready, metav1.ConditionTrue) && absent(conditions.Reconciling) && absent(conditions.Stalled) && notDegraded
	case KindDegraded:
		return is(conditions.Degraded, metav1.ConditionTrue) && is(conditions.Ready, metav1.ConditionFalse) &&
			absent(conditions.Reconciling) && absent(conditions.Stalled)
	case KindFailed:
		return is(conditions.Stalled, metav1.ConditionTrue) && is(conditions.Ready, metav1.ConditionFalse) && absent(conditions.Reconciling)
	}
	return false
}

func (s *step[T]) event(eventType, reason, action, note string) {
	if r := s.m.c.opts.recorder; r != nil {
		r.Eventf(s.obj, nil, eventType, reason, action, "%s", note)
	}
}

// run calls the phase's handler, turning a panic into an error. A nil
// handler waits (or, in the deletion phase, is done at once).
func (m *Machine[T]) run(ctx context.Context, spec *phaseSpec, obj T) (out Outcome, err error) {
	h := m.handlers[spec.name]
	if h == nil {
		if spec.deletion {
			return Done(), nil
		}
		return Wait(), nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrHandlerPanic, r)
		}
	}()
	return h(ctx, obj)
}

// staleRead reports whether this machine moved the object with uid to
// another phase than cur less than the stale-read window ago. It forgets the
// transition once a read confirms it or the window has passed.
func (c *machineCore) staleRead(uid types.UID, cur Phase, now time.Time) bool {
	if c.opts.staleWindow <= 0 || uid == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.recent[uid]
	if !ok {
		return false
	}
	if r.phase != cur && now.Sub(r.at) < c.opts.staleWindow {
		return true
	}
	delete(c.recent, uid)
	return false
}

// remember records a transition for staleRead and drops expired records, so
// the memory is bounded by the objects moved within one window.
func (c *machineCore) remember(uid types.UID, p Phase, now time.Time) {
	if c.opts.staleWindow <= 0 || uid == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, r := range c.recent {
		if now.Sub(r.at) >= c.opts.staleWindow {
			delete(c.recent, k)
		}
	}
	c.recent[uid] = recentTransition{phase: p, at: now}
}

func (c *machineCore) wrap(obj client.Object, err error) error {
	return fmt.Errorf("phase: %s: machine %s: %w", objectKey(obj), c.name, err)
}

func objectKey(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

func isNil(obj client.Object) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

package phase

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Phase names one state of a machine. It is persisted as a string in the
// object's status and is also the reason of the conditions the machine
// writes, so it must start with a letter and contain only letters, digits and
// '_' (at most 63 bytes); [Builder.Build] rejects other names.
type Phase string

// Common phase names. They are offered, not imposed: a machine declares the
// phases it uses, with any names. Only two of them carry a default: a phase
// named Ready is of kind [KindReady] and one named Degraded of kind
// [KindDegraded] unless declared otherwise with [As].
const (
	Pending      Phase = "Pending"
	Provisioning Phase = "Provisioning"
	Ready        Phase = "Ready"
	Degraded     Phase = "Degraded"
	Deleting     Phase = "Deleting"
)

// Kind says what a phase means for the standard conditions of the
// conditions package. The machine owns Ready, Reconciling, Stalled and
// Degraded on the objects it steps; see [Machine.Step] for when they change.
type Kind int

const (
	// KindProgressing is the default: work towards the desired state is under
	// way. Reconciling=True and Ready=False, both with the phase name as
	// reason; Stalled removed; a Degraded=True becomes False. kstatus: InProgress.
	KindProgressing Kind = iota
	// KindReady means the object is fully reconciled: Ready=True with the phase
	// name as reason; Reconciling and Stalled removed; a Degraded=True becomes
	// False. kstatus: Current.
	KindReady
	// KindDegraded means the object works only partly: Degraded=True and
	// Ready=False with the phase name as reason; Reconciling and Stalled removed.
	KindDegraded
	// KindFailed is a terminal phase: the controller has given up until
	// something changes. Stalled=True and Ready=False with the phase name as
	// reason; Reconciling removed. kstatus: Failed.
	KindFailed
)

// String returns the kind's name without the Kind prefix, e.g. "Ready".
func (k Kind) String() string {
	switch k {
	case KindProgressing:
		return "Progressing"
	case KindReady:
		return "Ready"
	case KindDegraded:
		return "Degraded"
	case KindFailed:
		return "Failed"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Handler does the work of one phase and says what comes next (see
// [Outcome]). It runs on every Step while the object is in its phase —
// after a restart, after a failed status write, after a stale read — so it
// must be idempotent: doing its work twice must be harmless, and it should
// check the world ("does the backup exist?") rather than remember.
//
// A returned error keeps the object in its phase; it is recorded with
// conditions.ApplyOutcome and returned, wrapped, by [Machine.Step]. A panic
// is recovered and treated as an error.
type Handler[T client.Object] func(ctx context.Context, obj T) (Outcome, error)

type outcomeKind int

const (
	outcomeWait outcomeKind = iota
	outcomeNext
	outcomeDone
)

// Outcome is what a [Handler] decided. The zero value is [Wait].
type Outcome struct {
	kind    outcomeKind
	next    Phase
	after   time.Duration
	message string
}

// Next asks for a transition to p. It must be one of the targets declared
// with [To] for the current phase (a self-transition too, which restarts the
// phase's timeout budget); any other target is refused (see [Machine.Step]).
func Next(p Phase) Outcome { return Outcome{kind: outcomeNext, next: p} }

// RequeueAfter keeps the object in its phase and asks to be called again
// after d (or at the phase's timeout deadline, when that comes first).
// d <= 0 is [Wait]. finalizer.RequeueAfter means the same for a cleanup step.
func RequeueAfter(d time.Duration) Outcome { return Outcome{kind: outcomeWait, after: max(d, 0)} }

// Wait keeps the object in its phase without a requeue: the next Step comes
// from a watch event (or the phase's timeout deadline). Use it when waiting
// for something the controller watches.
func Wait() Outcome { return Outcome{kind: outcomeWait} }

// Done is returned by the deletion phase's handler (see [Builder.OnDelete])
// when its work is finished, so finalizer cleanup may proceed. In any other
// phase it is refused like an undeclared transition.
func Done() Outcome { return Outcome{kind: outcomeDone} }

// WithMessage returns o with a human-readable message for the conditions
// written while staying in the phase (e.g. "2/3 replicas ready"). Without
// one, the conditions keep their last message.
func (o Outcome) WithMessage(msg string) Outcome { o.message = msg; return o }

// String describes o for errors and messages.
func (o Outcome) String() string {
	switch o.kind {
	case outcomeNext:
		return "Next(" + string(o.next) + ")"
	case outcomeDone:
		return "Done()"
	}
	if o.after > 0 {
		return "RequeueAfter(" + o.after.String() + ")"
	}
	return "Wait()"
}

// Observer receives a measurement for every transition the machine makes.
// It is called synchronously from Step, so it must be fast and safe for
// concurrent use. Embed [NopObserver] to stay compatible when methods are added.
type Observer interface {
	// Transition is called once per transition with the machine's name, the
	// phases left and entered (from is "" when an object enters its first
	// phase), and how long the object was in from according to the
	// persisted entered-at time (0 when unknown).
	Transition(machine string, from, to Phase, timeInFrom time.Duration)
}

// NopObserver ignores everything. It is the default.
type NopObserver struct{}

// Transition does nothing.
func (NopObserver) Transition(string, Phase, Phase, time.Duration) {}

// Defaults of the machine options.
const (
	// DefaultPhaseField is the JSON name, inside status, of the persisted phase.
	DefaultPhaseField = "phase"
	// DefaultTransitionTimeField is the JSON name, inside status, of the time
	// the current phase was entered.
	DefaultTransitionTimeField = "phaseTransitionTime"
	// DefaultTransitionRequeue is the RequeueAfter of a Step that made a
	// transition: practically immediate, so the next phase starts as soon as
	// the caller has persisted this one.
	DefaultTransitionRequeue = time.Millisecond
	// DefaultStaleReadWindow bounds how long a Step that sees an object
	// older than this machine's own last transition of it waits for the
	// cache to catch up (see [WithStaleReadWindow]).
	DefaultStaleReadWindow = 5 * time.Second
	// staleRetry is the requeue of a Step that detected a stale read.
	staleRetry = 100 * time.Millisecond
)

// Option configures [New].
type Option func(*options)

type options struct {
	clock             clock.PassiveClock
	recorder          events.EventRecorder
	observers         []Observer
	phaseField        string
	timeField         string
	transitionRequeue time.Duration
	staleWindow       time.Duration
}

// WithClock sets the time source for entered-at times, timeouts and the
// conditions' lastTransitionTime (default: the real clock).
func WithClock(c clock.PassiveClock) Option { return func(o *options) { o.clock = c } }

// WithEventRecorder makes the machine emit events: Normal PhaseTransition
// for every transition, Warning PhaseTimeout, UnknownPhase and
// TransitionRefused, Normal AwaitingApproval (once per blocked attempt that
// changed the condition) and DeletionHandled, through r, client-go's
// events.EventRecorder (manager.GetEventRecorder, or opkit's deduplicating
// observability.Recorder around one). Default: no events. Given more than
// once, the last wins.
func WithEventRecorder(r events.EventRecorder) Option { return func(o *options) { o.recorder = r } }

// WithObserver adds an [Observer]: every observer given is called for every
// transition, in the order given (none by default). [Metrics] is one.
func WithObserver(obs Observer) Option {
	return func(o *options) {
		if obs != nil {
			o.observers = append(o.observers, obs)
		}
	}
}

// WithStatusFields sets the JSON names, inside status, of the persisted
// phase (a string) and of the time it was entered (a metav1.Time, RFC 3339).
// Defaults: [DefaultPhaseField], [DefaultTransitionTimeField]. Ignored for
// objects implementing [Accessor].
func WithStatusFields(phase, enteredAt string) Option {
	return func(o *options) { o.phaseField, o.timeField = phase, enteredAt }
}

// WithTransitionRequeue sets the RequeueAfter of a Step that made a
// transition (default [DefaultTransitionRequeue]; values <= 0 mean the default).
func WithTransitionRequeue(d time.Duration) Option {
	return func(o *options) { o.transitionRequeue = d }
}

// WithStaleReadWindow sets how long the machine distrusts a read of an object
// that shows an older state than the machine's own last transition of it
// (default [DefaultStaleReadWindow]; 0 turns the check off). A cache-backed
// client often serves the pre-transition object to the requeue that follows a
// transition; within the window such a Step changes nothing, runs no handler
// and requeues shortly. After the window the persisted state wins again — that
// is what happens when the caller failed to persist the transition.
// The memory involved is one small entry per object with a transition in the
// last window, kept per Machine.
func WithStaleReadWindow(d time.Duration) Option {
	return func(o *options) { o.staleWindow = d }
}

// Rule configures one phase in [Builder.On]: its targets ([To]), timeout
// ([Timeout]), kind ([As]) and guard ([RequireApproval]).
type Rule func(*phaseSpec)

// To declares the phases a handler may move to from this phase. It may be
// given more than once; targets accumulate.
func To(targets ...Phase) Rule {
	return func(s *phaseSpec) { s.targets = append(s.targets, targets...) }
}

// Timeout gives the phase a budget d, measured from its persisted entered-at
// time. When a Step finds the budget spent it does not run the handler: it
// moves to target (which need not be listed in [To]) with reason
// PhaseTimeout. While the budget lasts, every Step that stays requeues at
// the deadline at the latest.
func Timeout(d time.Duration, target Phase) Rule {
	return func(s *phaseSpec) { s.timeout, s.timeoutTarget, s.hasTimeout = d, target, true }
}

// As sets the phase's [Kind] (default [KindProgressing], except for phases
// named [Ready] and [Degraded]).
func As(k Kind) Rule { return func(s *phaseSpec) { s.kind, s.kindSet = k, true } }

// RequireApproval guards entry into the phase: a transition into it happens
// only while the object carries the annotation [ApproveAnnotation] with the
// phase name as value. Use it for destructive phases; to guard leaving a
// phase, guard the phases it leads to.
func RequireApproval() Rule { return func(s *phaseSpec) { s.approval = true } }

// ApproveAnnotation is the annotation that approves a transition into a
// phase declared with [RequireApproval]; its value must be exactly the phase
// name, e.g. `kubectl annotate database/db phase.opkit.dev/approve=Migrating`.
// The machine only reads it: it stays on the object, and approves every later
// entry into that phase, until someone removes it.
const ApproveAnnotation = "phase.opkit.dev/approve"

// Condition and event reasons the machine writes besides phase names.
const (
	// ReasonPhaseTimeout: the phase outlived its [Timeout] budget.
	ReasonPhaseTimeout = "PhaseTimeout"
	// ReasonUnknownPhase: the persisted phase is not declared; the machine
	// restarted from the initial phase.
	ReasonUnknownPhase = "UnknownPhase"
	// ReasonTransitionRefused: a handler asked for a transition that is not
	// declared (Stalled=True until the next successful Step).
	ReasonTransitionRefused = "TransitionRefused"
	// ReasonAwaitingApproval: a transition waits for [ApproveAnnotation]
	// (Reconciling=True).
	ReasonAwaitingApproval = "AwaitingApproval"
	// ReasonDeletionHandled: the deletion phase's handler has finished
	// (Reconciling=True); finalizer cleanup may proceed. The machine reads
	// this reason back to know not to run the handler again.
	ReasonDeletionHandled = "DeletionHandled"
	// EventPhaseTransition is the reason of the Normal event of every
	// transition that has no more specific reason.
	EventPhaseTransition = "PhaseTransition"
)

// Errors.
var (
	// ErrInvalidMachine is wrapped by every error from [Builder.Build].
	ErrInvalidMachine = errors.New("invalid phase machine")
	// ErrTransitionRefused is wrapped (inside reconcile.TerminalError) by the
	// error Step returns when a handler asks for an undeclared transition.
	ErrTransitionRefused = errors.New("transition refused")
	// ErrNoPhaseField is wrapped by the error Step returns for an object
	// whose status has no usable phase or entered-at field.
	ErrNoPhaseField = errors.New("object has no usable status phase fields")
	// ErrHandlerPanic is wrapped by the error Step returns when a handler panicked.
	ErrHandlerPanic = errors.New("phase handler panicked")
)

type phaseSpec struct {
	name          Phase
	targets       []Phase
	timeout       time.Duration
	timeoutTarget Phase
	hasTimeout    bool
	kind          Kind
	kindSet       bool
	approval      bool
	deletion      bool
}

// Builder declares a machine. Its methods record the declaration; all
// checks happen in [Builder.Build], which reports every problem at once.
type Builder[T client.Object] struct {
	name     string
	opts     []Option
	initial  Phase
	phases   []*phaseSpec
	handlers map[Phase]Handler[T]
	problems []string
}

// New starts the declaration of a machine. name identifies it in events,
// errors and metrics (e.g. "database").
func New[T client.Object](name string, opts ...Option) *Builder[T] {
	return &Builder[T]{name: name, opts: opts, handlers: map[Phase]Handler[T]{}}
}

// With adds options after those given to [New]; [Builder.Build] applies them
// in order (for an option that replaces, such as [WithEventRecorder], the
// last wins; observers accumulate). The reconciler package uses it to wire
// its event recorder and metrics into a machine it is given.
func (b *Builder[T]) With(opts ...Option) *Builder[T] {
	b.opts = append(b.opts, opts...)
	return b
}

// Name returns the machine's name, as given to [New].
func (b *Builder[T]) Name() string { return b.name }

// Initial sets the entry phase: the phase of an object with no persisted
// phase, and the recovery target for an undeclared persisted phase.
func (b *Builder[T]) Initial(p Phase) *Builder[T] { b.initial = p; return b }

// On declares phase p with its handler (nil: the object waits in p until a
// timeout or deletion moves it) and options. Declaration order is the order
// of rendering.
func (b *Builder[T]) On(p Phase, h Handler[T], opts ...Rule) *Builder[T] {
	s := &phaseSpec{name: p}
	for _, o := range opts {
		o(s)
	}
	return b.add(s, h)
}

// OnDelete declares p as the deletion phase. An object whose
// deletionTimestamp is set moves into it from whatever phase it is in (no
// guard, no timeout, no handler of the old phase), and never leaves it. Its
// handler h (nil: nothing to do) runs on later Steps until it returns
// [Done]; from then on Step reports DeletionHandled and the caller's
// finalizer flow takes over. The deletion phase is of kind
// [KindProgressing] and declares no targets.
func (b *Builder[T]) OnDelete(p Phase, h Handler[T]) *Builder[T] {
	return b.add(&phaseSpec{name: p, deletion: true}, h)
}

func (b *Builder[T]) add(s *phaseSpec, h Handler[T]) *Builder[T] {
	if slices.ContainsFunc(b.phases, func(x *phaseSpec) bool { return x.name == s.name }) {
		b.problems = append(b.problems, fmt.Sprintf("phase %q declared twice", s.name))
		return b
	}
	if !s.kindSet {
		switch s.name {
		case Ready:
			s.kind = KindReady
		case Degraded:
			s.kind = KindDegraded
		}
	}
	if s.deletion {
		s.kind = KindProgressing
	}
	b.phases = append(b.phases, s)
	b.handlers[s.name] = h
	return b
}

var phaseName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,62}$`)

// Build checks the declaration and returns the machine. The error wraps
// [ErrInvalidMachine] and lists every problem: an empty machine name; no
// initial phase or an undeclared one; a phase declared twice or with an
// invalid name; a target or timeout target that is not declared or is the
// deletion phase; a timeout that is not positive; more than one deletion
// phase, or targets on it; a phase (other than the deletion phase) that
// cannot be reached from the initial phase.
func (b *Builder[T]) Build() (*Machine[T], error) {
	problems := slices.Clone(b.problems)
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if b.name == "" {
		bad("machine name is empty")
	}
	byName := map[Phase]*phaseSpec{}
	var deletion *phaseSpec
	for _, s := range b.phases {
		byName[s.name] = s
		if !phaseName.MatchString(string(s.name)) {
			bad("phase name %q must match %s", s.name, phaseName)
		}
		if s.kind < KindProgressing || s.kind > KindFailed {
			bad("phase %q: unknown kind %d", s.name, int(s.kind))
		}
		if s.deletion {
			if deletion != nil {
				bad("phases %q and %q are both declared with OnDelete", deletion.name, s.name)
			}
			deletion = s
		}
	}
	switch {
	case b.initial == "":
		bad("no initial phase (call Initial)")
	case byName[b.initial] == nil:
		bad("initial phase %q is not declared", b.initial)
	case byName[b.initial].deletion:
		bad("initial phase %q is the deletion phase", b.initial)
	}
	target := func(from, to Phase, what string) {
		switch t := byName[to]; {
		case t == nil:
			bad("phase %q: %s %q is not declared", from, what, to)
		case t.deletion:
			bad("phase %q: %s %q is the deletion phase, which is entered only on deletion", from, what, to)
		}
	}
	for _, s := range b.phases {
		if s.deletion && (len(s.targets) > 0 || s.hasTimeout) {
			bad("deletion phase %q declares targets", s.name)
		}
		for _, t := range s.targets {
			target(s.name, t, "target")
		}
		if s.hasTimeout {
			if s.timeout <= 0 {
				bad("phase %q: timeout %s is not positive", s.name, s.timeout)
			}
			target(s.name, s.timeoutTarget, "timeout target")
		}
	}
	if len(problems) == 0 {
		seen := map[Phase]bool{b.initial: true}
		queue := []Phase{b.initial}
		for len(queue) > 0 {
			s := byName[queue[0]]
			queue = queue[1:]
			next := slices.Clone(s.targets)
			if s.hasTimeout {
				next = append(next, s.timeoutTarget)
			}
			for _, t := range next {
				if !seen[t] {
					seen[t] = true
					queue = append(queue, t)
				}
			}
		}
		for _, s := range b.phases {
			if !s.deletion && !seen[s.name] {
				bad("phase %q cannot be reached from the initial phase %q", s.name, b.initial)
			}
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w %q: %s", ErrInvalidMachine, b.name, joinProblems(problems))
	}
	return newMachine(b, byName, deletion), nil
}

func joinProblems(ps []string) string {
	out := ps[0]
	for _, p := range ps[1:] {
		out += "; " + p
	}
	return out
}

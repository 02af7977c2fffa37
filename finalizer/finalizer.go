package finalizer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Annotations, condition types and reasons this package writes. All
// annotations live under finalizer.opkit.dev/.
const (
	// ProgressAnnotation records, on the object being deleted, the names of
	// the cleanup steps that have finished, comma-separated in completion
	// order. It is written only while the finalizer is still needed (a later
	// step is not yet done, or a step with [Checkpoint] finished) and is
	// removed in the same patch that removes the finalizer. Do not edit it by
	// hand except to force a step to run again (remove its name).
	ProgressAnnotation = "finalizer.opkit.dev/progress"

	// AllowDataLossAnnotation must be set to "true" on an object before any
	// step marked [Destructive] runs for it. It is read, never written.
	AllowDataLossAnnotation = "finalizer.opkit.dev/allow-data-loss"

	// ConditionCleanup is the condition type set (Status=False) when cleanup
	// fails or is blocked, and set to Unknown (reason CleanupInProgress) when
	// a later reconcile makes progress after such a failure. It is never
	// written on a deletion that goes smoothly.
	ConditionCleanup = "FinalizerCleanup"

	// ReasonCleanupFailed: a step returned an error or panicked.
	ReasonCleanupFailed = "CleanupFailed"
	// ReasonDeletionBlocked: a destructive step waits for
	// [AllowDataLossAnnotation] (the reason of [ConditionCleanup]=False).
	ReasonDeletionBlocked = "DeletionBlocked"
	// ReasonCleanupInProgress: cleanup recovered from a failure and continues.
	ReasonCleanupInProgress = "CleanupInProgress"
	// ReasonStuckDeleting: cleanup has not finished within the deadline
	// (see [WithDeadline]), counted from metadata.deletionTimestamp; the
	// reason of kstatus's Stalled=True (conditions.Stalled).
	ReasonStuckDeleting = "StuckDeleting"
)

// Default timings, overridable with options.
const (
	// DefaultPendingRequeue is used when a step reports [RequeueAfter] with no delay.
	DefaultPendingRequeue = 10 * time.Second
	// DefaultBlockedRequeue is how long a blocked destructive step waits
	// before it is looked at again when no event arrives meanwhile.
	DefaultBlockedRequeue = 10 * time.Minute
	// DefaultMaxAttempts bounds the re-read-and-retry loop of one write that
	// loses a race with another writer.
	DefaultMaxAttempts = 5
)

// StepResult is what a cleanup step reports when it did not fail.
type StepResult struct {
	// Done means the external thing the step is responsible for is verified
	// gone (not merely that its deletion was requested). Only then does the
	// next step run, and only when every step is done is the finalizer removed.
	Done bool
	// RequeueAfter is when to call the step again if Done is false.
	// Zero means the Finalizer's pending delay ([WithPendingRequeue]).
	RequeueAfter time.Duration
}

// Done reports that a step's external resource is gone.
func Done() StepResult { return StepResult{Done: true} }

// RequeueAfter reports that deletion is under way but not verified: the step
// is not done and runs again after d (0: the Finalizer's default, see
// [WithPendingRequeue]). phase.RequeueAfter means the same for a phase.
func RequeueAfter(d time.Duration) StepResult { return StepResult{RequeueAfter: d} }

// CleanupFunc is one cleanup step. It is called only for an object that is
// being deleted and still carries the finalizer, and must be idempotent (see
// the package documentation for exactly when a step can run twice). An
// error means "failed, retry with backoff"; a panic is recovered and treated
// as an error.
type CleanupFunc[T client.Object] func(ctx context.Context, obj T) (StepResult, error)

// Observer receives measurements. Implementations must be safe for
// concurrent use and fast; they are called synchronously from Reconcile.
// Embed [NopObserver] to stay compatible when methods are added.
type Observer interface {
	// StepFinished is called after every invocation of a step with how long it
	// ran, whether it reported done, and its error (a recovered panic included).
	StepFinished(obj client.Object, step string, took time.Duration, done bool, err error)
	// StuckDeletion is called once per object and process when cleanup has not
	// finished within the deadline; step is the one that is not done.
	StuckDeletion(obj client.Object, step string, sinceDeletion time.Duration)
	// Finalized is called when the finalizer has been removed, with the time
	// since deletion was requested.
	Finalized(obj client.Object, sinceDeletion time.Duration)
}

// NopObserver ignores everything. It is the default.
type NopObserver struct{}

// StepFinished does nothing.
func (NopObserver) StepFinished(client.Object, string, time.Duration, bool, error) {}

// StuckDeletion does nothing.
func (NopObserver) StuckDeletion(client.Object, string, time.Duration) {}

// Finalized does nothing.
func (NopObserver) Finalized(client.Object, time.Duration) {}

// Option configures [New]. Options that carry the object type ([WithStep])
// must use the same type as New; a mismatch is an error from New.
type Option interface {
	apply(target builder) error
}

type builder interface {
	common() *settings
	objectType() string
}

type settings struct {
	reader          client.Reader
	recorder        events.EventRecorder
	observer        Observer
	clock           clock.PassiveClock
	deadline        time.Duration
	pendingRequeue  time.Duration
	blockedRequeue  time.Duration
	maxAttempts     int
	checkpointAll   bool
	conditionsWrite bool
}

type commonOption func(*settings)

func (o commonOption) apply(b builder) error { o(b.common()); return nil }

// WithAPIReader makes the Finalizer re-read objects through r after losing a
// race with another writer. Pass manager.GetAPIReader(): a cached client may
// return the same stale object again. The default is the client given to New.
func WithAPIReader(r client.Reader) Option {
	return commonOption(func(s *settings) { s.reader = r })
}

// WithEventRecorder makes the Finalizer emit Warning events (reasons
// CleanupFailed, DeletionBlocked, StuckDeleting) through r, client-go's
// events.EventRecorder (manager.GetEventRecorder, or opkit's deduplicating
// observability.Recorder around one). Without it no events are emitted.
func WithEventRecorder(r events.EventRecorder) Option {
	return commonOption(func(s *settings) { s.recorder = r })
}

// WithObserver reports measurements to o.
func WithObserver(o Observer) Option {
	return commonOption(func(s *settings) { s.observer = o })
}

// WithClock replaces the wall clock (for tests).
func WithClock(c clock.PassiveClock) Option {
	return commonOption(func(s *settings) { s.clock = c })
}

// WithDeadline sets how long after metadata.deletionTimestamp cleanup may
// take before the object is marked Stalled (reason StuckDeleting), an event
// is emitted and the Observer is told. Passing the deadline changes nothing
// else: cleanup keeps being retried and the finalizer is never removed
// because of it. Zero (the default) disables the deadline.
func WithDeadline(d time.Duration) Option {
	return commonOption(func(s *settings) { s.deadline = d })
}

// WithPendingRequeue sets the delay used when a step returns RequeueAfter(0).
func WithPendingRequeue(d time.Duration) Option {
	return commonOption(func(s *settings) { s.pendingRequeue = d })
}

// WithBlockedRequeue sets the fixed delay before a blocked destructive step is
// looked at again (an update that adds the annotation triggers a reconcile
// sooner if the controller watches the object without a generation filter).
func WithBlockedRequeue(d time.Duration) Option {
	return commonOption(func(s *settings) { s.blockedRequeue = d })
}

// WithMaxAttempts bounds how many times one write is re-read and retried
// after a conflict or a failed JSON-patch test (default 5). After that the
// conflict is returned and the workqueue retries later.
func WithMaxAttempts(n int) Option {
	return commonOption(func(s *settings) { s.maxAttempts = n })
}

// WithCheckpointEveryStep records progress after every step that finishes,
// as if each had [Checkpoint]. It costs one extra write per step on deletion.
func WithCheckpointEveryStep() Option {
	return commonOption(func(s *settings) { s.checkpointAll = true })
}

// WithoutConditions disables condition writes even when the object has
// conditions. By default the Finalizer writes its conditions
// ([ConditionCleanup], with reasons CleanupFailed, DeletionBlocked and
// CleanupInProgress, and Stalled with reason StuckDeleting) into any object whose
// conditions github.com/opkit/opkit/conditions can write — a typed
// status.conditions []metav1.Condition, unstructured content, or a
// conditions.Accessor — and into no other.
func WithoutConditions() Option {
	return commonOption(func(s *settings) { s.conditionsWrite = false })
}

// StepOption configures one step.
type StepOption func(*stepConfig)

type stepConfig struct {
	destructive bool
	checkpoint  bool
}

// Destructive marks a step that destroys data: it runs only when the object
// carries AllowDataLossAnnotation: "true". Until then deletion waits, with a
// condition and an event that name the annotation.
func Destructive() StepOption { return func(c *stepConfig) { c.destructive = true } }

// Checkpoint records progress on the object as soon as this step finishes,
// before the next step runs, for steps that must not run twice. It costs one
// write (unless this is the last step, which the finalizer removal covers).
func Checkpoint() StepOption { return func(c *stepConfig) { c.checkpoint = true } }

type step[T client.Object] struct {
	name string
	run  CleanupFunc[T]
	stepConfig
}

type stepOption[T client.Object] struct{ s step[T] }

func (o stepOption[T]) apply(b builder) error {
	f, ok := b.(*Finalizer[T])
	if !ok {
		return fmt.Errorf("step %q is for %T, but the finalizer is for %s", o.s.name, *new(T), b.objectType())
	}
	f.steps = append(f.steps, o.s)
	return nil
}

// WithStep appends a cleanup step. Steps run in the order given, one at a
// time; a step runs only after every earlier step reported Done. Names must
// be unique, non-empty and free of commas and whitespace; they are recorded
// in [ProgressAnnotation], so renaming a step makes it run again on objects
// already being deleted.
func WithStep[T client.Object](name string, run CleanupFunc[T], opts ...StepOption) Option {
	s := step[T]{name: name, run: run}
	for _, o := range opts {
		o(&s.stepConfig)
	}
	return stepOption[T]{s: s}
}

// Finalizer adds one finalizer to objects of type T and, when they are
// deleted, runs its cleanup steps and removes it. It is safe for concurrent
// use by many reconcile workers (on different objects, as controller-runtime
// guarantees).
type Finalizer[T client.Object] struct {
	name   string
	client client.Client
	steps  []step[T]
	settings

	mu         sync.Mutex
	seen       map[types.UID]*memo
	lastPruned time.Time

	// patchOnly is set once the API server refused an update that removes
	// the last finalizer for a reason a patch may not share (invalid,
	// forbidden, bad request, method not allowed): from then on, removals
	// are JSON patches only.
	patchOnly atomic.Bool
}

// memo is what this process knows about an object being deleted beyond what
// the (possibly stale) object passed to Reconcile shows.
type memo struct {
	// deleting: this process saw the object with a deletionTimestamp and
	// this finalizer (a deletion is never undone, so a later view without
	// the timestamp is stale).
	deleting        bool
	done            []string
	stuckReported   bool
	blockedReported string
	finalizedAt     time.Time
}

func (f *Finalizer[T]) common() *settings  { return &f.settings }
func (f *Finalizer[T]) objectType() string { return fmt.Sprintf("%T", *new(T)) }

// New returns a Finalizer named name for objects of type T. name must be a
// qualified name with a domain prefix ("example.com/cleanup"), as the API
// server expects of finalizers; at least one step is required.
func New[T client.Object](c client.Client, name string, opts ...Option) (*Finalizer[T], error) {
	if c == nil {
		return nil, errors.New("finalizer: nil client")
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	f := &Finalizer[T]{
		name:   name,
		client: c,
		settings: settings{
			reader:          c,
			observer:        NopObserver{},
			clock:           clock.RealClock{},
			pendingRequeue:  DefaultPendingRequeue,
			blockedRequeue:  DefaultBlockedRequeue,
			maxAttempts:     DefaultMaxAttempts,
			conditionsWrite: true,
		},
		seen: map[types.UID]*memo{},
	}
	var errs []error
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(f); err != nil {
			errs = append(errs, err)
		}
	}
	if len(f.steps) == 0 {
		errs = append(errs, errors.New("no cleanup steps (use WithStep)"))
	}
	names := map[string]bool{}
	for _, s := range f.steps {
		switch {
		case s.name == "" || strings.ContainsAny(s.name, ", \t\n"):
			errs = append(errs, fmt.Errorf("step name %q: must be non-empty without commas or whitespace", s.name))
		case names[s.name]:
			errs = append(errs, fmt.Errorf("step name %q used twice", s.name))
		case s.run == nil:
			errs = append(errs, fmt.Errorf("step %q has a nil function", s.name))
		}
		names[s.name] = true
	}
	if f.maxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max attempts %d: must be at least 1", f.maxAttempts))
	}
	if f.deadline < 0 || f.pendingRequeue <= 0 || f.blockedRequeue <= 0 {
		errs = append(errs, errors.New("deadline must be >= 0 and requeue delays > 0"))
	}
	if f.reader == nil || f.observer == nil || f.clock == nil {
		errs = append(errs, errors.New("nil reader, observer or clock"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("finalizer %s: %w", name, err)
	}
	return f, nil
}

// ValidateName reports whether name is acceptable as a finalizer name: a
// qualified name (as the API server validates finalizers) with a domain
// prefix, like "example.com/cleanup".
func ValidateName(name string) error {
	errs := apivalidation.ValidateFinalizerName(name, field.NewPath("metadata", "finalizers"))
	if len(errs) == 0 && !strings.Contains(name, "/") {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "finalizers"), name, "must have a domain prefix, e.g. example.com/"+name))
	}
	if len(errs) > 0 {
		return fmt.Errorf("finalizer: invalid name: %w", errs.ToAggregate())
	}
	return nil
}

// Name returns the finalizer name.
func (f *Finalizer[T]) Name() string { return f.name }

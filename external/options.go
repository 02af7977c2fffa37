package external

import (
	"fmt"
	"reflect"
	"time"

	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Option configures [New]. Options that carry the object type
// ([WithPolicy], [WithExternalName], [WithEndpoint], [WithConnectionSecret])
// must use the same type as New; a mismatch is an error from New.
type Option interface {
	apply(s *settings, objectType reflect.Type) error
}

type settings struct {
	classifier    Classifier
	limiter       *Limiter
	endpoint      func(client.Object) string
	maxWait       time.Duration
	poll          time.Duration
	progress      time.Duration
	externalName  func(client.Object) string
	policy        func(client.Object) Policy
	secretName    func(client.Object) string
	nonIdempotent bool
	recorder      events.EventRecorder
	observer      Observer
	clock         clock.WithTicker
}

type commonOption func(*settings)

func (o commonOption) apply(s *settings, _ reflect.Type) error { o(s); return nil }

// apply is commonOption's, so that a clock that fits two option types
// stays one value.
func (o ClockOption) apply(s *settings, t reflect.Type) error {
	return commonOption(func(s *settings) {
		if o.clock != nil {
			s.clock = o.clock
		}
	}).apply(s, t)
}

// typedOption carries a function of T; New refuses it for another T.
type typedOption[T client.Object] struct {
	name string
	set  func(*settings)
}

func (o typedOption[T]) apply(s *settings, objectType reflect.Type) error {
	if want := reflect.TypeFor[T](); want != objectType {
		return fmt.Errorf("external: %s is for %v, the Reconciler is for %v", o.name, want, objectType)
	}
	o.set(s)
	return nil
}

// WithClassifier classifies the errors of the Client and the Connector
// (default: none; every error is left to outcome.Classify, so an unknown
// error is retried with backoff).
func WithClassifier(c Classifier) Option {
	return commonOption(func(s *settings) { s.classifier = c })
}

// WithLimiter paces every call through l, shared with every other
// Reconciler given l. Without it each Reconciler has its own Limiter with
// no rate limit that still honours Retry-After across its objects.
func WithLimiter(l *Limiter) Option {
	return commonOption(func(s *settings) { s.limiter = l })
}

// WithEndpoint names the endpoint key of obj's calls in the [Limiter]
// (default: one key for every object). Objects of one account on one API
// should share a key; objects of different accounts, whose limits are
// separate, should not.
func WithEndpoint[T client.Object](fn func(obj T) string) Option {
	return typedOption[T]{name: "WithEndpoint", set: func(s *settings) {
		s.endpoint = func(o client.Object) string { return fn(o.(T)) }
	}}
}

// WithMaxWait is the longest a call waits in place for the [Limiter]
// (default 1s); a longer wait requeues the object with reason
// [ReasonThrottled] instead of holding a worker.
func WithMaxWait(d time.Duration) Option {
	return commonOption(func(s *settings) { s.maxWait = d })
}

// WithPollInterval is how long after a successful Sync an object is looked
// at again to find drift (default 1 minute; outcome adds up to 10% jitter
// so objects created together do not poll together). An
// [Observation.PollAfter] overrides it for one object.
func WithPollInterval(d time.Duration) Option {
	return commonOption(func(s *settings) { s.poll = d })
}

// WithProgressPollInterval is how often an external resource that is
// changing — being deleted, or not ready yet ([Observation.NotReady]) — is
// looked at again (default 2s).
func WithProgressPollInterval(d time.Duration) Option {
	return commonOption(func(s *settings) { s.progress = d })
}

// WithExternalName derives the external name of an object that has none
// recorded yet (default: its metadata.name). It is called once per object:
// the result is recorded in [AnnotationExternalName] before any create and
// never recomputed.
func WithExternalName[T client.Object](fn func(obj T) string) Option {
	return typedOption[T]{name: "WithExternalName", set: func(s *settings) {
		s.externalName = func(o client.Object) string { return fn(o.(T)) }
	}}
}

// WithPolicy reads obj's management [Policy] (default: full management,
// delete with the object), e.g. from a spec.deletionPolicy field.
func WithPolicy[T client.Object](fn func(obj T) Policy) Option {
	return typedOption[T]{name: "WithPolicy", set: func(s *settings) {
		s.policy = func(o client.Object) Policy { return fn(o.(T)) }
	}}
}

// WithConnectionSecret names the Secret, in obj's namespace, that receives
// the connection details ([Reconciler.ConnectionSecret]); "" publishes none.
// Without this option no Secret is made.
func WithConnectionSecret[T client.Object](fn func(obj T) string) Option {
	return typedOption[T]{name: "WithConnectionSecret", set: func(s *settings) {
		s.secretName = func(o client.Object) string { return fn(o.(T)) }
	}}
}

// WithNonIdempotentCreate says the API ignores the idempotency token: a
// create whose outcome is unknown (it timed out, the process died) and
// whose resource Observe does not find is then never sent again — the
// object stalls with reason [ReasonCreateOutcomeUnknown] until a person
// removes [AnnotationCreatePending]. By default the create is sent again
// with the same token, which the API answers with the resource the first
// attempt made, if any.
func WithNonIdempotentCreate() Option {
	return commonOption(func(s *settings) { s.nonIdempotent = true })
}

// WithEventRecorder emits the events (reasons [ReasonCreated],
// [ReasonCreateRecovered], [ReasonUpdated], [ReasonDriftCorrected],
// [ReasonDeleting], [ReasonOrphaned]) through r, client-go's
// events.EventRecorder. Without it no events are emitted.
func WithEventRecorder(r events.EventRecorder) Option {
	return commonOption(func(s *settings) { s.recorder = r })
}

// WithObserver reports measurements to o ([Metrics], or your own).
func WithObserver(o Observer) Option {
	return commonOption(func(s *settings) { s.observer = o })
}

// ClockOption is what [WithClock] returns: an [Option] and a
// [LimiterOption].
type ClockOption struct{ clock clock.WithTicker }

// WithClock replaces the wall clock (for tests): timestamps of the
// annotations, the Limiter's tokens and Retry-After, waits.
func WithClock(c clock.WithTicker) ClockOption { return ClockOption{clock: c} }

func (o ClockOption) applyToLimiter(l *Limiter) {
	if o.clock != nil {
		l.clock = o.clock
	}
}

package external

import (
	"fmt"
	"time"

	"github.com/opkit/opkit/outcome"
)

// Kind is how a failed external call is treated.
type Kind int

const (
	// Unclassified leaves the error to outcome.Classify: an error made
	// with outcome keeps its class, anything else is Transient (backoff).
	Unclassified Kind = iota
	// Retryable is a 5xx, a timeout, a refused connection. Retried with
	// exponential backoff (outcome.Transient); Reconciling=True.
	Retryable
	// Throttled is the endpoint saying 429 (or an equivalent). Every object
	// calling the same endpoint waits [Failure.RetryAfter] (at least one
	// second) through the shared [Limiter]; the object is looked at again
	// after it with Reconciling=True, reason [ReasonThrottled].
	Throttled
	// Terminal is quota exceeded, invalid input, permission refused. Not
	// retried until the object changes (outcome.Terminal); Stalled=True.
	Terminal
)

// Failure is a classified call error.
type Failure struct {
	// Kind decides the retry.
	Kind Kind
	// Code is the error's code, e.g. "QuotaExceeded" or "ServiceUnavailable":
	// the condition reason (of Stalled or Reconciling) and the code label of
	// opkit_external_call_errors_total, so it must come from a small fixed
	// set (an API's error codes or HTTP statuses, never a message or a name).
	// Empty means "Error".
	Code string
	// RetryAfter is the wait a Throttled endpoint asked for.
	RetryAfter time.Duration
}

// Classifier classifies the errors of a [Client] and a [Connector].
type Classifier interface {
	Classify(err error) Failure
}

// ClassifierFn adapts a function to [Classifier].
type ClassifierFn func(err error) Failure

// Classify calls f.
func (f ClassifierFn) Classify(err error) Failure { return f(err) }

// classified turns a call error into an outcome error, with its failure.
func (r *Reconciler[T]) classified(op, key string, err error) (Failure, error) {
	var f Failure
	if r.s.classifier != nil {
		f = r.s.classifier.Classify(err)
	}
	code := f.Code
	if code == "" {
		code = "Error"
	}
	f.Code = code
	wrapped := fmt.Errorf("%s %s: %w", op, key, err)
	switch f.Kind {
	case Retryable:
		return f, outcome.Transient(code, wrapped)
	case Throttled:
		return f, outcome.DependencyNotReady(ReasonThrottled, wrapped.Error(), max(f.RetryAfter, time.Second))
	case Terminal:
		return f, outcome.Terminal(code, wrapped)
	}
	// An outcome error keeps its class; its reason is the code.
	if c := outcome.Classify(err); c.Reason != "" && f.Code == "Error" {
		f.Code = c.Reason
	}
	return f, wrapped
}

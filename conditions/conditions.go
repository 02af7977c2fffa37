package conditions

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Standard condition types. They are the types kstatus
// (sigs.k8s.io/cli-utils/pkg/kstatus/status), and through it Flux, Argo CD
// health checks and `kubectl wait`, understand.
const (
	// Ready is True when the object is fully reconciled and working.
	Ready = "Ready"
	// Reconciling is True while the controller is working towards the
	// desired state, or waiting to retry. It is what other vocabularies call
	// "Progressing": the name Reconciling is kept because kstatus reads that
	// name (Reconciling=True ⇒ InProgress). Like Stalled it is an
	// "abnormal-true" condition: opkit removes it when it does not apply.
	Reconciling = "Reconciling"
	// Stalled is True when the controller has given up until the spec
	// changes (kstatus: Failed). Removed when it does not apply.
	Stalled = "Stalled"
	// Degraded is True when the object works only partly. Negative polarity:
	// True is bad.
	Degraded = "Degraded"
)

// Reasons this package writes.
const (
	// ReasonSucceeded is the reason of a summary target that is True.
	ReasonSucceeded = "Succeeded"
	// ReasonNotYetReported is used for a condition that should exist but has
	// not been written yet (a summary's missing sub-condition, an unreported
	// mirrored condition).
	ReasonNotYetReported = "NotYetReported"
)

// MaxMessageLength is the API limit on metav1.Condition.Message, in bytes.
const MaxMessageLength = 32768

// maxReasonLength is the API limit on metav1.Condition.Reason, in bytes.
const maxReasonLength = 1024

// truncationMarker ends a message that was cut to fit MaxMessageLength.
const truncationMarker = " ... [truncated]"

// reasonPattern is the API's validation pattern for metav1.Condition.Reason.
var reasonPattern = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// ErrInvalidCondition is wrapped by every validation error from [Set] and
// [Validate].
var ErrInvalidCondition = errors.New("invalid condition")

// Validate checks c as the API server would, so a bad condition fails before
// any API call: the type must be a qualified name (e.g. "Ready",
// "example.com/DatabaseReady", at most 316 bytes); the status True, False or
// Unknown; the reason non-empty, at most 1024 bytes and matching
// ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$. The message is not checked: [Set]
// bounds it instead.
func Validate(c metav1.Condition) error {
	var problems []string
	if c.Type == "" {
		problems = append(problems, "type is empty")
	} else if errs := validation.IsQualifiedName(c.Type); len(errs) > 0 {
		problems = append(problems, fmt.Sprintf("type %q: %s", c.Type, strings.Join(errs, "; ")))
	}
	switch c.Status {
	case metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown:
	default:
		problems = append(problems, fmt.Sprintf("status %q is not True, False or Unknown", c.Status))
	}
	switch {
	case c.Reason == "":
		problems = append(problems, "reason is empty")
	case len(c.Reason) > maxReasonLength:
		problems = append(problems, fmt.Sprintf("reason is %d bytes, more than %d", len(c.Reason), maxReasonLength))
	case !reasonPattern.MatchString(c.Reason):
		problems = append(problems, fmt.Sprintf("reason %q does not match %s", c.Reason, reasonPattern))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w %q: %s", ErrInvalidCondition, c.Type, strings.Join(problems, ", "))
	}
	return nil
}

// BoundMessage returns msg as [Set] stores it: invalid UTF-8 replaced by
// U+FFFD (the JSON encoder would do so anyway, growing the message), then, if
// longer than MaxMessageLength bytes, cut on a UTF-8 boundary and ended with
// " ... [truncated]" so that the result is at most MaxMessageLength bytes.
func BoundMessage(msg string) string {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	if len(msg) <= MaxMessageLength {
		return msg
	}
	cut := MaxMessageLength - len(truncationMarker)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + truncationMarker
}

// Option configures the functions of this package. Each With function says
// which functions read it; others ignore it.
type Option func(*options)

type options struct {
	clock      clock.PassiveClock
	target     string
	positive   []string
	negative   []string
	trueReason string
	dflt       *metav1.Condition
}

func buildOptions(opts []Option) options {
	o := options{clock: clock.RealClock{}, target: Ready, trueReason: ReasonSucceeded}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithClock sets the time source for lastTransitionTime (default: the real
// clock). Read by every function that writes conditions.
func WithClock(c clock.PassiveClock) Option { return func(o *options) { o.clock = c } }

// order is the fixed position of the standard types; all others follow,
// sorted by type name (byte-wise).
var order = map[string]int{Ready: 0, Reconciling: 1, Stalled: 2, Degraded: 3}

func rank(t string) int {
	if r, ok := order[t]; ok {
		return r
	}
	return len(order)
}

// Compare orders condition types as [Set] stores them: Ready, Reconciling,
// Stalled, Degraded, then every other type by byte-wise name order.
func Compare(a, b string) int {
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra - rb
	}
	return strings.Compare(a, b)
}

// List returns a copy of obj's conditions in stored order, or an error
// wrapping [ErrNoConditions] when obj has none this package can read.
// Conditions of a foreign type (e.g. an apps/v1 Deployment's) are read with
// their type, status, reason, message, lastTransitionTime and observedGeneration.
func List(obj client.Object) ([]metav1.Condition, error) {
	a, err := accessFor(obj)
	if err != nil {
		return nil, err
	}
	if a.get == nil {
		return nil, fmt.Errorf("conditions: %s: %w", describe(obj), ErrNoConditions)
	}
	cs, err := a.get()
	if err != nil {
		return nil, fmt.Errorf("conditions: %s: %w", describe(obj), err)
	}
	return slices.Clone(cs), nil
}

// Get returns a copy of the condition of type t, or nil when obj has no such
// condition or no readable conditions at all (use [List] to tell these apart).
func Get(obj client.Object, t string) *metav1.Condition {
	cs, err := List(obj)
	if err != nil {
		return nil
	}
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// IsTrue reports whether condition t exists with status True.
func IsTrue(obj client.Object, t string) bool { return statusOf(obj, t) == metav1.ConditionTrue }

// IsFalse reports whether condition t exists with status False.
func IsFalse(obj client.Object, t string) bool { return statusOf(obj, t) == metav1.ConditionFalse }

// IsUnknown reports whether condition t is Unknown or missing: a condition
// that has not been reported counts as Unknown, as in [Summarize]. It is false
// for an object without readable conditions.
func IsUnknown(obj client.Object, t string) bool {
	if _, err := List(obj); err != nil {
		return false
	}
	s := statusOf(obj, t)
	return s == metav1.ConditionUnknown || s == ""
}

func statusOf(obj client.Object, t string) metav1.ConditionStatus {
	if c := Get(obj, t); c != nil {
		return c.Status
	}
	return ""
}

func writable(obj client.Object) (*access, error) {
	a, err := accessFor(obj)
	if err != nil {
		return nil, err
	}
	if a.set == nil {
		return nil, fmt.Errorf("conditions: %s: status.conditions is not []metav1.Condition and is read-only here (implement conditions.Accessor): %w",
			describe(obj), ErrNoConditions)
	}
	return a, nil
}

// Set writes condition c into obj's conditions in memory, after [Validate].
// The one rule for what changes:
//
//   - lastTransitionTime changes only when status changes (or the condition is
//     new); then it is the clock's current time truncated to whole seconds, as
//     the API stores it. A lastTransitionTime in c is ignored.
//   - reason and message are replaced in place; the message is bounded with
//     [BoundMessage].
//   - observedGeneration is always obj's metadata.generation at the time of
//     the call, whatever c says.
//   - the list is kept sorted by [Compare] and holds at most one condition per
//     type (duplicates, which the API forbids, are dropped).
//
// Setting the same condition twice leaves obj exactly as after the first time.
// It returns an error, and changes nothing, for an invalid condition or an
// object without writable conditions.
func Set(obj client.Object, c metav1.Condition, opts ...Option) error {
	if err := Validate(c); err != nil {
		return fmt.Errorf("conditions: %s: %w", describe(obj), err)
	}
	a, err := writable(obj)
	if err != nil {
		return err
	}
	cur, err := a.get()
	if err != nil {
		return fmt.Errorf("conditions: %s: %w", describe(obj), err)
	}
	o := buildOptions(opts)
	next := metav1.Condition{
		Type:               c.Type,
		Status:             c.Status,
		ObservedGeneration: obj.GetGeneration(),
		Reason:             c.Reason,
		Message:            BoundMessage(c.Message),
	}
	out := make([]metav1.Condition, 0, len(cur)+1)
	found := false
	for _, old := range cur {
		if old.Type != c.Type {
			if !slices.ContainsFunc(out, func(x metav1.Condition) bool { return x.Type == old.Type }) {
				out = append(out, old)
			}
			continue
		}
		if found {
			continue
		}
		found = true
		if old.Status == next.Status && !old.LastTransitionTime.IsZero() {
			next.LastTransitionTime = old.LastTransitionTime
		}
	}
	if next.LastTransitionTime.IsZero() {
		next.LastTransitionTime = metav1.NewTime(o.clock.Now()).Rfc3339Copy()
	}
	out = append(out, next)
	slices.SortStableFunc(out, func(x, y metav1.Condition) int { return Compare(x.Type, y.Type) })
	a.set(out)
	return nil
}

// Remove deletes every condition of type t from obj in memory. Removing a
// condition that does not exist changes nothing. It fails only for an object
// without writable conditions.
func Remove(obj client.Object, t string) error {
	a, err := writable(obj)
	if err != nil {
		return err
	}
	cur, err := a.get()
	if err != nil {
		return fmt.Errorf("conditions: %s: %w", describe(obj), err)
	}
	if !slices.ContainsFunc(cur, func(c metav1.Condition) bool { return c.Type == t }) {
		return nil
	}
	out := slices.DeleteFunc(slices.Clone(cur), func(c metav1.Condition) bool { return c.Type == t })
	if len(out) == 0 {
		out = nil // an empty list and no list serialise differently without omitempty
	}
	a.set(out)
	return nil
}

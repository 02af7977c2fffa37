package conditions

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

// truncationMarker ends a message that was cut to fit MaxMessageLength.
const truncationMarker = " ... [truncated]"

// reasonPattern is the API's validation pattern for metav1.Condition.Reason.
var reasonPattern = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// ErrInvalidCondition is wrapped by every validation error from [Set] and
// [Validate].
var ErrInvalidCondition = errors.New("invalid condition")

// Validate checks c exactly as the API server does, with
// k8s.io/apimachinery's meta/v1/validation.ValidateCondition, so a bad
// condition fails before any API call: the type must be a qualified name
// (e.g. "Ready", "example.com/DatabaseReady", at most 316 bytes); the status
// True, False or Unknown; the reason non-empty, at most 1024 bytes and
// matching ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$; observedGeneration not
// negative. The message and lastTransitionTime are not checked: [Set] bounds
// the one and sets the other.
func Validate(c metav1.Condition) error {
	c.Message = BoundMessage(c.Message)
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = metav1.Unix(1, 0)
	}
	if c.Reason == "" {
		// The API allows an empty reason on the wire only through defaulting
		// in some versions; opkit always requires one.
		return fmt.Errorf("%w %q: reason: Required value", ErrInvalidCondition, c.Type)
	}
	if errs := metav1validation.ValidateCondition(c, field.NewPath("status", "conditions")); len(errs) > 0 {
		return fmt.Errorf("%w %q: %w", ErrInvalidCondition, c.Type, errs.ToAggregate())
	}
	return nil
}

// BoundMessage returns msg cut to at most [MaxMessageLength] bytes on a UTF-8
// boundary, ending in " ... [truncated]" when it was cut, with invalid UTF-8
// replaced by U+FFFD.
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

// order is the position of the standard types; every other type follows them.
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

// List returns a copy of the conditions in stored order, or an error
// wrapping [ErrNoConditions] when the object has none this package can read.
// Conditions of a foreign type (e.g. an apps/v1 Deployment's) are read with
// type, status, reason, message, lastTransitionTime and observedGeneration.
func (s *Status) List() ([]metav1.Condition, error) {
	cs, err := s.read()
	if err != nil {
		return nil, err
	}
	return slices.Clone(cs), nil
}

// Get returns a copy of the condition of type t, or nil when there is none
// (or the object has no readable conditions).
func (s *Status) Get(t string) *metav1.Condition {
	cs, err := s.read()
	if err != nil {
		return nil
	}
	for i := range cs {
		if cs[i].Type == t {
			c := cs[i]
			return &c
		}
	}
	return nil
}

// IsTrue reports whether condition t exists and is True.
func (s *Status) IsTrue(t string) bool { return s.statusOf(t) == metav1.ConditionTrue }

// IsFalse reports whether condition t exists and is False.
func (s *Status) IsFalse(t string) bool { return s.statusOf(t) == metav1.ConditionFalse }

// IsUnknown reports whether condition t is Unknown or missing: a condition
// that has not been reported counts as Unknown, as in [Summarize]. It is false
// for an object without readable conditions.
func (s *Status) IsUnknown(t string) bool {
	if _, err := s.read(); err != nil {
		return false
	}
	st := s.statusOf(t)
	return st == metav1.ConditionUnknown || st == ""
}

func (s *Status) statusOf(t string) metav1.ConditionStatus {
	if c := s.Get(t); c != nil {
		return c.Status
	}
	return ""
}

// Set writes condition c into the object's conditions in memory, after
// [Validate]:
//
//   - lastTransitionTime is kept when a condition of that type exists with the
//     same status, and set to now (truncated to seconds, as the API stores it)
//     otherwise; c.LastTransitionTime is ignored;
//   - observedGeneration is set to metadata.generation; c.ObservedGeneration
//     is ignored;
//   - the message is bounded with [BoundMessage];
//   - the list is kept sorted by [Compare] and holds at most one condition per
//     type (duplicates, which the API forbids, are dropped).
//
// Setting the same condition twice leaves the object exactly as after the
// first time. It returns an error, and changes nothing, for an invalid
// condition or an object without writable conditions.
func (s *Status) Set(c metav1.Condition, opts ...SetOption) error {
	return s.set(c, newSetOptions(opts))
}

func (s *Status) set(c metav1.Condition, o setOptions) error {
	if err := Validate(c); err != nil {
		return fmt.Errorf("conditions: %s: %w", s.describe(), err)
	}
	if err := s.writable(); err != nil {
		return err
	}
	cur, err := s.read()
	if err != nil {
		return err
	}
	next := metav1.Condition{
		Type:               c.Type,
		Status:             c.Status,
		ObservedGeneration: s.obj.GetGeneration(),
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
	s.write(out)
	return nil
}

// Remove deletes every condition of type t in memory. Removing a condition
// that does not exist changes nothing. It fails only for an object without
// writable conditions.
func (s *Status) Remove(t string) error {
	if err := s.writable(); err != nil {
		return err
	}
	cur, err := s.read()
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(cur, func(c metav1.Condition) bool { return c.Type == t }) {
		return nil
	}
	out := slices.DeleteFunc(slices.Clone(cur), func(c metav1.Condition) bool { return c.Type == t })
	if len(out) == 0 {
		out = nil // an empty list and no list serialise differently without omitempty
	}
	s.write(out)
	return nil
}

// The functions below resolve obj's [Status] for one call. Code that makes
// several calls on one object resolves it once with [StatusOf] and uses the
// methods of the same names.

// List returns a copy of obj's conditions; see [Status.List].
func List(obj client.Object) ([]metav1.Condition, error) {
	s, err := StatusOf(obj)
	if err != nil {
		return nil, err
	}
	return s.List()
}

// Get returns a copy of obj's condition of type t, or nil; see [Status.Get].
func Get(obj client.Object, t string) *metav1.Condition {
	s, err := StatusOf(obj)
	if err != nil {
		return nil
	}
	return s.Get(t)
}

// IsTrue reports whether obj's condition t exists and is True.
func IsTrue(obj client.Object, t string) bool {
	s, err := StatusOf(obj)
	return err == nil && s.IsTrue(t)
}

// IsFalse reports whether obj's condition t exists and is False.
func IsFalse(obj client.Object, t string) bool {
	s, err := StatusOf(obj)
	return err == nil && s.IsFalse(t)
}

// IsUnknown reports whether obj's condition t is Unknown or missing; see
// [Status.IsUnknown].
func IsUnknown(obj client.Object, t string) bool {
	s, err := StatusOf(obj)
	return err == nil && s.IsUnknown(t)
}

// Set writes condition c into obj's conditions in memory; see [Status.Set].
func Set(obj client.Object, c metav1.Condition, opts ...SetOption) error {
	s, err := StatusOf(obj)
	if err != nil {
		return err
	}
	return s.Set(c, opts...)
}

// Remove deletes obj's conditions of type t in memory; see [Status.Remove].
func Remove(obj client.Object, t string) error {
	s, err := StatusOf(obj)
	if err != nil {
		return err
	}
	return s.Remove(t)
}

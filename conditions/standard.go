package conditions

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/outcome"
)

// MarkReady records success: the summary condition ([Ready], or the type
// given with [WithSummaryType]) True with reason and message; Reconciling and
// Stalled are removed (kstatus: Current). Degraded and other conditions are
// not touched. It also records status.observedGeneration (see
// [SetObservedGeneration] for when that happens). Like every Mark helper it
// validates first: an invalid reason changes nothing.
func (s *Status) MarkReady(reason, message string, opts ...MarkOption) error {
	o := newMarkOptions(opts)
	return s.mark(o, []metav1.Condition{cond(o.summary, metav1.ConditionTrue, reason, message)}, Reconciling, Stalled)
}

// MarkReconciling records work in progress: Reconciling=True with reason and
// message; Stalled is removed; the summary condition is set to Unknown with
// the same reason and message only when it has never been reported —
// otherwise it keeps describing the last observed state, and its
// observedGeneration shows which generation that was (kstatus: InProgress
// either way). It also records status.observedGeneration.
func (s *Status) MarkReconciling(reason, message string, opts ...MarkOption) error {
	o := newMarkOptions(opts)
	sets := []metav1.Condition{cond(Reconciling, metav1.ConditionTrue, reason, message)}
	if s.Get(o.summary) == nil {
		sets = append(sets, cond(o.summary, metav1.ConditionUnknown, reason, message))
	}
	return s.mark(o, sets, Stalled)
}

// MarkStalled records that the controller gave up until something changes:
// Stalled=True and the summary condition False, both with reason and
// message; Reconciling is removed (kstatus: Failed). It also records
// status.observedGeneration.
func (s *Status) MarkStalled(reason, message string, opts ...MarkOption) error {
	o := newMarkOptions(opts)
	return s.mark(o, []metav1.Condition{
		cond(Stalled, metav1.ConditionTrue, reason, message),
		cond(o.summary, metav1.ConditionFalse, reason, message),
	}, Reconciling)
}

// ApplyOutcome records the outcome of a reconcile, classified by
// [outcome.Classify], in the object's conditions:
//
//	Success             Reconciling and Stalled removed; the summary condition is the caller's (MarkReady or SetSummary),
//	                    except that one ApplyOutcome wrote is removed with them (see below)
//	Conflict            nothing at all changes: the retry comes at once and the conflict says nothing about the object
//	Transient           MarkReconciling with the error's reason and message
//	DependencyNotReady  MarkReconciling with the reason and message
//	Terminal            MarkStalled with the reason and message
//
// What ApplyOutcome sets it also clears: on Success, a summary condition
// ([Ready], or the type given with [WithSummaryType]) that is not True and
// still carries the reason of the Stalled or Reconciling condition being
// removed was written by the taxonomy, not by the caller, and is removed
// too — so an operator that summarises in its own type, or that wrote no
// summary this time, is not left with a stale Ready=False after it recovers.
// A summary the caller set during this reconcile carries its own reason and
// is kept.
//
// Transient errors do not set Degraded: Degraded describes the managed
// workload, and a failed API call says nothing about it. A reconcile that is
// still waiting for something must return [outcome.DependencyNotReady] rather
// than nil, or Success removes its Reconciling condition. Except for Conflict,
// status.observedGeneration is recorded as by the Mark helpers.
func (s *Status) ApplyOutcome(err error, opts ...MarkOption) error {
	c := outcome.Classify(err)
	switch c.Class {
	case outcome.ClassConflict:
		return nil
	case outcome.ClassSuccess:
		o := newMarkOptions(opts)
		removes := []string{Reconciling, Stalled}
		if sum := s.Get(o.summary); sum != nil && sum.Status != metav1.ConditionTrue {
			for _, t := range []string{Stalled, Reconciling} {
				if by := s.Get(t); by != nil && by.Reason == sum.Reason {
					removes = append(removes, o.summary)
					break
				}
			}
		}
		return s.mark(o, nil, removes...)
	case outcome.ClassTerminal:
		return s.MarkStalled(c.Reason, c.Message, opts...)
	default:
		return s.MarkReconciling(c.Reason, c.Message, opts...)
	}
}

func cond(t string, st metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: t, Status: st, Reason: reason, Message: message}
}

// mark validates every condition before changing anything, so a bad reason
// leaves the object untouched; then it sets, removes, and records
// observedGeneration.
func (s *Status) mark(o markOptions, sets []metav1.Condition, removes ...string) error {
	if err := s.writable(); err != nil {
		return err
	}
	for _, c := range sets {
		if err := Validate(c); err != nil {
			return fmt.Errorf("conditions: %s: %w", s.describe(), err)
		}
	}
	for _, c := range sets {
		if err := s.set(c, o.setOptions); err != nil {
			return err
		}
	}
	for _, t := range removes {
		if err := s.Remove(t); err != nil {
			return err
		}
	}
	s.observe(false)
	return nil
}

// IsStale reports whether the status describes an older generation than the
// spec: some condition's observedGeneration, or status.observedGeneration
// when the object has one, is below metadata.generation. A condition whose
// observedGeneration is 0 (unset) is not counted, because it makes no claim
// about a generation. An object without readable conditions or
// observedGeneration is not stale.
func (s *Status) IsStale() bool {
	gen := s.obj.GetGeneration()
	if og, ok := s.ObservedGeneration(); ok && og < gen {
		return true
	}
	cs, err := s.read()
	if err != nil {
		return false
	}
	for _, c := range cs {
		if c.ObservedGeneration != 0 && c.ObservedGeneration < gen {
			return true
		}
	}
	return false
}

// MarkReady resolves obj's [Status] and calls [Status.MarkReady].
func MarkReady(obj client.Object, reason, message string, opts ...MarkOption) error {
	s, err := StatusOf(obj)
	if err != nil {
		return err
	}
	return s.MarkReady(reason, message, opts...)
}

// MarkReconciling resolves obj's [Status] and calls [Status.MarkReconciling].
func MarkReconciling(obj client.Object, reason, message string, opts ...MarkOption) error {
	s, err := StatusOf(obj)
	if err != nil {
		return err
	}
	return s.MarkReconciling(reason, message, opts...)
}

// MarkStalled resolves obj's [Status] and calls [Status.MarkStalled].
func MarkStalled(obj client.Object, reason, message string, opts ...MarkOption) error {
	s, err := StatusOf(obj)
	if err != nil {
		return err
	}
	return s.MarkStalled(reason, message, opts...)
}

// ApplyOutcome resolves obj's [Status] and calls [Status.ApplyOutcome].
func ApplyOutcome(obj client.Object, err error, opts ...MarkOption) error {
	s, serr := StatusOf(obj)
	if serr != nil {
		return serr
	}
	return s.ApplyOutcome(err, opts...)
}

// SetObservedGeneration sets obj's status.observedGeneration to its
// metadata.generation; see [Status.SetObservedGeneration]. The Mark helpers
// and ApplyOutcome record it implicitly, but only where that cannot cause a
// write on every reconcile: for typed objects whose status has the field, for
// [ObservedGenerationAccessor] implementations, and for
// *unstructured.Unstructured only when status.observedGeneration is already
// present (a field the schema lacks would be pruned by the API server and
// re-added by every reconcile).
func SetObservedGeneration(obj client.Object) error {
	s, err := StatusOf(obj)
	if err != nil {
		return err
	}
	return s.SetObservedGeneration()
}

// IsStale resolves obj's [Status] and calls [Status.IsStale]; an object that
// cannot be resolved is not stale.
func IsStale(obj client.Object) bool {
	s, err := StatusOf(obj)
	return err == nil && s.IsStale()
}

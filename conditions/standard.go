package conditions

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/outcome"
)

// MarkReady records success: Ready=True with reason and message; Reconciling
// and Stalled are removed (kstatus: Current). Degraded and other conditions
// are not touched. It also records status.observedGeneration (see
// [SetObservedGeneration] for when that happens). Like every Mark helper it
// validates first: an invalid reason changes nothing.
func MarkReady(obj client.Object, reason, message string, opts ...Option) error {
	return mark(obj, opts, []metav1.Condition{cond(Ready, metav1.ConditionTrue, reason, message)}, Reconciling, Stalled)
}

// MarkReconciling records work in progress: Reconciling=True with reason and
// message; Stalled is removed; Ready is set to Unknown with the same reason
// and message only when it has never been reported — otherwise it keeps
// describing the last observed state, and its observedGeneration shows which
// generation that was (kstatus: InProgress either way). It also records
// status.observedGeneration.
func MarkReconciling(obj client.Object, reason, message string, opts ...Option) error {
	sets := []metav1.Condition{cond(Reconciling, metav1.ConditionTrue, reason, message)}
	if Get(obj, Ready) == nil {
		sets = append(sets, cond(Ready, metav1.ConditionUnknown, reason, message))
	}
	return mark(obj, opts, sets, Stalled)
}

// MarkStalled records that the controller gave up until the spec changes:
// Stalled=True and Ready=False, both with reason and message; Reconciling is
// removed (kstatus: Failed). It also records status.observedGeneration.
func MarkStalled(obj client.Object, reason, message string, opts ...Option) error {
	return mark(obj, opts, []metav1.Condition{
		cond(Stalled, metav1.ConditionTrue, reason, message),
		cond(Ready, metav1.ConditionFalse, reason, message),
	}, Reconciling)
}

// ApplyOutcome records the outcome of a reconcile, classified by
// [outcome.Classify], in obj's conditions:
//
//	Success             Reconciling and Stalled removed; Ready is left to the caller (MarkReady or SetSummary)
//	Conflict            nothing at all changes: the retry comes at once and the conflict says nothing about the object
//	Transient           MarkReconciling with the error's reason and message
//	DependencyNotReady  MarkReconciling with the reason and message
//	Terminal            MarkStalled with the reason and message
//
// Transient errors do not set Degraded: Degraded describes the managed
// workload, and a failed API call says nothing about it. A reconcile that is
// still waiting for something must return [outcome.DependencyNotReady] rather
// than nil, or Success removes its Reconciling condition. Except for Conflict,
// status.observedGeneration is recorded as by the Mark helpers.
func ApplyOutcome(obj client.Object, err error, opts ...Option) error {
	c := outcome.Classify(err)
	switch c.Class {
	case outcome.ClassConflict:
		return nil
	case outcome.ClassSuccess:
		return mark(obj, opts, nil, Reconciling, Stalled)
	case outcome.ClassTerminal:
		return MarkStalled(obj, c.Reason, c.Message, opts...)
	default:
		return MarkReconciling(obj, c.Reason, c.Message, opts...)
	}
}

func cond(t string, s metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: message}
}

// mark validates every condition before changing anything, so a bad reason
// leaves obj untouched; then it sets, removes, and records observedGeneration.
func mark(obj client.Object, opts []Option, sets []metav1.Condition, removes ...string) error {
	if _, err := writable(obj); err != nil {
		return err
	}
	for _, c := range sets {
		if err := Validate(c); err != nil {
			return fmt.Errorf("conditions: %s: %w", describe(obj), err)
		}
	}
	for _, c := range sets {
		if err := Set(obj, c, opts...); err != nil {
			return err
		}
	}
	for _, t := range removes {
		if err := Remove(obj, t); err != nil {
			return err
		}
	}
	observeGeneration(obj, false)
	return nil
}

// SetObservedGeneration sets status.observedGeneration to obj's
// metadata.generation. It fails for an object that has no such field: a typed
// status without an int64 observedGeneration field and no
// [ObservedGenerationAccessor]. For *unstructured.Unstructured it always
// writes the field; the caller asserts the schema has it.
//
// The Mark helpers and ApplyOutcome record it implicitly, but only where that
// cannot cause a write on every reconcile: for typed objects whose status has
// the field, for ObservedGenerationAccessor implementations, and for
// *unstructured.Unstructured only when status.observedGeneration is already
// present (a field the schema lacks would be pruned by the API server and
// re-added by every reconcile).
func SetObservedGeneration(obj client.Object) error {
	if !observeGeneration(obj, true) {
		return fmt.Errorf("conditions: %s has no status.observedGeneration: %w", describe(obj), ErrNoConditions)
	}
	return nil
}

func observeGeneration(obj client.Object, explicit bool) bool {
	a, err := accessFor(obj)
	if err != nil || a.setObserved == nil {
		return false
	}
	if u, ok := obj.(*unstructured.Unstructured); ok && !explicit {
		if _, isOG := obj.(ObservedGenerationAccessor); !isOG {
			if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "observedGeneration"); !found {
				return false
			}
		}
	}
	a.setObserved(obj.GetGeneration())
	return true
}

// IsStale reports whether obj's status describes an older generation than its
// spec: some condition's observedGeneration, or status.observedGeneration when
// the object has one, is below metadata.generation. A condition whose
// observedGeneration is 0 (unset) is not counted, because it makes no claim
// about a generation. An object without readable conditions or
// observedGeneration is not stale.
func IsStale(obj client.Object) bool {
	gen := obj.GetGeneration()
	a, err := accessFor(obj)
	if err != nil {
		return false
	}
	if a.observed != nil {
		if og, ok := a.observed(); ok && og < gen {
			return true
		}
	}
	if a.get == nil {
		return false
	}
	cs, err := a.get()
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

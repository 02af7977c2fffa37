package conditions

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNoSubConditions is returned by [Summarize] when no sub-conditions were given.
var ErrNoSubConditions = errors.New("conditions: summary has no sub-conditions (use WithPositive or WithNegative)")

// Summarize computes the condition of type target (usually [Ready]) from
// the sub-conditions named with [WithPositive] and [WithNegative], without
// changing obj. The rules:
//
//   - Each sub-condition is healthy, at fault or unknown. Positive polarity:
//     True healthy, False at fault, Unknown unknown, missing unknown (not yet
//     reported). Negative polarity: True at fault, False healthy, Unknown
//     unknown, and missing healthy — an abnormal-true condition is removed
//     when it does not apply, as kstatus expects of Stalled and Reconciling.
//   - Status: False if any sub-condition is at fault (so any negative-polarity
//     True makes the target False); otherwise Unknown if any is unknown;
//     otherwise True.
//   - Reason: for False, the reason of the first sub-condition at fault; for
//     Unknown, the reason of the first unknown one (NotYetReported when it is
//     missing); for True, WithTrueReason (default Succeeded). "First" is in
//     [Compare] order, so the result does not depend on option order.
//   - Message: every sub-condition at fault, then every unknown one, each in
//     Compare order, as "Type: message" ("Type: Status (Reason)" when the
//     message is empty, "Type: Unknown (not yet reported)" when missing),
//     joined with "; ". Empty when True.
//
// It fails when no sub-conditions are given, when the target is also a
// sub-condition, when a type is given both polarities, or when obj's
// conditions cannot be read.
func Summarize(obj client.Object, target string, opts ...SummaryOption) (metav1.Condition, error) {
	o := newSummaryOptions(opts)
	if len(o.positive)+len(o.negative) == 0 {
		return metav1.Condition{}, ErrNoSubConditions
	}
	negative := map[string]bool{}
	for _, t := range o.negative {
		negative[t] = true
	}
	subs := make([]string, 0, len(o.positive)+len(o.negative))
	for _, t := range append(slices.Clone(o.positive), o.negative...) {
		if t == target {
			return metav1.Condition{}, fmt.Errorf("conditions: summary target %q is also one of its sub-conditions", t)
		}
		if negative[t] && slices.Contains(o.positive, t) {
			return metav1.Condition{}, fmt.Errorf("conditions: summary sub-condition %q is both positive and negative", t)
		}
		if !slices.Contains(subs, t) {
			subs = append(subs, t)
		}
	}
	slices.SortFunc(subs, Compare)
	cs, err := List(obj)
	if err != nil {
		return metav1.Condition{}, err
	}
	var faults, unknowns []string
	var faultReason, unknownReason string
	for _, t := range subs {
		i := slices.IndexFunc(cs, func(c metav1.Condition) bool { return c.Type == t })
		if i < 0 {
			if !negative[t] {
				unknowns = append(unknowns, t+": Unknown (not yet reported)")
				if unknownReason == "" {
					unknownReason = ReasonNotYetReported
				}
			}
			continue
		}
		c := cs[i]
		bad := c.Status == metav1.ConditionFalse
		if negative[t] {
			bad = c.Status == metav1.ConditionTrue
		}
		entry := t + ": " + c.Message
		if c.Message == "" {
			entry = fmt.Sprintf("%s: %s (%s)", t, c.Status, c.Reason)
		}
		switch {
		case bad:
			faults = append(faults, entry)
			if faultReason == "" {
				faultReason = c.Reason
			}
		case c.Status != metav1.ConditionTrue && c.Status != metav1.ConditionFalse:
			unknowns = append(unknowns, entry)
			if unknownReason == "" {
				unknownReason = c.Reason
			}
		}
	}
	out := metav1.Condition{Type: target, Status: metav1.ConditionTrue, Reason: o.trueReason}
	switch {
	case len(faults) > 0:
		out.Status, out.Reason = metav1.ConditionFalse, faultReason
	case len(unknowns) > 0:
		out.Status, out.Reason = metav1.ConditionUnknown, unknownReason
	}
	if !reasonPattern.MatchString(out.Reason) { // a foreign sub-condition may carry no reason
		out.Reason = ReasonNotYetReported
		if out.Status == metav1.ConditionFalse {
			out.Reason = "SubConditionFalse"
		}
	}
	out.Message = strings.Join(append(faults, unknowns...), "; ")
	out.ObservedGeneration = obj.GetGeneration()
	return out, nil
}

// SetSummary computes the condition of type target with [Summarize] and
// writes it with [Set] (so lastTransitionTime moves only when its status
// changes).
func SetSummary(obj client.Object, target string, opts ...SummaryOption) error {
	c, err := Summarize(obj, target, opts...)
	if err != nil {
		return err
	}
	s, err := StatusOf(obj)
	if err != nil {
		return err
	}
	return s.set(c, newSummaryOptions(opts).setOptions)
}

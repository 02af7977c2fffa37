package workflow

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/outcome"
)

// ConditionChildrenReady is the summary condition [SetConditions] writes by
// default.
const ConditionChildrenReady = "ChildrenReady"

// ReasonAllReady is the summary condition's reason when every node is ready.
const ReasonAllReady = "AllChildrenReady"

// ConditionOption configures [SetConditions].
type ConditionOption func(*conditionOptions)

type conditionOptions struct {
	summary string
	prefix  string
	perNode bool
}

// WithSummaryCondition names the summary condition's type (default
// [ConditionChildrenReady]).
func WithSummaryCondition(t string) ConditionOption {
	return func(o *conditionOptions) { o.summary = t }
}

// WithNodeConditions also writes one condition per node, of type prefix
// followed by the node's name.
func WithNodeConditions(prefix string) ConditionOption {
	return func(o *conditionOptions) { o.prefix, o.perNode = prefix, true }
}

// SetConditions writes a report into obj's status conditions, in memory
// (conditions.Set: lastTransitionTime changes only with the status, so an
// unchanged report changes nothing and a status patcher sends nothing):
//
//   - the summary condition: True with reason [ReasonAllReady] when the report
//     is ready; otherwise False with the reason and message outcome gives
//     [Report.Err] (e.g. ChildNotReady: child "db": StatefulSet app/db not
//     ready: 0 of 1 replicas ready (waiting for it: "app", "web")).
//   - with [WithNodeConditions], per node: True (reason from the readiness
//     check, or Inactive) when the node is ready or inactive and gone, False
//     with the node's reason and message otherwise.
//
// It writes no kstatus condition itself: pass the report's error through
// conditions.ApplyOutcome (the reconciler does) to get Reconciling=True while
// a child is not ready and Stalled=True when one failed terminally with
// nothing else in progress, which kstatus reads as InProgress and Failed;
// a Ready summary (conditions.SetSummary WithPositive(ConditionChildrenReady))
// makes it Current.
func SetConditions(obj client.Object, rep *Report, opts ...ConditionOption) error {
	o := conditionOptions{summary: ConditionChildrenReady}
	for _, opt := range opts {
		opt(&o)
	}
	st, err := conditions.StatusOf(obj)
	if err != nil {
		return err
	}
	summary := metav1.Condition{Type: o.summary, Status: metav1.ConditionTrue, Reason: ReasonAllReady,
		Message: fmt.Sprintf("%d children ready", countReady(rep))}
	if err := rep.Err(); err != nil {
		c := outcome.Classify(err)
		summary.Status, summary.Reason, summary.Message = metav1.ConditionFalse, c.Reason, c.Message
	}
	if err := st.Set(summary); err != nil {
		return err
	}
	if !o.perNode {
		return nil
	}
	for _, r := range rep.Nodes {
		c := metav1.Condition{Type: o.prefix + r.Name, Status: metav1.ConditionFalse,
			Reason: outcome.SanitizeReason(r.Reason, "Unknown"), Message: r.Message}
		if r.satisfied() {
			c.Status = metav1.ConditionTrue
		}
		if err := st.Set(c); err != nil {
			return err
		}
	}
	return nil
}

// SetTeardownCondition writes the error of an unfinished [Workflow.Teardown]
// into obj's summary condition (type [ConditionChildrenReady] unless
// [WithSummaryCondition] says otherwise; [WithNodeConditions] is ignored):
// False with the error's outcome reason ([ReasonTeardownWaiting] or
// [ReasonTeardownStuck]) and message, which names the blocking child. A nil
// err (teardown done) writes nothing: the object is about to go.
func SetTeardownCondition(obj client.Object, err error, opts ...ConditionOption) error {
	if err == nil {
		return nil
	}
	o := conditionOptions{summary: ConditionChildrenReady}
	for _, opt := range opts {
		opt(&o)
	}
	c := outcome.Classify(err)
	return conditions.Set(obj, metav1.Condition{Type: o.summary, Status: metav1.ConditionFalse, Reason: c.Reason, Message: c.Message})
}

func countReady(rep *Report) int {
	n := 0
	for _, r := range rep.Nodes {
		if r.State == StateReady {
			n++
		}
	}
	return n
}

package reconciler

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
)

// Operational controls: annotations a person (or a tool) sets on an object
// to steer its reconciliation, in the conventions of Flux (requestedAt,
// lastHandledReconcileAt) and Crossplane (paused).
const (
	// AnnotationPaused, set to "true", pauses the object: each reconcile
	// only makes sure the condition [ConditionPaused] says so (one status
	// write when the pause begins, none after), and does nothing else — no
	// finalizer added or run (a paused object being deleted waits, with its
	// finalizer, until the pause ends), no child written or pruned, no other
	// condition changed. Removing the annotation (or any other value)
	// resumes; the next reconcile removes ConditionPaused.
	AnnotationPaused = "opkit.dev/paused"
	// AnnotationObserveOnly, set to "true", makes reconciles of a live
	// object compute and write its status — the StatusFunc runs and reads
	// the children as they are — without writing anything else: no finalizer
	// added, no child created, patched or pruned, no phase step. Deletion is
	// not affected: a deleting object runs its finalizer as usual.
	AnnotationObserveOnly = "opkit.dev/observe-only"
	// AnnotationReconcileRequestedAt asks for a reconcile now: any new value
	// (by convention the current time, as `kubectl annotate --overwrite
	// ... opkit.dev/reconcile-requested-at="$(date -u +%FT%TZ)"`) triggers
	// one reconcile, whatever backoff or Stalled state the object is in.
	// When it has been handled, the value is copied to
	// status.[StatusLastHandledReconcileAt] if T's status has that string
	// field, so a tool can wait for it.
	AnnotationReconcileRequestedAt = "opkit.dev/reconcile-requested-at"
	// StatusLastHandledReconcileAt is the JSON name of the status string
	// field that receives the last handled [AnnotationReconcileRequestedAt]
	// value (Flux's status.lastHandledReconcileAt).
	StatusLastHandledReconcileAt = "lastHandledReconcileAt"
	// ConditionPaused is True while [AnnotationPaused] is set, with reason
	// [ReasonPaused]; it is removed when the pause ends.
	ConditionPaused = "Paused"
	// ReasonPaused is the reason of [ConditionPaused].
	ReasonPaused = "ReconcilePaused"
)

// isSet reports an annotation set to "true".
func isSet(obj client.Object, annotation string) bool {
	return obj.GetAnnotations()[annotation] == "true"
}

// pause records that obj is paused: ConditionPaused, written only when it
// is not there yet. A kind without conditions gets nothing written.
func (r *Reconciler[T]) pause(ctx context.Context, obj T) error {
	st, err := conditions.StatusOf(obj)
	if err != nil || !st.Writable() {
		return nil //nolint:nilerr // a kind without conditions: nothing to say, nothing to do
	}
	if r.share != nil && !r.share.summary() {
		return nil // the summary owner says so
	}
	if c := st.Get(ConditionPaused); c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonPaused {
		// Already said; not even a new generation is worth a write.
		return nil
	}
	patcher := conditions.NewStatusPatcher(obj)
	var before map[string]any
	if r.share != nil {
		if before, err = r.share.part(obj); err != nil {
			return err
		}
	}
	if err := st.Set(metav1.Condition{
		Type: ConditionPaused, Status: metav1.ConditionTrue, Reason: ReasonPaused,
		Message: "reconciliation is paused by the annotation " + AnnotationPaused + `: "true"; remove it to resume`,
	}); err != nil {
		return err
	}
	if r.share != nil {
		return r.writeShared(ctx, obj, before)
	}
	return r.steps.WriteStatus(ctx, patcher, obj)
}

// handled copies a reconcile-now request's value to
// status.lastHandledReconcileAt where T's status has that field.
func handled(st *conditions.Status, obj client.Object) {
	v, ok := obj.GetAnnotations()[AnnotationReconcileRequestedAt]
	if !ok {
		return
	}
	cur, _, err := st.String(StatusLastHandledReconcileAt)
	if err != nil || cur == v { // no such status field (conditions.ErrNoStatusField), or already recorded
		return
	}
	_ = st.SetString(StatusLastHandledReconcileAt, v)
}

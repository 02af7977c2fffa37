package reconciler

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/outcome"
)

// StatusShare says which part of T's status a controller writes when
// several controllers reconcile the same object (seed §4.1: a bootstrap and
// a backup controller on one Database), each owning its own conditions and
// status fields. Give every controller of T one ([Builder.ShareStatus]).
//
// Each controller then writes its part with server-side apply of the status
// subresource, field manager = the controller name, sending only the
// conditions and fields it owns. status.conditions must be a map-typed list
// keyed by type (kubebuilder markers +listType=map and +listMapKey=type, as
// metav1.Condition lists conventionally are): the API server then merges
// each condition separately, so a controller can never overwrite or remove
// another's condition, whatever it read from a stale cache — no lost
// condition and no optimistic-lock retries. Nothing is sent when the owned
// part did not change, so a steady state still costs no request.
type StatusShare struct {
	// Conditions are the condition types this controller sets and removes.
	Conditions []string
	// Fields are the JSON names of the top-level status fields (status.<name>)
	// it writes.
	Fields []string
	// Outcome is the condition type that reports this controller's own
	// outcome. Empty makes this controller the summary owner: it also owns
	// Ready, Reconciling, Stalled, Paused, status.observedGeneration and
	// status.lastHandledReconcileAt, applies the outcome to them as a sole
	// controller does, and is reconciled again when a condition another
	// controller owns changes (so its Ready can summarise them). Set it for
	// every other controller: a success leaves Outcome as the StatusFunc set
	// it (True, reason Succeeded, when it set nothing); an error sets it
	// False with the error's reason and message (a conflict changes
	// nothing); Ready, Reconciling and Stalled are never touched, and pause
	// writes nothing.
	Outcome string
}

// ShareStatus makes this controller one of several that reconcile T, owning
// the part of T's status s names; see [StatusShare].
func (b *Builder[T]) ShareStatus(s StatusShare) *Builder[T] {
	b.share = &s
	return b
}

// shared is a StatusShare resolved for one reconciler.
type shared struct {
	StatusShare
	owned []string // condition types
}

func newShared(s StatusShare) *shared {
	sh := &shared{StatusShare: s, owned: slices.Clone(s.Conditions)}
	if s.Outcome == "" {
		sh.owned = append(sh.owned, conditions.Ready, conditions.Reconciling, conditions.Stalled, ConditionPaused)
		sh.Fields = append(slices.Clone(s.Fields), "observedGeneration", StatusLastHandledReconcileAt)
	} else {
		sh.owned = append(sh.owned, s.Outcome)
	}
	return sh
}

func (sh *shared) summary() bool { return sh.Outcome == "" }

// part is the owned part of obj's status, as JSON values.
func (sh *shared) part(obj client.Object) (map[string]any, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	status, _, _ := unstructured.NestedMap(u, "status")
	out := map[string]any{}
	var conds []any
	if cs, ok := status["conditions"].([]any); ok {
		for _, c := range cs {
			if m, ok := c.(map[string]any); ok && slices.Contains(sh.owned, fmt.Sprint(m["type"])) {
				conds = append(conds, m)
			}
		}
	}
	out["conditions"] = conds
	for _, f := range sh.Fields {
		if v, ok := status[f]; ok {
			out[f] = v
		}
	}
	return out, nil
}

// applyOutcome applies err to a non-summary controller's Outcome condition.
func (sh *shared) applyOutcome(st *conditions.Status, err error) error {
	c := outcome.Classify(err)
	switch c.Class {
	case outcome.ClassConflict:
		return nil
	case outcome.ClassSuccess:
		if st.Get(sh.Outcome) == nil {
			return st.Set(metav1.Condition{Type: sh.Outcome, Status: metav1.ConditionTrue, Reason: "Succeeded"})
		}
		return nil
	}
	return st.Set(metav1.Condition{Type: sh.Outcome, Status: metav1.ConditionFalse, Reason: c.Reason, Message: c.Message})
}

// writeShared applies the owned part of obj's status when it differs from
// before.
func (r *Reconciler[T]) writeShared(ctx context.Context, obj T, before map[string]any) error {
	after, err := r.share.part(obj)
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(before, after) {
		return nil
	}
	gvk, err := apiutil.GVKForObject(obj, r.client.Scheme())
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": after}}
	if after["conditions"] == nil {
		after["conditions"] = []any{}
	}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	if err := r.client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(r.name), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply status of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// foreignConditionsChanged passes updates that change a condition this
// controller does not own: how a summary owner hears of the others' work.
func foreignConditionsChanged(sh *shared) predicate.Predicate {
	foreign := func(o client.Object) []metav1.Condition {
		cs, _ := conditions.List(o)
		return slices.DeleteFunc(cs, func(c metav1.Condition) bool { return slices.Contains(sh.owned, c.Type) })
	}
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return false
			}
			a, b := foreign(e.ObjectOld), foreign(e.ObjectNew)
			return !slices.EqualFunc(a, b, func(x, y metav1.Condition) bool {
				return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message && x.ObservedGeneration == y.ObservedGeneration
			})
		},
	}
}

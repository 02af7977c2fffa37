package helm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/workflow"
)

var gkJob = schema.GroupKind{Group: "batch", Kind: "Job"}

// hookObjects are the identities of rec's hooks (kept, not pruned, while
// the revision runs).
func hookObjects(rec *rspb.Release) []client.Object {
	var out []client.Object
	for _, h := range rec.Hooks {
		objs, err := parseObjects(h.Path, h.Manifest)
		if err != nil {
			continue
		}
		for _, o := range objs {
			out = append(out, o)
		}
	}
	return out
}

// runHooks runs rec's hooks for event, in Helm's order (weight, then name),
// one at a time: a hook object is created, controlled by obj (after deleting one left by
// another revision: before-hook-creation), a Job is waited for until it
// completes (DependencyNotReady meanwhile), any other kind counts as done
// once created. Each finished hook is recorded in the release record
// (LastRun), so a later reconcile does not run it again; a failed Job fails
// the revision. Delete policies hook-succeeded and hook-failed are honoured.
func (r *Releaser[T]) runHooks(ctx context.Context, obj T, store *storage.Storage, rec *rspb.Release, event rspb.HookEvent) (ensure.ChangeSet, error) {
	var hooks []*rspb.Hook
	for _, h := range rec.Hooks {
		if slices.Contains(h.Events, event) {
			hooks = append(hooks, h)
		}
	}
	slices.SortStableFunc(hooks, func(a, b *rspb.Hook) int {
		if a.Weight != b.Weight {
			return a.Weight - b.Weight
		}
		return strings.Compare(a.Name, b.Name)
	})
	var cs ensure.ChangeSet
	rev := strconv.Itoa(rec.Version)
	for _, h := range hooks {
		what := fmt.Sprintf("%s hook %s %s/%s", event, h.Kind, rec.Namespace, h.Name)
		switch h.LastRun.Phase {
		case rspb.HookPhaseSucceeded:
			continue
		case rspb.HookPhaseFailed:
			return cs, outcome.Terminal(ReasonHookFailed, fmt.Errorf("release %s revision %d failed: %s failed", rec.Name, rec.Version, what))
		}
		objs, err := parseObjects(h.Path, h.Manifest)
		if err != nil || len(objs) != 1 {
			return cs, r.fail(obj, store, rec, ReasonHookFailed, what, outcome.Terminal(ReasonRenderFailed, fmt.Errorf("hook manifest: %d objects: %w", len(objs), err)))
		}
		u := objs[0]
		anns := u.GetAnnotations()
		if anns == nil {
			anns = map[string]string{}
		}
		anns[AnnotationHookRevision] = rev
		u.SetAnnotations(anns)
		if u.GetNamespace() == "" {
			u.SetNamespace(obj.GetNamespace())
		}
		desired, err := r.typed(u, obj.GetNamespace())
		if err != nil {
			return cs, r.fail(obj, store, rec, ReasonHookFailed, what, err)
		}
		gk := u.GroupVersionKind().GroupKind()
		live := r.empty(u.GroupVersionKind())
		err = r.c.Get(ctx, client.ObjectKeyFromObject(desired), live)
		switch {
		case apierrors.IsNotFound(err):
			// Created once, never patched: a hook is a run, not a declared
			// state. Controlled by obj, so the garbage collector removes it
			// with obj and its events reconcile obj.
			if err := controllerutil.SetControllerReference(obj, desired, r.c.Scheme()); err != nil {
				return cs, err
			}
			if err := r.c.Create(ctx, desired); err != nil {
				if apierrors.IsAlreadyExists(err) {
					return cs, outcome.DependencyNotReady("HookRunning", what+" exists already; waiting for the cache to show it", r.opts.hookRecheck)
				}
				if outcome.Classify(err).Class == outcome.ClassTerminal {
					return cs, r.fail(obj, store, rec, ReasonHookFailed, what, err)
				}
				return cs, fmt.Errorf("create %s: %w", what, err)
			}
			cs = append(cs, ensure.Change{GVK: u.GroupVersionKind(), Namespace: desired.GetNamespace(), Name: desired.GetName(), Action: ensure.Created})
			if h.LastRun.StartedAt.IsZero() {
				h.LastRun = rspb.HookExecution{StartedAt: r.opts.clock.Now(), Phase: rspb.HookPhaseRunning}
			}
			live = desired
			if gk == gkJob {
				return cs, outcome.DependencyNotReady("HookRunning", what+" created; waiting for it to complete", r.opts.hookRecheck)
			}
		case err != nil:
			return cs, err
		case live.GetAnnotations()[AnnotationHookRevision] != rev:
			// Left by an earlier revision: before-hook-creation.
			if !owned(obj, live) {
				return cs, r.fail(obj, store, rec, ReasonHookFailed, what, outcome.Terminal(ensure.ReasonNotOwned,
					errors.New("an object of that name exists and is not this release's")))
			}
			if err := r.deleteHook(ctx, live); err != nil {
				return cs, err
			}
			return cs, outcome.DependencyNotReady("HookReplacing", what+": waiting for the previous revision's hook object to be deleted", r.opts.hookRecheck)
		case gk == gkJob:
			rd := workflow.JobReady(live)
			if rd.Failed {
				h.LastRun.Phase, h.LastRun.CompletedAt = rspb.HookPhaseFailed, r.opts.clock.Now()
				if slices.Contains(h.DeletePolicies, rspb.HookFailed) {
					if err := r.deleteHook(ctx, live); err != nil {
						return cs, err
					}
				}
				return cs, r.fail(obj, store, rec, ReasonHookFailed, what, outcome.Terminal(ReasonHookFailed, errors.New(rd.Message)))
			}
			if !rd.Ready {
				return cs, outcome.DependencyNotReady("HookRunning", fmt.Sprintf("waiting for %s: %s", what, rd.Message), r.opts.hookRecheck)
			}
		}
		if h.LastRun.StartedAt.IsZero() {
			h.LastRun.StartedAt = r.opts.clock.Now()
		}
		h.LastRun.Phase, h.LastRun.CompletedAt = rspb.HookPhaseSucceeded, r.opts.clock.Now()
		if err := store.Update(rec); err != nil {
			return cs, fmt.Errorf("write release record %s.v%d: %w", rec.Name, rec.Version, err)
		}
		if slices.Contains(h.DeletePolicies, rspb.HookSucceeded) {
			if err := r.deleteHook(ctx, live); err != nil {
				return cs, err
			}
		}
	}
	return cs, nil
}

// deleteHook deletes a hook object (and a Job's Pods) if it is there.
func (r *Releaser[T]) deleteHook(ctx context.Context, live client.Object) error {
	if live.GetUID() == "" {
		fresh := r.empty(live.GetObjectKind().GroupVersionKind())
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(live), fresh); err != nil {
			return client.IgnoreNotFound(err)
		}
		live = fresh
	}
	uid := live.GetUID()
	err := r.c.Delete(ctx, live, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete hook %s: %w", describe(live, ""), err)
	}
	return nil
}

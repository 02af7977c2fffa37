package helm

import (
	"context"
	"errors"
	"fmt"

	rcommon "helm.sh/helm/v4/pkg/release/common"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/reconciler"
	"github.com/opkit/opkit/workflow"
)

// UninstallStep is the name of the finalizer step [Releaser.Register] adds.
const UninstallStep = "helm-uninstall"

// Register composes r with b: r's [Releaser.Sync] becomes b's Sync step
// (reconciler.Steps), writing through b's Ensurer, and b gets a finalizer
// called finalizerName whose steps are finOpts' followed by [UninstallStep]
// (the release's objects deleted in reverse workflow order, then its
// history). Call it after b's Owns and Observability declarations and before
// Complete; it replaces a Finalizer or WithSteps declared on b before.
// Declare with Owns the kinds the chart renders (unstructured objects with
// their GroupVersionKind, or typed ones) to have drift on them corrected at
// once and, for Jobs, hooks followed by events; other kinds are corrected
// on the next reconcile.
func (r *Releaser[T]) Register(b *reconciler.Builder[T], finalizerName string, finOpts ...finalizer.Option) *reconciler.Builder[T] {
	r.ensurer, r.ensurerErr = b.Ensurer()
	b.WithSteps(reconciler.Steps[T]{Sync: r.sync, WriteStatus: r.writeStatus})
	return b.Finalizer(finalizerName, append(finOpts, finalizer.WithStep(UninstallStep, r.Uninstall))...)
}

// sync is [Releaser.Sync] remembering the object as it was read, for
// writeStatus.
func (r *Releaser[T]) sync(ctx context.Context, obj T) (ensure.ChangeSet, error) {
	r.snapshots.Store(obj.GetUID(), obj.DeepCopyObject())
	return r.Sync(ctx, obj)
}

// writeStatus writes the status with an optimistic lock: the release status
// must never be merged into a newer one a stale cached copy did not show (a
// field equal in the stale copy would be left out of the patch).
func (r *Releaser[T]) writeStatus(ctx context.Context, p *conditions.StatusPatcher[T], obj T) error {
	snap, ok := r.snapshots.LoadAndDelete(obj.GetUID())
	if !ok {
		_, err := p.Patch(ctx, r.c, obj)
		return err
	}
	_, err := conditions.NewStatusPatcher(snap.(T), conditions.WithOptimisticLock()).Patch(ctx, r.c, obj)
	return err
}

// Uninstall is the finalizer step of [Releaser.Register]: helm uninstall.
// It deletes the objects of the release's latest revision that are obj's
// (reverse dependency order: Namespaces and CRDs last, each only once the
// objects depending on it are gone), then every record of the release's
// history, so `helm list` no longer shows it. Done when both are gone.
func (r *Releaser[T]) Uninstall(ctx context.Context, obj T) (finalizer.StepResult, error) {
	store := r.store(obj.GetNamespace())
	hist, err := store.History(obj.GetName())
	if errors.Is(err, driver.ErrReleaseNotFound) || err == nil && len(hist) == 0 {
		return finalizer.Done(), nil
	}
	if err != nil {
		return finalizer.StepResult{}, fmt.Errorf("%s/%s: read release history: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	// The objects of every revision that may still have some: the latest,
	// and a deployed one it has not superseded yet.
	seen := map[string]bool{}
	var nodes []workflow.Node
	var first []string
	latest := 0
	for _, h := range hist {
		rec, err := asV1(h)
		if err != nil {
			return finalizer.StepResult{}, err
		}
		latest = max(latest, rec.Version)
	}
	for _, h := range hist {
		rec, _ := asV1(h)
		if rec.Version != latest && rec.Info.Status != rcommon.StatusDeployed {
			continue
		}
		objs, _ := parseManifest(rec.Manifest)
		for _, o := range objs {
			id := objectID(o, obj.GetNamespace())
			if seen[id] {
				continue
			}
			if _, err := r.c.IsObjectNamespaced(o); err != nil {
				continue // a kind no longer served: nothing of it is left
			}
			seen[id] = true
			typed, err := r.typed(o, obj.GetNamespace())
			if err != nil {
				continue // never applied: not in the scheme's shape
			}
			n := workflow.Node{Name: fmt.Sprintf("%s-%d", nodeName(o), len(nodes)), Object: typed}
			if gk := o.GroupVersionKind().GroupKind(); gk == gkCRD || gk == gkNamespace {
				first = append(first, n.Name)
			}
			nodes = append(nodes, n)
		}
	}
	for i := range nodes {
		if gk := nodes[i].Object.GetObjectKind().GroupVersionKind().GroupKind(); gk != gkCRD && gk != gkNamespace {
			nodes[i].DependsOn = first
		}
	}
	wf, err := workflow.New(r.c, nil, nodes, workflow.WithOwnership(owned))
	if err != nil {
		return finalizer.StepResult{}, outcome.Terminal(ReasonRenderFailed, err)
	}
	rep, err := wf.Teardown(ctx, obj)
	if err != nil || !rep.Done {
		c := outcome.Classify(err)
		if err != nil && c.Class != outcome.ClassDependencyNotReady {
			return finalizer.StepResult{}, err
		}
		if err != nil {
			_ = workflow.SetTeardownCondition(obj, err)
		}
		return finalizer.RequeueAfter(c.RequeueAfter), nil
	}
	for _, h := range hist {
		rec, _ := asV1(h)
		if _, err := store.Delete(rec.Name, rec.Version); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
			return finalizer.StepResult{}, fmt.Errorf("%s/%s: delete release record %s.v%d: %w", obj.GetNamespace(), obj.GetName(), rec.Name, rec.Version, err)
		}
	}
	return finalizer.Done(), nil
}

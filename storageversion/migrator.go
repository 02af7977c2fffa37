package storageversion

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// AnnotationProgress is the annotation on each CRD the [Migrator] works on
// that records its progress as JSON ([Progress]): kubectl shows it, and a
// restarted migrator resumes from it.
const AnnotationProgress = "storageversion.opkit.dev/progress"

// Progress is what [AnnotationProgress] holds.
type Progress struct {
	// StorageVersion is the version objects are being rewritten to.
	StorageVersion string `json:"storageVersion"`
	// Continue is the list continue token of the next page ("" at the start).
	Continue string `json:"continue,omitempty"`
	// Migrated counts the objects rewritten so far in this migration.
	Migrated int64 `json:"migrated"`
	// Done is set when every object was rewritten and status.storedVersions
	// trimmed to StorageVersion.
	Done bool `json:"done,omitempty"`
	// Failed names the object whose rewrite failed and why; the migration
	// stopped there and trimmed nothing.
	Failed string `json:"failed,omitempty"`
}

// Option configures a [Migrator].
type Option func(*Migrator)

// WithPageSize sets how many objects one List page holds (default 500).
func WithPageSize(n int64) Option { return func(m *Migrator) { m.pageSize = n } }

// WithRateLimit bounds the rewrites to qps per second with bursts of burst
// (default 50/s, burst 100), so a migration never crowds out the
// operator's own requests.
func WithRateLimit(qps float32, burst int) Option {
	return func(m *Migrator) { m.limiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst) }
}

// WithConcurrency sets how many rewrites run at once (default 4); the rate
// limit still bounds them.
func WithConcurrency(n int) Option { return func(m *Migrator) { m.workers = max(n, 1) } }

// WithLogger sets the logger (default: the one in the Start context).
func WithLogger(l logr.Logger) Option { return func(m *Migrator) { m.log = &l } }

// Migrator rewrites every object of the CRDs it is given at their current
// storage version, then trims their status.storedVersions to that version,
// so older versions can be dropped from the CRDs. Add it to the operator's
// manager (it is a manager.Runnable that needs leader election, so one
// replica migrates); it runs once per start and returns.
type Migrator struct {
	c        client.Client
	crds     []string
	pageSize int64
	workers  int
	limiter  flowcontrol.RateLimiter
	log      *logr.Logger
}

// New returns a Migrator for the CRDs named crds (e.g.
// "webapps.apps.example.com"), writing through c — a client that reads
// from the API server directly (the manager's client is fine: unstructured
// objects are not cached unless asked for, and CRDs are read with
// GetAPIReader semantics by fresh Gets). c's scheme must know
// apiextensions.k8s.io/v1.
func New(c client.Client, crds []string, opts ...Option) *Migrator {
	m := &Migrator{c: c, crds: crds, pageSize: 500, workers: 4, limiter: flowcontrol.NewTokenBucketRateLimiter(50, 100)}
	for _, o := range opts {
		o(m)
	}
	return m
}

// NeedLeaderElection makes the manager run the Migrator on the leader only.
func (m *Migrator) NeedLeaderElection() bool { return true }

// Start migrates each CRD in turn and returns. A CRD whose migration fails
// (an object that cannot be rewritten, e.g. a conversion error) records the
// failure in [AnnotationProgress] and is left untrimmed; the others still
// run. Start returns an error only when ctx ends; failures are in the
// progress annotations and the log, so a failed migration does not stop
// the operator.
func (m *Migrator) Start(ctx context.Context) error {
	l := log.FromContext(ctx).WithName("storageversion")
	if m.log != nil {
		l = *m.log
	}
	for _, name := range m.crds {
		if err := m.Migrate(ctx, name); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			l.Error(err, "storage version migration stopped", "crd", name)
			continue
		}
		l.Info("storage version migration done", "crd", name)
	}
	return nil
}

// Migrate runs the migration of one CRD to completion: every object is
// rewritten at the storage version (resuming from [AnnotationProgress]),
// managedFields entries recorded at versions the CRD no longer serves are
// removed on the way, and status.storedVersions is trimmed to the storage
// version. Guarantees:
//
//   - A version is trimmed only after every object was rewritten while that
//     storage version was current: if the CRD's storage version changes
//     during the run, the run starts over for the new one.
//   - A rewrite is an Update of the object as read, with its
//     resourceVersion: the API server encodes it at the storage version, and
//     a conflict (someone else wrote it — which also stores it at the
//     storage version) counts as migrated. Objects deleted meanwhile are
//     skipped. Nothing in an object changes but its encoding and the
//     dropped managedFields entries.
//   - An object that cannot be read or rewritten at the storage version (a
//     conversion webhook refusing it fails the whole List; the page is then
//     read object by object to find it) stops the migration with its
//     namespace/name and the error in the returned error and in
//     [Progress].Failed; nothing is trimmed.
func (m *Migrator) Migrate(ctx context.Context, crdName string) error {
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := m.c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
			return fmt.Errorf("storageversion: get CRD %s: %w", crdName, err)
		}
		storage := storageVersion(crd)
		if storage == "" {
			return fmt.Errorf("storageversion: CRD %s has no storage version", crdName)
		}
		p := readProgress(crd)
		if p.StorageVersion != storage || p.Failed != "" {
			p = Progress{StorageVersion: storage}
		}
		if p.Done && slices.Equal(crd.Status.StoredVersions, []string{storage}) {
			return nil
		}
		restart, err := m.rewriteAll(ctx, crd, storage, &p)
		if err != nil {
			return err
		}
		if restart {
			continue
		}
		return m.trim(ctx, crdName, storage, &p)
	}
}

// rewriteAll rewrites every object page by page, recording progress after
// each page; restart reports that the storage version changed meanwhile.
func (m *Migrator) rewriteAll(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, storage string, p *Progress) (restart bool, err error) {
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: storage, Kind: crd.Spec.Names.ListKind}
	served := servedVersions(crd)
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		err := m.c.List(ctx, list, client.Limit(m.pageSize), client.Continue(p.Continue))
		if apierrors.IsResourceExpired(err) && p.Continue != "" {
			// The continue token expired (etcd compacted): start the listing
			// over; objects already rewritten cost a request, no write.
			p.Continue = ""
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				if culprit := m.unreadable(ctx, crd, storage, p.Continue); culprit != "" {
					p.Failed = culprit
					_ = m.record(ctx, crd.Name, p)
					return false, fmt.Errorf("storageversion: %s: read %s", crd.Name, p.Failed)
				}
			}
			return false, fmt.Errorf("storageversion: list %s: %w", crd.Name, err)
		}
		failed := m.rewritePage(ctx, list.Items, crd.Spec.Group, served)
		if ctx.Err() != nil {
			// Stopped (the operator is shutting down), not failed: the
			// progress recorded after the last whole page stands, and the
			// next run resumes from it.
			return false, fmt.Errorf("storageversion: %s: stopped after %d objects: %w", crd.Name, p.Migrated, context.Cause(ctx))
		}
		if failed != "" {
			p.Failed = failed
			_ = m.record(ctx, crd.Name, p)
			return false, fmt.Errorf("storageversion: %s: rewrite %s", crd.Name, p.Failed)
		}
		p.Migrated += int64(len(list.Items))
		p.Continue = list.GetContinue()
		if err := m.record(ctx, crd.Name, p); err != nil {
			return false, err
		}
		cur := &apiextensionsv1.CustomResourceDefinition{}
		if err := m.c.Get(ctx, client.ObjectKey{Name: crd.Name}, cur); err != nil {
			return false, fmt.Errorf("storageversion: get CRD %s: %w", crd.Name, err)
		}
		if storageVersion(cur) != storage {
			return true, nil
		}
		if p.Continue == "" {
			return false, nil
		}
	}
}

// unreadable finds, after a List of the page at cont failed, the first
// object of that page that cannot be read at the storage version (typically
// a conversion webhook refusing it) and returns it as "namespace/name:
// error"; "" when no listing of the page's names works or every object of
// it reads (the List failed for another reason). A List that fails in
// conversion fails as a whole, naming no object in a form a client can rely
// on, and a metadata-only List at the storage version converts too; so the
// page's names are listed (metadata only) at the storage version, else at
// each other served version (an object stored at an old version reads at
// that version without conversion), and each is then read at the storage
// version with a Get. It costs a page of Gets, and runs only after a List
// failed.
func (m *Migrator) unreadable(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, storage, cont string) string {
	versions := append([]string{storage}, slices.DeleteFunc(servedVersions(crd), func(v string) bool { return v == storage })...)
	for _, v := range versions {
		meta := &metav1.PartialObjectMetadataList{}
		meta.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: v, Kind: crd.Spec.Names.ListKind})
		if err := m.c.List(ctx, meta, client.Limit(m.pageSize), client.Continue(cont)); err != nil {
			continue
		}
		for i := range meta.Items {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: storage, Kind: crd.Spec.Names.Kind})
			key := client.ObjectKeyFromObject(&meta.Items[i])
			if err := m.c.Get(ctx, key, obj); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Sprintf("%s: %v", key, err)
			}
		}
		return ""
	}
	return ""
}

// rewritePage rewrites items with m.workers workers and returns the first
// failure as "namespace/name: error" ("" when every rewrite succeeded); it
// stops early when ctx ends (the caller checks ctx).
func (m *Migrator) rewritePage(ctx context.Context, items []unstructured.Unstructured, group string, served []string) string {
	var (
		mu     sync.Mutex
		failed string
		wg     sync.WaitGroup
	)
	next := make(chan *unstructured.Unstructured)
	for range m.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for obj := range next {
				if err := m.rewrite(ctx, obj, group, served); err != nil {
					mu.Lock()
					if failed == "" {
						failed = fmt.Sprintf("%s/%s: %v", obj.GetNamespace(), obj.GetName(), err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range items {
		mu.Lock()
		stop := failed != ""
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		next <- &items[i]
	}
	close(next)
	wg.Wait()
	return failed
}

// rewrite stores obj again, dropping managedFields entries of versions of
// group the CRD does not serve.
func (m *Migrator) rewrite(ctx context.Context, obj *unstructured.Unstructured, group string, served []string) error {
	if err := m.limiter.Wait(ctx); err != nil {
		return err
	}
	mf := obj.GetManagedFields()
	kept := slices.DeleteFunc(slices.Clone(mf), func(e metav1.ManagedFieldsEntry) bool {
		gv, err := schema.ParseGroupVersion(e.APIVersion)
		return err == nil && gv.Group == group && !slices.Contains(served, gv.Version)
	})
	if len(kept) != len(mf) {
		if len(kept) == 0 {
			kept = []metav1.ManagedFieldsEntry{{}} // an empty list would mean "unchanged"
		}
		obj.SetManagedFields(kept)
	}
	err := m.c.Update(ctx, obj)
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		// Written by someone else since we listed it: stored at the
		// storage version already, except for managedFields of unserved
		// versions, which the next run (or a re-read) removes.
		if len(kept) == len(mf) {
			return nil
		}
		fresh := &unstructured.Unstructured{}
		fresh.SetGroupVersionKind(obj.GroupVersionKind())
		if gerr := m.c.Get(ctx, client.ObjectKeyFromObject(obj), fresh); gerr != nil {
			return client.IgnoreNotFound(gerr)
		}
		return m.rewrite(ctx, fresh, group, served)
	}
	return err
}

// trim sets status.storedVersions to [storage] and records completion.
func (m *Migrator) trim(ctx context.Context, crdName, storage string, p *Progress) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := m.c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		return fmt.Errorf("storageversion: get CRD %s: %w", crdName, err)
	}
	if storageVersion(crd) != storage {
		return m.Migrate(ctx, crdName)
	}
	if !slices.Equal(crd.Status.StoredVersions, []string{storage}) {
		base := crd.DeepCopy()
		crd.Status.StoredVersions = []string{storage}
		if err := m.c.Status().Patch(ctx, crd, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("storageversion: trim status.storedVersions of %s: %w", crdName, err)
		}
	}
	p.Done, p.Continue = true, ""
	return m.record(ctx, crdName, p)
}

// record writes p into the CRD's progress annotation.
func (m *Migrator) record(ctx context.Context, crdName string, p *Progress) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationProgress: string(data)}}})
	if err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crdName}}
	if err := m.c.Patch(ctx, crd, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		return fmt.Errorf("storageversion: record progress on %s: %w", crdName, err)
	}
	return nil
}

// readProgress parses the progress annotation; one that does not parse as a
// whole (edited by hand, truncated) is no progress at all — never half of
// one, whose continue token or done flag could skip objects — so the
// migration starts over, which is safe: a rewrite is idempotent.
func readProgress(crd *apiextensionsv1.CustomResourceDefinition) Progress {
	var p Progress
	if v := crd.Annotations[AnnotationProgress]; v != "" {
		if json.Unmarshal([]byte(v), &p) != nil || p.Migrated < 0 {
			return Progress{}
		}
	}
	return p
}

// ReadProgress returns the progress recorded on crd, and whether there is
// any; a record that does not parse reads as the zero Progress.
func ReadProgress(crd *apiextensionsv1.CustomResourceDefinition) (Progress, bool) {
	_, ok := crd.Annotations[AnnotationProgress]
	return readProgress(crd), ok
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func servedVersions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			out = append(out, v.Name)
		}
	}
	return out
}

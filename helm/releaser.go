package helm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/outcome"
)

// ChartFunc returns the chart to release for obj (e.g. one of several
// bundled versions, chosen by a spec field). It is called on every
// reconcile and must not write; return the same *chart.Chart for the same
// input (load charts once, at start-up). An error is the reconcile's error,
// classified by package outcome (wrap it with outcome.Terminal for a spec
// that names no known chart).
type ChartFunc[T Object] func(ctx context.Context, obj T) (*chart.Chart, error)

// ValuesFunc returns the values obj gives the chart (what `helm install
// --values` would pass); the chart's own values.yaml supplies the rest, and
// the merged values are validated against the chart's values.schema.json.
// Called on every reconcile; it must not write.
type ValuesFunc[T Object] func(ctx context.Context, obj T) (map[string]any, error)

// Option configures [New].
type Option func(*options)

type options struct {
	maxHistory  int
	caps        *common.Capabilities
	clock       clock.PassiveClock
	hookRecheck time.Duration
}

// WithMaxHistory keeps at most n revisions of each release in its history
// (Helm's --history-max; default 10). n <= 0 keeps every revision.
func WithMaxHistory(n int) Option { return func(o *options) { o.maxHistory = n } }

// WithCapabilities sets what templates see as .Capabilities (Kubernetes
// version, API versions). The default is Helm's DefaultCapabilities, the
// same as `helm template` without a cluster.
func WithCapabilities(c *common.Capabilities) Option { return func(o *options) { o.caps = c } }

// WithClock sets the clock that stamps release records and hook runs.
func WithClock(c clock.PassiveClock) Option { return func(o *options) { o.clock = c } }

// WithHookRecheck sets how soon a reconcile waiting for a hook (a running
// Job) looks again when no event comes first (default 2s). Declaring the
// hooks' kind with the builder's Owns (batch/v1 Jobs) brings the event.
func WithHookRecheck(d time.Duration) Option { return func(o *options) { o.hookRecheck = d } }

// Labels the Releaser adds to Helm's release records (Secrets), next to
// Helm's own (name, owner, status, version).
const (
	// LabelDigest holds the [ReleaseStatus.Digest] of the revision.
	LabelDigest = "helm.opkit.dev/digest"
	// LabelOperation is install, upgrade or rollback.
	LabelOperation = "helm.opkit.dev/operation"
	// AnnotationHookRevision marks a hook object with the revision it ran for.
	AnnotationHookRevision = "helm.opkit.dev/hook-revision"
)

// Releaser releases a chart per object: it renders the chart with the
// object's values, keeps the release history in Helm's Secret storage
// (release name = the object's name, in its namespace), runs the hooks and
// applies the rendered objects through opkit's ensure, in a workflow
// (package workflow) where CRDs and Namespaces come first. Build it with
// [New] and compose it with a reconciler.Builder with [Releaser.Register].
type Releaser[T Object] struct {
	c       client.Client
	secrets corev1client.SecretsGetter
	charts  ChartFunc[T]
	values  ValuesFunc[T]
	opts    options

	ensurer    *ensure.Ensurer
	ensurerErr error

	snapshots sync.Map // UID -> T as read, between sync and writeStatus

	mu        sync.Mutex
	rollbacks map[rollbackKey]*rspb.Release // chart and values of rollback targets, read once
}

type rollbackKey struct {
	namespace, name string
	uid             string
	revision        int
}

// New returns a Releaser. c is the manager's client (reads from its cache:
// a steady state sends no request); secrets is where release records live
// (kubernetes.Interface's CoreV1(), uncached: they are read only when a
// revision starts or progresses, and on deletion). charts and values say
// what to release for an object.
func New[T Object](c client.Client, secrets corev1client.SecretsGetter, charts ChartFunc[T], values ValuesFunc[T], opts ...Option) (*Releaser[T], error) {
	if c == nil || secrets == nil || charts == nil || values == nil {
		return nil, errors.New("helm: New needs a client, a Secrets getter, a ChartFunc and a ValuesFunc")
	}
	r := &Releaser[T]{c: c, secrets: secrets, charts: charts, values: values,
		opts:      options{maxHistory: 10, caps: common.DefaultCapabilities, clock: clock.RealClock{}, hookRecheck: 2 * time.Second},
		rollbacks: map[rollbackKey]*rspb.Release{}}
	for _, o := range opts {
		o(&r.opts)
	}
	return r, nil
}

// store is Helm's storage of the releases in namespace.
func (r *Releaser[T]) store(namespace string) *storage.Storage {
	s := storage.Init(driver.NewSecrets(r.secrets.Secrets(namespace)))
	s.MaxHistory = r.opts.maxHistory
	return s
}

// inputs is what one reconcile releases.
type inputs struct {
	chart      *chart.Chart
	config     map[string]any
	rollbackTo int
}

func (r *Releaser[T]) inputs(ctx context.Context, obj T) (inputs, error) {
	if v, ok := obj.GetAnnotations()[AnnotationRollbackTo]; ok {
		n, err := rollbackRevision(v)
		if err != nil {
			return inputs{}, outcome.Terminal(ReasonRollbackNotFound, err)
		}
		key := rollbackKey{obj.GetNamespace(), obj.GetName(), string(obj.GetUID()), n}
		r.mu.Lock()
		rel := r.rollbacks[key]
		r.mu.Unlock()
		if rel == nil {
			got, err := r.store(obj.GetNamespace()).Get(obj.GetName(), n)
			if errors.Is(err, driver.ErrReleaseNotFound) {
				return inputs{}, outcome.Terminal(ReasonRollbackNotFound, fmt.Errorf("%s=%d: release %s has no revision %d in its history", AnnotationRollbackTo, n, obj.GetName(), n))
			}
			if err != nil {
				return inputs{}, err
			}
			if rel, err = asV1(got); err != nil {
				return inputs{}, err
			}
			r.mu.Lock()
			r.rollbacks[key] = rel
			r.mu.Unlock()
		}
		return inputs{chart: rel.Chart, config: rel.Config, rollbackTo: n}, nil
	}
	ch, err := r.charts(ctx, obj)
	if err != nil {
		return inputs{}, err
	}
	vals, err := r.values(ctx, obj)
	if err != nil {
		return inputs{}, err
	}
	if vals == nil {
		vals = map[string]any{}
	}
	return inputs{chart: ch, config: vals}, nil
}

func asV1(rel release.Releaser) (*rspb.Release, error) {
	v, ok := rel.(*rspb.Release)
	if !ok || v == nil {
		return nil, fmt.Errorf("helm: unexpected release record type %T", rel)
	}
	if v.Info == nil {
		v.Info = &rspb.Info{}
	}
	return v, nil
}

// Sync is the reconcile step (reconciler.Steps.Sync) that releases obj's
// chart. See the package documentation for what it guarantees.
func (r *Releaser[T]) Sync(ctx context.Context, obj T) (ensure.ChangeSet, error) {
	if r.ensurer == nil {
		if r.ensurerErr != nil {
			return nil, r.ensurerErr
		}
		return nil, errors.New("helm: the Releaser has no Ensurer (Register it with a reconciler.Builder)")
	}
	st := obj.HelmRelease()
	in, err := r.inputs(ctx, obj)
	if err != nil {
		c := outcome.Classify(err)
		if c.Class == outcome.ClassTerminal {
			r.setReleased(obj, metav1.ConditionFalse, c.Reason, c.Message)
		}
		return nil, fmt.Errorf("%s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	d, err := digest(in.chart, in.config)
	if err != nil {
		return nil, outcome.Terminal(ReasonRenderFailed, fmt.Errorf("%s/%s: %w", obj.GetNamespace(), obj.GetName(), err))
	}
	store := r.store(obj.GetNamespace())
	var rec *rspb.Release
	if st.Digest != d || st.Revision == 0 || st.Name != obj.GetName() {
		if rec, err = r.begin(ctx, obj, store, in, d); err != nil {
			if c := outcome.Classify(err); c.Class == outcome.ClassTerminal {
				r.setReleased(obj, metav1.ConditionFalse, c.Reason, c.Message)
			}
			return nil, fmt.Errorf("%s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
		}
	}
	ren, err := render(ctx, in.chart, in.config, obj.GetName(), obj.GetNamespace(), st.Revision, st.Revision > 1, r.opts.caps)
	if err != nil {
		c := outcome.Classify(err)
		r.setReleased(obj, metav1.ConditionFalse, c.Reason, c.Message)
		return nil, fmt.Errorf("%s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	if st.Status == string(rcommon.StatusDeployed) {
		// The steady state: no release record is read or written; the
		// objects are compared with the cache (drift is corrected).
		cs, failed, err := r.apply(ctx, obj, ren, nil)
		if err == nil {
			r.deployed(obj)
			return cs, nil
		}
		if failed != "" {
			st.FailedObject = failed
		}
		return cs, fmt.Errorf("%s/%s: release %s revision %d: %w", obj.GetNamespace(), obj.GetName(), st.Name, st.Revision, err)
	}
	if rec == nil {
		got, err := store.Get(obj.GetName(), st.Revision)
		if errors.Is(err, driver.ErrReleaseNotFound) {
			// The history was removed behind the operator's back: start
			// a new revision.
			*st = ReleaseStatus{}
			return nil, outcome.Transient("ReleaseRecordMissing", fmt.Errorf("%s/%s: release %s revision %d is not in the history any more; starting over",
				obj.GetNamespace(), obj.GetName(), obj.GetName(), st.Revision))
		}
		if err != nil {
			return nil, fmt.Errorf("%s/%s: read release: %w", obj.GetNamespace(), obj.GetName(), err)
		}
		if rec, err = asV1(got); err != nil {
			return nil, err
		}
		if rec.Labels == nil {
			rec.Labels = map[string]string{}
		}
	}
	cs, err := r.progress(ctx, obj, store, rec, ren)
	if err != nil {
		return cs, fmt.Errorf("%s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return cs, nil
}

// begin starts a new revision: it renders it, writes its pending record and
// points obj's status at it. A pending or failed record of the same digest
// (a status write lost, an operator restart) is continued instead.
func (r *Releaser[T]) begin(ctx context.Context, obj T, store *storage.Storage, in inputs, d string) (*rspb.Release, error) {
	st := obj.HelmRelease()
	hist, err := store.History(obj.GetName())
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, fmt.Errorf("read release history: %w", err)
	}
	var last *rspb.Release
	var first time.Time
	for _, h := range hist {
		v, err := asV1(h)
		if err != nil {
			return nil, err
		}
		if last == nil || v.Version > last.Version {
			last = v
		}
		if first.IsZero() || (!v.Info.FirstDeployed.IsZero() && v.Info.FirstDeployed.Before(first)) {
			first = v.Info.FirstDeployed
		}
	}
	if last != nil && last.Labels[LabelDigest] == d && last.Info.Status != rcommon.StatusSuperseded && last.Info.Status != rcommon.StatusUninstalled {
		r.point(st, obj, last, d, in.rollbackTo)
		if last.Info.Status == rcommon.StatusFailed {
			st.FailedObject = failedObjectOf(last)
		}
		return last, nil
	}
	rev, op, status := 1, "install", rcommon.StatusPendingInstall
	if last != nil {
		rev, op, status = last.Version+1, "upgrade", rcommon.StatusPendingUpgrade
	}
	if in.rollbackTo > 0 {
		op, status = "rollback", rcommon.StatusPendingRollback
	}
	ren, err := render(ctx, in.chart, in.config, obj.GetName(), obj.GetNamespace(), rev, last != nil, r.opts.caps)
	if err != nil {
		return nil, err
	}
	now := r.opts.clock.Now()
	if first.IsZero() {
		first = now
	}
	desc := map[string]string{"install": "Install", "upgrade": "Upgrade", "rollback": "Rollback"}[op] + " in progress"
	rec := &rspb.Release{
		Name: obj.GetName(), Namespace: obj.GetNamespace(), Version: rev,
		Chart: in.chart, Config: in.config, Manifest: ren.manifest, Hooks: ren.hooks,
		Info: &rspb.Info{FirstDeployed: first, LastDeployed: now, Status: status, Description: desc,
			Notes: ren.notes, RollbackRevision: in.rollbackTo},
		Labels: map[string]string{LabelDigest: d, LabelOperation: op},
	}
	if err := store.Create(rec); err != nil {
		return nil, fmt.Errorf("write release record %s.v%d: %w", rec.Name, rec.Version, err)
	}
	r.point(st, obj, rec, d, in.rollbackTo)
	return rec, nil
}

// point makes st describe rec.
func (r *Releaser[T]) point(st *ReleaseStatus, obj T, rec *rspb.Release, d string, rollbackTo int) {
	*st = ReleaseStatus{Name: obj.GetName(), Revision: rec.Version, Status: string(rec.Info.Status), Digest: d, RolledBackTo: rollbackTo}
	if rec.Chart != nil && rec.Chart.Metadata != nil {
		st.Chart, st.ChartVersion, st.AppVersion = rec.Chart.Metadata.Name, rec.Chart.Metadata.Version, rec.Chart.Metadata.AppVersion
	}
	msg := fmt.Sprintf("revision %d (%s %s): %s", rec.Version, st.Chart, st.ChartVersion, rec.Info.Description)
	r.setReleased(obj, metav1.ConditionUnknown, ReasonPending, msg)
	if rec.Info.Status.IsPending() {
		// Not Ready while the release moves: the previous revision's
		// Ready=True would otherwise claim the new one.
		_ = conditions.Set(obj, metav1.Condition{Type: conditions.Ready, Status: metav1.ConditionUnknown, Reason: ReasonPending, Message: conditions.BoundMessage(msg)})
	}
}

// progress moves a pending (or failed) revision on: pre-hooks, objects,
// post-hooks, then deployed. Each step is re-entrant: a reconcile that
// waits returns DependencyNotReady, and the next one continues.
func (r *Releaser[T]) progress(ctx context.Context, obj T, store *storage.Storage, rec *rspb.Release, ren *rendered) (ensure.ChangeSet, error) {
	st := obj.HelmRelease()
	op := rec.Labels[LabelOperation]
	pre, post := rspb.HookPreInstall, rspb.HookPostInstall
	switch op {
	case "upgrade":
		pre, post = rspb.HookPreUpgrade, rspb.HookPostUpgrade
	case "rollback":
		pre, post = rspb.HookPreRollback, rspb.HookPostRollback
	}
	keep := hookObjects(rec)
	var cs ensure.ChangeSet
	hcs, err := r.runHooks(ctx, obj, store, rec, pre)
	cs = append(cs, hcs...)
	if err != nil {
		return cs, err
	}
	acs, failed, err := r.apply(ctx, obj, ren, keep)
	cs = append(cs, acs...)
	if err != nil {
		if outcome.Classify(err).Class == outcome.ClassTerminal && failed != "" {
			return cs, r.fail(obj, store, rec, ReasonReleaseFailed, failed, err)
		}
		return cs, err
	}
	hcs, err = r.runHooks(ctx, obj, store, rec, post)
	cs = append(cs, hcs...)
	if err != nil {
		return cs, err
	}
	// Done: prune what the previous revisions had and this one has not,
	// supersede them, and record the revision as deployed.
	hist, err := store.History(rec.Name)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return cs, fmt.Errorf("read release history: %w", err)
	}
	current := map[string]bool{}
	for _, o := range ren.objects {
		current[objectID(o, obj.GetNamespace())] = true
	}
	for _, h := range hist {
		old, err := asV1(h)
		if err != nil || old.Version == rec.Version {
			continue
		}
		if old.Info.Status == rcommon.StatusDeployed || old.Info.Status == rcommon.StatusFailed || old.Info.Status.IsPending() {
			objs, _ := parseManifest(old.Manifest)
			for _, o := range objs {
				if current[objectID(o, obj.GetNamespace())] {
					continue
				}
				ch, err := r.deleteOwned(ctx, obj, o)
				if err != nil {
					return cs, err
				}
				if ch != nil {
					cs = append(cs, *ch)
				}
			}
			if old.Info.Status == rcommon.StatusDeployed {
				old.Info.Status = rcommon.StatusSuperseded
				if err := store.Update(old); err != nil {
					return cs, fmt.Errorf("supersede release %s.v%d: %w", old.Name, old.Version, err)
				}
			}
		}
	}
	rec.Info.Status = rcommon.StatusDeployed
	rec.Info.LastDeployed = r.opts.clock.Now()
	switch op {
	case "install":
		rec.Info.Description = "Install complete"
	case "upgrade":
		rec.Info.Description = "Upgrade complete"
	case "rollback":
		rec.Info.Description = fmt.Sprintf("Rollback to %d", rec.Info.RollbackRevision)
	}
	if err := store.Update(rec); err != nil {
		return cs, fmt.Errorf("write release record %s.v%d: %w", rec.Name, rec.Version, err)
	}
	st.Status, st.FailedObject = string(rcommon.StatusDeployed), ""
	r.deployed(obj)
	return cs, nil
}

// fail records rec as failed because of what (an object or hook) and
// returns the terminal error that stalls the object.
func (r *Releaser[T]) fail(obj T, store *storage.Storage, rec *rspb.Release, reason, what string, cause error) error {
	st := obj.HelmRelease()
	c := outcome.Classify(cause)
	msg := fmt.Sprintf("release %s revision %d failed: %s: %s", rec.Name, rec.Version, what, c.Message)
	rec.Info.Status = rcommon.StatusFailed
	rec.Info.Description = conditions.BoundMessage(msg)
	if rec.Labels == nil {
		rec.Labels = map[string]string{}
	}
	if err := store.Update(rec); err != nil {
		return fmt.Errorf("write release record %s.v%d: %w (after: %s)", rec.Name, rec.Version, err, msg)
	}
	st.Status, st.FailedObject = string(rcommon.StatusFailed), what
	r.setReleased(obj, metav1.ConditionFalse, reason, msg)
	return outcome.Terminal(reason, errors.New(msg))
}

// rollbackRevision reads an [AnnotationRollbackTo] value: a decimal
// revision number of at least 1, blanks around it ignored.
func rollbackRevision(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q is not a revision number", AnnotationRollbackTo, v)
	}
	return n, nil
}

// failedObjectOf reads the failing object back from a failed record's
// description ("…failed: <what>: <why>").
func failedObjectOf(rec *rspb.Release) string {
	_, rest, ok := strings.Cut(rec.Info.Description, " failed: ")
	if !ok {
		return ""
	}
	what, _, _ := strings.Cut(rest, ": ")
	return what
}

// deployed marks obj's release deployed and its objects ready.
func (r *Releaser[T]) deployed(obj T) {
	st := obj.HelmRelease()
	msg := fmt.Sprintf("revision %d (%s %s) deployed", st.Revision, st.Chart, st.ChartVersion)
	if st.RolledBackTo > 0 {
		msg += fmt.Sprintf(", rolled back to revision %d", st.RolledBackTo)
	}
	r.setReleased(obj, metav1.ConditionTrue, ReasonDeployed, msg)
	_ = conditions.MarkReady(obj, ReasonDeployed, msg)
}

func (r *Releaser[T]) setReleased(obj T, status metav1.ConditionStatus, reason, msg string) {
	_ = conditions.Set(obj, metav1.Condition{Type: ConditionReleased, Status: status,
		Reason: outcome.SanitizeReason(reason, ReasonPending), Message: conditions.BoundMessage(msg)})
}

// objectID identifies a rendered object: group/kind namespace/name.
func objectID(o *unstructured.Unstructured, defaultNamespace string) string {
	ns := o.GetNamespace()
	if ns == "" {
		ns = defaultNamespace
	}
	gvk := o.GroupVersionKind()
	return gvk.Group + "/" + gvk.Kind + " " + ns + "/" + o.GetName()
}

// describe names a rendered object for people: Kind namespace/name.
func describe(o client.Object, defaultNamespace string) string {
	kind := o.GetObjectKind().GroupVersionKind().Kind
	ns := o.GetNamespace()
	if ns == "" {
		ns = defaultNamespace
	}
	return kind + " " + ns + "/" + o.GetName()
}

// parseManifest parses a release record's manifest.
func parseManifest(manifest string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for doc := range strings.SplitSeq(manifest, "\n---") {
		objs, err := parseObjects("manifest", strings.TrimPrefix(doc, "---"))
		if err != nil {
			return out, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// owned reports whether obj is owner's child: controlled by it, or linked
// by ensure's owner label (cluster-scoped children).
func owned(owner, obj client.Object) bool {
	if metav1.IsControlledBy(obj, owner) {
		return true
	}
	return obj.GetLabels()[ensure.LabelOwnerUID] == string(owner.GetUID())
}

// deleteOwned deletes the live object o names if it is owner's (UID
// precondition); an object gone, of a kind not served, or not owner's is
// left alone.
func (r *Releaser[T]) deleteOwned(ctx context.Context, owner T, o *unstructured.Unstructured) (*ensure.Change, error) {
	live := r.empty(o.GroupVersionKind())
	key := client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}
	namespaced, err := r.c.IsObjectNamespaced(live)
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if namespaced && key.Namespace == "" {
		key.Namespace = owner.GetNamespace()
	}
	if !namespaced {
		key.Namespace = ""
	}
	if err := r.c.Get(ctx, key, live); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	if !owned(owner, live) {
		return nil, nil
	}
	uid := live.GetUID()
	err = r.c.Delete(ctx, live, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return nil, fmt.Errorf("delete %s dropped from the chart: %w", describe(live, ""), err)
	}
	return &ensure.Change{GVK: o.GroupVersionKind(), Namespace: key.Namespace, Name: key.Name, Action: ensure.Deleted}, nil
}

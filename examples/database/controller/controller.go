// Package controller is the database example operator's logic: a Database
// becomes a StatefulSet and a headless Service, driven through a declared
// phase machine (opkit's phase package, composed by reconciler.Phases):
//
//	Pending → Provisioning → Ready ⇄ BackingUp → Upgrading → Ready
//	Ready ⇄ Degraded, and Deleting (final backup) from any phase
//
// Every phase declares the children through one workflow (opkit's workflow
// package): Service, then StatefulSet, then a backup Job when one is due, so
// no handler sequences them by hand.
//
// Version upgrades back the data up first (a Job; the record goes to the
// backup catalog), then roll the replicas one at a time by stepping the
// StatefulSet's RollingUpdate partition down one ordinal at a time, each step
// only once the replica above it runs the new version and is Ready. Deleting
// a Database takes a final backup unless the Database carries
// [dbv1.SkipFinalBackupAnnotation]=true; the finalizer is removed only once
// that backup is recorded in the catalog.
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/ensure"
	dbv1 "github.com/opkit/opkit/examples/database/api/v1"
	"github.com/opkit/opkit/examples/database/backup"
	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/phase"
	"github.com/opkit/opkit/reconciler"
	"github.com/opkit/opkit/workflow"
)

// Name is the controller's name: field owner, event source, metrics label,
// and the phase machine's name.
const Name = "database"

// FinalizerName holds a deleting Database until its final backup is taken
// and recorded in the catalog (or waived).
const FinalizerName = "db.example.com/final-backup"

// The phases besides phase's common names (Pending, Provisioning, Ready,
// Degraded, Deleting).
const (
	// BackingUp runs the pre-upgrade backup Job.
	BackingUp phase.Phase = "BackingUp"
	// Upgrading rolls the replicas to spec.version one at a time.
	Upgrading phase.Phase = "Upgrading"
)

// ConditionReplicasReady is True when every desired replica is Ready. Its
// lastTransitionTime to False starts the clock that moves a Ready Database
// to Degraded after [Options.DegradedAfter].
const ConditionReplicasReady = "ReplicasReady"

// Defaults of [Options].
const (
	DefaultImage            = "ghcr.io/opkit/example-db"
	DefaultDegradedAfter    = 30 * time.Second
	DefaultProvisionTimeout = 10 * time.Minute
	DefaultBackupTimeout    = 15 * time.Minute
	DefaultUpgradeTimeout   = 30 * time.Minute
	DefaultConcurrency      = 2
)

// Options configure [Setup].
type Options struct {
	// Catalog records completed backups; required.
	Catalog *backup.Catalog
	// Observability, when set, wires metrics (phase transitions included),
	// traces and events.
	Observability *observability.Observability
	// Image is the image repository; spec.version is the tag (default DefaultImage).
	Image string
	// DegradedAfter is how long a Ready Database may have fewer Ready
	// replicas than desired before it moves to Degraded (default
	// DefaultDegradedAfter), counted from when the operator saw the loss,
	// rounded up to the whole second (the ReplicasReady condition's
	// lastTransitionTime). Only the Ready phase degrades this way; the
	// other phases have timeouts.
	DegradedAfter time.Duration
	// ProvisionTimeout, BackupTimeout and UpgradeTimeout are the budgets of
	// the Provisioning, BackingUp and Upgrading phases; when one is spent the
	// Database moves to Degraded.
	ProvisionTimeout, BackupTimeout, UpgradeTimeout time.Duration
	// Concurrency is MaxConcurrentReconciles (default DefaultConcurrency).
	Concurrency int
}

func (o *Options) defaults() {
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if o.DegradedAfter <= 0 {
		o.DegradedAfter = DefaultDegradedAfter
	}
	if o.ProvisionTimeout <= 0 {
		o.ProvisionTimeout = DefaultProvisionTimeout
	}
	if o.BackupTimeout <= 0 {
		o.BackupTimeout = DefaultBackupTimeout
	}
	if o.UpgradeTimeout <= 0 {
		o.UpgradeTimeout = DefaultUpgradeTimeout
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
}

// +kubebuilder:rbac:groups=db.example.com,resources=databases,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=db.example.com,resources=databases/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=db.example.com,resources=databases/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Setup registers the database controller with mgr.
func Setup(mgr manager.Manager, o Options) error {
	if o.Catalog == nil {
		return errors.New("database controller: a backup catalog is required")
	}
	o.defaults()
	// No pruning: the children's names never change, and backup Jobs must
	// survive the reconciles that do not declare them.
	b := reconciler.For(mgr, Name, func() *dbv1.Database { return &dbv1.Database{} }).
		Owns(&appsv1.StatefulSet{}, reconciler.WithoutPrune()).
		Owns(&corev1.Service{}, reconciler.WithoutPrune()).
		Owns(&batchv1.Job{}, reconciler.WithoutPrune()).
		Observability(o.Observability).
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: o.Concurrency})
	// The phase handlers write children through the builder's Ensurer.
	e, err := b.Ensurer()
	if err != nil {
		return err
	}
	c := mgr.GetClient()
	if o.Observability != nil {
		c = o.Observability.Client(c)
	}
	r := &handlers{client: c, ensurer: e, opts: o}
	// Without Observability the machine's events go straight to the
	// manager's recorder; with it, the reconciler wires its deduplicating
	// recorder and the phase metrics into the machine.
	m := newMachine(r, phase.WithEventRecorder(mgr.GetEventRecorder(Name)))
	return b.Phases(m).
		Finalizer(FinalizerName, finalizer.WithStep("catalog-final-backup", r.verifyFinalBackup)).
		Status(r.status).
		Complete()
}

// Diagram returns the phase machine as a Mermaid state diagram, with the
// default timeouts (the README shows it).
func Diagram() (string, error) {
	o := Options{}
	o.defaults()
	m, err := newMachine(&handlers{opts: o}).Build()
	if err != nil {
		return "", err
	}
	return m.Mermaid(), nil
}

func newMachine(r *handlers, opts ...phase.Option) *phase.Builder[*dbv1.Database] {
	return phase.New[*dbv1.Database](Name, opts...).
		Initial(phase.Pending).
		On(phase.Pending, r.pending, phase.To(phase.Provisioning)).
		On(phase.Provisioning, r.provisioning, phase.To(phase.Ready), phase.Timeout(r.opts.ProvisionTimeout, phase.Degraded)).
		On(phase.Ready, r.ready, phase.To(BackingUp, Upgrading, phase.Provisioning, phase.Degraded)).
		On(BackingUp, r.backingUp, phase.To(Upgrading, phase.Ready), phase.Timeout(r.opts.BackupTimeout, phase.Degraded)).
		On(Upgrading, r.upgrading, phase.To(phase.Ready), phase.Timeout(r.opts.UpgradeTimeout, phase.Degraded)).
		On(phase.Degraded, r.degraded, phase.To(phase.Ready)).
		OnDelete(phase.Deleting, r.deleting)
}

// handlers are the phase handlers. Each one checks the world and converges
// (the phase machine runs a handler again on every reconcile in its phase).
type handlers struct {
	client  client.Client
	ensurer *ensure.Ensurer
	opts    Options
}

func key(db *dbv1.Database) string { return db.Namespace + "/" + db.Name }

// pending accepts the Database; the schema has already validated the spec.
func (r *handlers) pending(_ context.Context, db *dbv1.Database) (phase.Outcome, error) {
	return phase.Next(phase.Provisioning).WithMessage(fmt.Sprintf("provisioning %d replicas of %s", db.DesiredReplicas(), db.Spec.Version)), nil
}

// provisioning creates the Service and StatefulSet (at the running version,
// or spec.version on first install) and waits until every replica is Ready.
// Re-entered from Ready when spec.replicas changes.
func (r *handlers) provisioning(ctx context.Context, db *dbv1.Database) (phase.Outcome, error) {
	version := db.Status.CurrentVersion
	if version == "" {
		version = db.Spec.Version
	}
	rep, err := r.children(db, Image(r.opts.Image, version), 0, nil).Reconcile(ctx, db)
	if rep == nil || outcome.Classify(err).Class != outcome.ClassDependencyNotReady && err != nil {
		return phase.Outcome{}, err
	}
	want := db.DesiredReplicas()
	if !rep.Ready() {
		return phase.RequeueAfter(5 * time.Second).WithMessage("provisioning: " + outcome.Classify(err).Message), nil
	}
	db.Status.CurrentVersion = version
	return phase.Next(phase.Ready).WithMessage(fmt.Sprintf("%d/%d replicas of %s ready", want, want, version)), nil
}

// children is the Database's children as one workflow, so no handler spells
// out their order or readiness: the headless Service; the StatefulSet
// (template image, RollingUpdate partition) once the Service exists, ready
// when every replica is updated and Ready (workflow.StatefulSetReady,
// partition aware); and, when backup is not nil, that backup Job once the
// StatefulSet serves (at least one Ready replica to dump from), ready when
// it completed, failed (terminal, Stalled) when it failed.
//
// Handlers that must not change the StatefulSet (a backup before an upgrade,
// a repair while a rollout is pending, the final backup) declare it in its
// live shape (see [shape]), so the workflow keeps the order and writes
// nothing to it.
func (r *handlers) children(db *dbv1.Database, image string, partition int32, backup *batchv1.Job) *workflow.Workflow {
	nodes := []workflow.Node{
		{Name: "service", Object: Service(db)},
		{Name: "statefulset", Object: StatefulSet(db, image, partition), DependsOn: []string{"service"}},
	}
	if backup != nil {
		nodes[1].Ready = serves
		nodes = append(nodes, workflow.Node{Name: "backup", Object: backup, DependsOn: []string{"statefulset"}, Ready: workflow.JobReady})
	}
	wf, err := workflow.New(r.client, workflow.ApplierFunc(func(ctx context.Context, owner, obj client.Object, keep []client.Object) (bool, error) {
		cs, err := r.ensurer.EnsureKeeping(ctx, owner, keep, obj)
		return cs.Changed(), err
	}), nodes)
	if err != nil {
		panic(err) // a fixed, valid graph
	}
	return wf
}

// serves is the StatefulSet's readiness when a backup depends on it: at
// least one replica is Ready to dump the data from (a Degraded database is
// still backed up).
func serves(obj client.Object) workflow.Readiness {
	sts, ok := obj.(*appsv1.StatefulSet)
	switch {
	case !ok:
		return workflow.Readiness{Reason: "WrongType", Message: fmt.Sprintf("%T is not a StatefulSet", obj)}
	case sts.Status.ReadyReplicas == 0:
		return workflow.Readiness{Reason: "NoReadyReplica", Message: "no replica is Ready to back up from"}
	}
	return workflow.Readiness{Ready: true, Reason: "Serving", Message: fmt.Sprintf("%d replicas Ready", sts.Status.ReadyReplicas)}
}

// shape returns the image and partition to declare the StatefulSet with so
// that nothing of it changes: the live template's image and partition, or,
// when there is no StatefulSet, the running version at partition 0.
func (r *handlers) shape(db *dbv1.Database, sts *appsv1.StatefulSet) (string, int32) {
	if sts == nil || templateImage(sts) == "" {
		return Image(r.opts.Image, db.Status.CurrentVersion), 0
	}
	return templateImage(sts), livePartition(sts, 0)
}

// ready keeps the children as declared and watches them: a version change
// starts an upgrade (through BackingUp unless the policy says otherwise), a
// replicas change goes back to Provisioning, and fewer Ready replicas than
// desired for longer than DegradedAfter is Degraded.
func (r *handlers) ready(ctx context.Context, db *dbv1.Database) (phase.Outcome, error) {
	sts, err := r.statefulSet(ctx, db)
	if err != nil {
		return phase.Outcome{}, err
	}
	if r.needsRollout(db, sts) {
		// Do not touch the StatefulSet here: its template changes only under
		// the Upgrading phase's partition.
		if db.BackupBeforeUpgrade() {
			return phase.Next(BackingUp).WithMessage(fmt.Sprintf("backing up %s before the upgrade to %s", db.Status.CurrentVersion, db.Spec.Version)), nil
		}
		return phase.Next(Upgrading).WithMessage(fmt.Sprintf("upgrading from %s to %s (no backup: spec.backup.beforeUpgrade is false)", db.Status.CurrentVersion, db.Spec.Version)), nil
	}
	if sts == nil || sts.Spec.Replicas == nil || *sts.Spec.Replicas != db.DesiredReplicas() {
		return phase.Next(phase.Provisioning).WithMessage(fmt.Sprintf("scaling to %d replicas", db.DesiredReplicas())), nil
	}
	// Keep the children as declared; readiness is judged below (Degraded
	// after a grace period), so a workflow that is not ready is no error.
	if _, err := r.children(db, Image(r.opts.Image, db.Status.CurrentVersion), 0, nil).Reconcile(ctx, db); err != nil &&
		outcome.Classify(err).Class != outcome.ClassDependencyNotReady {
		return phase.Outcome{}, err
	}
	ok, since := r.observeReplicas(db, sts)
	if ok {
		return phase.Wait(), nil
	}
	lost := time.Since(since)
	if lost >= r.opts.DegradedAfter {
		return phase.Next(phase.Degraded).WithMessage(fmt.Sprintf("%d/%d replicas ready for %s (threshold %s)",
			readyOf(sts), db.DesiredReplicas(), lost.Round(time.Second), r.opts.DegradedAfter)), nil
	}
	return phase.RequeueAfter(r.opts.DegradedAfter - lost), nil
}

// backingUp runs the pre-upgrade backup Job from the running version and
// moves on to Upgrading once it completed and is recorded in the catalog.
func (r *handlers) backingUp(ctx context.Context, db *dbv1.Database) (phase.Outcome, error) {
	sts, err := r.statefulSet(ctx, db)
	if err != nil {
		return phase.Outcome{}, err
	}
	if !r.needsRollout(db, sts) {
		return phase.Next(phase.Ready).WithMessage("upgrade cancelled: spec.version is the running version again"), nil
	}
	name := PreUpgradeBackupName(db)
	done, waiting, err := r.backup(ctx, db, sts, name, backup.ReasonPreUpgrade)
	if err != nil || !done {
		return phase.RequeueAfter(2 * time.Second).WithMessage(fmt.Sprintf("backup %s of %s %s", name, db.Status.CurrentVersion, waiting)), err
	}
	return phase.Next(Upgrading).WithMessage(fmt.Sprintf("backup %s completed; upgrading from %s to %s", name, db.Status.CurrentVersion, db.Spec.Version)), nil
}

// upgrading rolls the replicas to spec.version one at a time, highest
// ordinal first. The StatefulSet template changes together with a partition
// that admits only the top ordinal; then, from the world as observed, the
// partition is the ordinal below the contiguous run (from the top) of
// replicas that run the new revision AND are Ready. So the partition moves
// down one ordinal only after the replica above it is updated and Ready, and
// at most one replica on the new version is not Ready at any time.
func (r *handlers) upgrading(ctx context.Context, db *dbv1.Database) (phase.Outcome, error) {
	sts, err := r.statefulSet(ctx, db)
	if err != nil {
		return phase.Outcome{}, err
	}
	if sts == nil {
		return phase.RequeueAfter(5 * time.Second).WithMessage("upgrade waiting: the StatefulSet is missing (Degraded recreates it on timeout)"), nil
	}
	want := db.DesiredReplicas()
	target := Image(r.opts.Image, db.Spec.Version)
	var (
		partition int32
		updated   int32
	)
	switch {
	case templateImage(sts) != target:
		partition = want - 1
	case sts.Status.ObservedGeneration < sts.Generation || sts.Status.UpdateRevision == "":
		// The StatefulSet controller has not computed the new revision yet.
		partition = livePartition(sts, want-1)
	default:
		pods, err := r.pods(ctx, db)
		if err != nil {
			return phase.Outcome{}, err
		}
		updated = UpdatedFromTop(pods, want, sts.Status.UpdateRevision)
		partition = max(want-1-updated, 0)
	}
	if _, err := r.children(db, target, partition, nil).Reconcile(ctx, db); err != nil &&
		outcome.Classify(err).Class != outcome.ClassDependencyNotReady {
		return phase.Outcome{}, err
	}
	if updated == want && sts.Status.UpdatedReplicas == want && sts.Status.ReadyReplicas == want && sts.Status.Replicas == want {
		from := db.Status.CurrentVersion
		db.Status.CurrentVersion = db.Spec.Version
		return phase.Next(phase.Ready).WithMessage(fmt.Sprintf("upgraded from %s to %s: %d/%d replicas ready", from, db.Spec.Version, want, want)), nil
	}
	return phase.RequeueAfter(time.Second).WithMessage(fmt.Sprintf("upgrading to %s: %d/%d replicas updated and ready, partition %d",
		db.Spec.Version, updated, want, partition)), nil
}

// degraded repairs what it safely can and returns to Ready once every
// replica is Ready. With a rollout pending it leaves the StatefulSet's
// template alone (Ready resumes the upgrade through BackingUp and
// Upgrading); otherwise it re-declares the children.
func (r *handlers) degraded(ctx context.Context, db *dbv1.Database) (phase.Outcome, error) {
	sts, err := r.statefulSet(ctx, db)
	if err != nil {
		return phase.Outcome{}, err
	}
	image, partition := Image(r.opts.Image, db.Status.CurrentVersion), int32(0)
	if sts != nil && r.needsRollout(db, sts) {
		image, partition = r.shape(db, sts)
	}
	if _, err := r.children(db, image, partition, nil).Reconcile(ctx, db); err != nil &&
		outcome.Classify(err).Class != outcome.ClassDependencyNotReady {
		return phase.Outcome{}, err
	}
	want := db.DesiredReplicas()
	if ok, _ := r.observeReplicas(db, sts); ok && sts.Status.Replicas == want {
		return phase.Next(phase.Ready).WithMessage(fmt.Sprintf("recovered: %d/%d replicas ready", want, want)), nil
	}
	return phase.RequeueAfter(5 * time.Second).WithMessage(fmt.Sprintf("%d/%d replicas ready", readyOf(sts), want)), nil
}

// deleting takes the final backup, unless it is waived or there is nothing
// to back up. Until the backup Job completed the Database stays (the
// fail-safe): a failed Job sets Stalled with what to do.
func (r *handlers) deleting(ctx context.Context, db *dbv1.Database) (phase.Outcome, error) {
	if waived(db) {
		return phase.Done().WithMessage(fmt.Sprintf("final backup waived by the annotation %s=true", dbv1.SkipFinalBackupAnnotation)), nil
	}
	if db.Status.CurrentVersion == "" {
		return phase.Done().WithMessage("no final backup: the Database was never provisioned"), nil
	}
	sts, err := r.statefulSet(ctx, db)
	if err != nil {
		return phase.Outcome{}, err
	}
	name := FinalBackupName(db)
	done, waiting, err := r.backup(ctx, db, sts, name, backup.ReasonFinal)
	if err != nil || !done {
		return phase.RequeueAfter(2 * time.Second).WithMessage(fmt.Sprintf("taking the final backup %s before deletion (%s); to delete without it: kubectl annotate -n %s database/%s %s=true",
			name, waiting, db.Namespace, db.Name, dbv1.SkipFinalBackupAnnotation)), err
	}
	return phase.Done().WithMessage(fmt.Sprintf("final backup %s completed", name)), nil
}

// verifyFinalBackup is the finalizer's step: the finalizer goes only once the
// final backup is in the catalog. It records it from the completed Job when
// the catalog lacks it (this process restarted after the Deleting phase).
func (r *handlers) verifyFinalBackup(ctx context.Context, db *dbv1.Database) (finalizer.StepResult, error) {
	if waived(db) || db.Status.CurrentVersion == "" {
		return finalizer.Done(), nil
	}
	if _, ok := r.opts.Catalog.Find(key(db), string(db.UID), backup.ReasonFinal); ok {
		return finalizer.Done(), nil
	}
	sts, err := r.statefulSet(ctx, db)
	if err != nil {
		return finalizer.StepResult{}, err
	}
	done, _, err := r.backup(ctx, db, sts, FinalBackupName(db), backup.ReasonFinal)
	if err != nil {
		return finalizer.StepResult{}, err
	}
	if !done {
		return finalizer.RequeueAfter(2 * time.Second), nil
	}
	return finalizer.Done(), nil
}

// status mirrors the StatefulSet after every step of a live Database.
func (r *handlers) status(ctx context.Context, db *dbv1.Database, _ reconciler.Observed) error {
	sts, err := r.statefulSet(ctx, db)
	if err != nil {
		return err
	}
	r.observeReplicas(db, sts)
	return nil
}

// backup runs the backup Job name as the last node of the children's
// workflow (after the StatefulSet, declared in its live shape so nothing of
// it changes, serves) and reports whether it completed; a completed one is
// recorded in the catalog and in status.lastBackup; one that did not says
// what it waits for. A failed Job is a
// terminal error (Stalled) naming the Job: deleting the Job retries, and its
// deletion event reconciles.
func (r *handlers) backup(ctx context.Context, db *dbv1.Database, sts *appsv1.StatefulSet, name, reason string) (done bool, waiting string, err error) {
	image, partition := r.shape(db, sts)
	rep, err := r.children(db, image, partition, BackupJob(db, r.opts.Image, name, reason, db.Status.CurrentVersion)).Reconcile(ctx, db)
	if rep == nil {
		return false, "", err
	}
	node := rep.Node("backup")
	switch {
	case node.State == workflow.StateFailed && node.Terminal:
		return false, "", reconcile.TerminalError(fmt.Errorf("backup Job %s/%s failed (%s); delete it to retry", db.Namespace, name, node.Message))
	case node.State == workflow.StateWaiting:
		return false, "waiting for a Ready replica to back up from", nil
	case node.State != workflow.StateReady:
		// Running or just created; the workflow's summary is not an error.
		if err != nil && outcome.Classify(err).Class != outcome.ClassDependencyNotReady {
			return false, "", err
		}
		return false, "running: " + node.Message, nil
	}
	live, ok := node.Object.(*batchv1.Job)
	if !ok {
		return false, "", fmt.Errorf("backup Job %s/%s: read back as %T", db.Namespace, name, node.Object)
	}
	at := live.CreationTimestamp
	if live.Status.CompletionTime != nil {
		at = *live.Status.CompletionTime
	}
	if _, err := r.opts.Catalog.Record(ctx, backup.Backup{ID: name, Database: key(db), UID: string(db.UID),
		Version: db.Status.CurrentVersion, Reason: reason, CompletedAt: at.Time}); err != nil {
		return false, "", err
	}
	db.Status.LastBackup = &dbv1.BackupRecord{Name: name, Version: db.Status.CurrentVersion, Reason: reason, CompletionTime: at}
	return true, "", nil
}

// needsRollout reports whether the replicas must be rolled: spec.version is
// not the running version, or the StatefulSet's template runs another image
// (an upgrade interrupted and reverted).
func (r *handlers) needsRollout(db *dbv1.Database, sts *appsv1.StatefulSet) bool {
	if db.Status.CurrentVersion != db.Spec.Version {
		return true
	}
	return sts != nil && templateImage(sts) != Image(r.opts.Image, db.Spec.Version)
}

// observeReplicas records status.replicas, readyReplicas and selector and the ReplicasReady
// condition, and returns whether all are ready and, if not, since when
// (at the latest).
func (r *handlers) observeReplicas(db *dbv1.Database, sts *appsv1.StatefulSet) (bool, time.Time) {
	want := db.DesiredReplicas()
	ready := readyOf(sts)
	db.Status.ReadyReplicas = ready
	db.Status.Replicas = 0
	if sts != nil {
		db.Status.Replicas = sts.Status.Replicas
	}
	// The scale subresource's selector: the pods' labels, which the StatefulSet's selector matches.
	db.Status.Selector = labels.SelectorFromSet(Labels(db)).String()
	c := metav1.Condition{Type: ConditionReplicasReady, Status: metav1.ConditionTrue, Reason: "AllReplicasReady",
		Message: fmt.Sprintf("%d/%d replicas ready", ready, want)}
	ok := sts != nil && ready >= want && sts.Status.ObservedGeneration >= sts.Generation
	if !ok {
		c.Status, c.Reason = metav1.ConditionFalse, "ReplicasNotReady"
	}
	// Only invalid input makes Set fail; the condition above is valid.
	_ = conditions.Set(db, c)
	since := time.Now()
	if got := conditions.Get(db, ConditionReplicasReady); got != nil {
		since = got.LastTransitionTime.Time
	}
	// The API keeps lastTransitionTime in whole seconds: round up, so that
	// a Database is never Degraded sooner than DegradedAfter after the loss.
	return ok, since.Truncate(time.Second).Add(time.Second)
}

func (r *handlers) statefulSet(ctx context.Context, db *dbv1.Database) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: db.Namespace, Name: db.Name}, sts); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	if !metav1.IsControlledBy(sts, db) {
		return nil, nil
	}
	return sts, nil
}

func (r *handlers) pods(ctx context.Context, db *dbv1.Database) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := r.client.List(ctx, &list, client.InNamespace(db.Namespace), client.MatchingLabels(Labels(db))); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// UpdatedFromTop counts the replicas, from ordinal replicas-1 downwards
// without a gap, that run revision and are Ready (and not being deleted).
func UpdatedFromTop(pods []corev1.Pod, replicas int32, revision string) int32 {
	byOrdinal := make(map[int32]*corev1.Pod, len(pods))
	for i := range pods {
		if o, ok := ordinal(&pods[i]); ok {
			byOrdinal[o] = &pods[i]
		}
	}
	var n int32
	for o := replicas - 1; o >= 0; o-- {
		p := byOrdinal[o]
		if p == nil || p.DeletionTimestamp != nil || p.Labels[appsv1.ControllerRevisionHashLabelKey] != revision || !PodReady(p) {
			break
		}
		n++
	}
	return n
}

// PodReady reports the pod's Ready condition.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func ordinal(p *corev1.Pod) (int32, bool) {
	v, ok := p.Labels[appsv1.PodIndexLabel]
	if !ok {
		return 0, false
	}
	var o int32
	if _, err := fmt.Sscanf(v, "%d", &o); err != nil {
		return 0, false
	}
	return o, true
}

func readyOf(sts *appsv1.StatefulSet) int32 {
	if sts == nil {
		return 0
	}
	return sts.Status.ReadyReplicas
}

func templateImage(sts *appsv1.StatefulSet) string {
	for _, c := range sts.Spec.Template.Spec.Containers {
		if c.Name == "db" {
			return c.Image
		}
	}
	return ""
}

func livePartition(sts *appsv1.StatefulSet, fallback int32) int32 {
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		return *ru.Partition
	}
	return fallback
}

func waived(db *dbv1.Database) bool {
	return db.Annotations[dbv1.SkipFinalBackupAnnotation] == "true"
}

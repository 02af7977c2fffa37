// Package controller is the bucket example operator's logic: a Bucket
// (storage.example.com/v1) becomes a bucket in the cloud API of package
// cloud, plus a connection Secret, composed from opkit's packages through
// the reconciler builder:
//
//   - finalizer: the cloud bucket is deleted, and the finalizer removed only
//     once a GET says 404;
//   - crash-safe create: the external name and a create-pending marker are
//     written to the Bucket before the cloud call, with a request token
//     derived from the Bucket's UID, so a create interrupted at any point is
//     found, not repeated;
//   - outcome: quota and naming errors are Terminal (Stalled, no retry), 5xx
//     and timeouts Transient (backoff), 429 waits the server's Retry-After;
//   - ensure: the connection Secret (endpoint, bucket credentials) is owned
//     by the Bucket; credentials never reach status or events;
//   - drift: a Ready Bucket is looked at again every resync interval, and a
//     change made in the cloud is set back with a DriftCorrected event.
package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/ensure"
	storagev1 "github.com/opkit/opkit/examples/bucket/api/v1"
	"github.com/opkit/opkit/examples/bucket/cloud"
	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/reconciler"
)

// Name is the controller's name: field owner, event source, metrics label.
const Name = "bucket"

// FinalizerName guards the deletion of the cloud bucket.
const FinalizerName = "storage.example.com/delete-bucket"

// Keys of the credentials Secret (spec.credentialsSecretRef or --credentials-secret).
const (
	CredentialsAccessKeyID     = "accessKeyId"
	CredentialsSecretAccessKey = "secretAccessKey"
)

// Keys of the connection Secret "<bucket>-connection" the operator writes.
const (
	ConnectionEndpoint        = "endpoint"
	ConnectionBucket          = "bucket"
	ConnectionRegion          = "region"
	ConnectionAccessKeyID     = "accessKeyId"
	ConnectionSecretAccessKey = "secretAccessKey"
)

// ReasonAvailable is the Ready=True reason of a Bucket whose cloud bucket
// exists and matches its spec.
const ReasonAvailable = "BucketAvailable"

// Event reasons the controller emits, besides the reconciler's.
const (
	// ReasonCreated (Normal): the cloud bucket was created.
	ReasonCreated = "BucketCreated"
	// ReasonCreateRecovered (Normal): a create interrupted before its result
	// was recorded had succeeded; the bucket was found by its name and
	// request token and not created again.
	ReasonCreateRecovered = "CreateRecovered"
	// ReasonUpdated (Normal): the cloud bucket was changed to a new spec.
	ReasonUpdated = "BucketUpdated"
	// ReasonDriftCorrected (Warning): the cloud bucket had been changed (or
	// deleted) outside Kubernetes and was set back to the spec.
	ReasonDriftCorrected = "DriftCorrected"
	// ReasonOrphaned (Normal): deletionPolicy Orphan left the cloud bucket.
	ReasonOrphaned = "BucketOrphaned"
)

// Options configure [Setup].
type Options struct {
	// CloudEndpoint is the cloud API's base URL; required.
	CloudEndpoint string
	// DefaultCredentials names the Secret used by Buckets without
	// spec.credentialsSecretRef; optional.
	DefaultCredentials types.NamespacedName
	// Observability, when set, wires metrics, traces and events.
	Observability *observability.Observability
	// ResyncInterval is how often a Ready Bucket is compared with its cloud
	// bucket to find drift (default 1 minute).
	ResyncInterval time.Duration
	// CallTimeout bounds each cloud call (default 10s).
	CallTimeout time.Duration
	// DeletePollInterval is how often a deleting bucket is checked for being
	// gone (default 2s).
	DeletePollInterval time.Duration
	// Concurrency is MaxConcurrentReconciles (default 4).
	Concurrency int
	// HTTPClient calls the cloud (default: http.DefaultTransport).
	HTTPClient *http.Client
	// AfterExternalCreate, when set, is called after a cloud create returned
	// and before its result is recorded anywhere: the worst moment for the
	// operator to die. Tests use it to kill the operator there; an error
	// aborts the reconcile at that point.
	AfterExternalCreate func(ctx context.Context, b *storagev1.Bucket, created *cloud.Bucket) error
}

// +kubebuilder:rbac:groups=storage.example.com,resources=buckets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=storage.example.com,resources=buckets/status,verbs=get;patch
// +kubebuilder:rbac:groups=storage.example.com,resources=buckets/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// CacheByObject restricts the manager's Secret cache to the connection
// Secrets this controller writes (by ensure's manager label), so the
// operator does not hold every Secret of the cluster in memory. Credentials
// Secrets are read live, when needed. Pass it as cache.Options.ByObject.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Set{ensure.LabelManager: Name})},
	}
}

type bucketController struct {
	client      client.Client
	apiReader   client.Reader
	ensurer     *ensure.Ensurer
	events      *observability.Recorder
	endpoint    string
	defaults    types.NamespacedName
	http        *http.Client
	gate        *cloud.RetryGate
	callTimeout time.Duration
	poll        time.Duration
	resync      time.Duration
	afterCreate func(context.Context, *storagev1.Bucket, *cloud.Bucket) error
	// readyAt remembers, per Bucket UID, the generation this process last
	// found in sync and marked Ready. A resync can read the Bucket from a
	// cache that has not yet caught up with that status write (the resync
	// interval is short, watch delivery under load is not); without this,
	// drift made right after the Bucket went Ready would be reported as an
	// ordinary update.
	readyAt sync.Map // types.UID -> int64
}

// Setup registers the bucket controller with mgr.
func Setup(mgr manager.Manager, o Options) error {
	if o.CloudEndpoint == "" {
		return errors.New("bucket controller: a cloud endpoint is required")
	}
	if o.ResyncInterval <= 0 {
		o.ResyncInterval = time.Minute
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 10 * time.Second
	}
	if o.DeletePollInterval <= 0 {
		o.DeletePollInterval = 2 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	c := &bucketController{
		client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), endpoint: o.CloudEndpoint, defaults: o.DefaultCredentials,
		http: o.HTTPClient, gate: cloud.NewRetryGate(), callTimeout: o.CallTimeout, poll: o.DeletePollInterval,
		afterCreate: o.AfterExternalCreate,
	}
	if obs := o.Observability; obs != nil {
		c.client, c.events = obs.Client(c.client), obs.Recorder(Name)
	} else {
		c.events = observability.NewRecorder(mgr.GetEventRecorder(Name))
	}
	c.resync = o.ResyncInterval
	b := reconciler.For(mgr, Name, func() *storagev1.Bucket { return &storagev1.Bucket{} }).
		Owns(&corev1.Secret{}).
		Finalizer(FinalizerName, finalizer.WithStep("delete-bucket", c.deleteBucket)).
		Observability(o.Observability).
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: o.Concurrency})
	// The cloud calls come before the connection Secret can be declared, so
	// Sync is the controller's own; it writes the Secret through the
	// builder's Ensurer (prune and owner index of the Owns kinds wired).
	ens, err := b.Ensurer()
	if err != nil {
		return err
	}
	c.ensurer = ens
	return b.WithSteps(reconciler.Steps[*storagev1.Bucket]{Sync: c.sync}).
		Status(c.status).
		Complete()
}

// ExternalName is the cloud name of b: spec.bucketName, else one derived
// from namespace, name and UID (lower case, at most 63 characters). The
// UID part keeps a Bucket re-created under the same name from meeting the
// bucket of its predecessor.
func ExternalName(b *storagev1.Bucket) string {
	if b.Spec.BucketName != "" {
		return b.Spec.BucketName
	}
	var sb strings.Builder
	dash := false
	for _, r := range strings.ToLower(b.Namespace + "-" + b.Name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			sb.WriteRune(r)
			dash = false
		} else if !dash {
			sb.WriteByte('-')
			dash = true
		}
	}
	base := strings.Trim(sb.String(), "-")
	if len(base) > 54 {
		base = strings.TrimRight(base[:54], "-")
	}
	sum := sha256.Sum256([]byte(b.UID))
	return base + "-" + hex.EncodeToString(sum[:])[:8]
}

// RequestToken is the create request token (Idempotency-Key) of b: the same
// for every attempt of every process, so a retried create returns the bucket
// an earlier attempt made, and a bucket is recognised as b's by it.
func RequestToken(b *storagev1.Bucket) string { return "bucket-" + string(b.UID) }

// ConnectionSecretName is the name of b's connection Secret.
func ConnectionSecretName(b *storagev1.Bucket) string { return b.Name + "-connection" }

// sync makes the cloud bucket match b and ensures the connection Secret.
func (c *bucketController) sync(ctx context.Context, b *storagev1.Bucket) (ensure.ChangeSet, error) {
	cl, err := c.cloudClient(ctx, b)
	if err != nil {
		return nil, err
	}
	name := b.Annotations[storagev1.AnnotationExternalName]
	switch {
	case name == "":
		// Fix the name, and say a create may follow, before any cloud call.
		name = ExternalName(b)
		if err := c.annotate(ctx, b, map[string]string{
			storagev1.AnnotationExternalName:  name,
			storagev1.AnnotationCreatePending: now(),
		}); err != nil {
			return nil, err
		}
	case b.Spec.BucketName != "" && b.Spec.BucketName != name:
		return nil, outcome.Terminal("ExternalNameMismatch", fmt.Errorf("spec.bucketName %q differs from the recorded external name %q", b.Spec.BucketName, name))
	}

	ext, err := c.observe(ctx, cl, name)
	if err != nil {
		return nil, err
	}
	if ext == nil {
		if ext, err = c.create(ctx, cl, b, name); err != nil {
			return nil, err
		}
	} else if err := c.recognise(ctx, b, ext); err != nil {
		return nil, err
	}
	if ext, err = c.correct(ctx, cl, b, ext); err != nil {
		return nil, err
	}

	b.Status.ExternalName, b.Status.Endpoint, b.Status.ConnectionSecretName = ext.Name, ext.Endpoint, ConnectionSecretName(b)
	return c.ensurer.Ensure(ctx, b, connectionSecret(b, ext))
}

// observe returns the cloud bucket, or nil when it does not exist.
func (c *bucketController) observe(ctx context.Context, cl *cloud.Client, name string) (*cloud.Bucket, error) {
	ctx, done := observability.StartExternal(ctx, "cloud.GetBucket")
	ext, err := cl.Get(ctx, name)
	done(err)
	switch {
	case cloud.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, classify(err)
	}
	return ext, nil
}

// create creates the bucket with b's request token. The pending marker is on
// the object before the call; the succeeded marker replaces it right after.
func (c *bucketController) create(ctx context.Context, cl *cloud.Client, b *storagev1.Bucket, name string) (*cloud.Bucket, error) {
	existedBefore := b.Annotations[storagev1.AnnotationCreateSucceeded] != ""
	if b.Annotations[storagev1.AnnotationCreatePending] == "" {
		if err := c.annotate(ctx, b, map[string]string{storagev1.AnnotationCreatePending: now()}, storagev1.AnnotationCreateSucceeded); err != nil {
			return nil, err
		}
	}
	cctx, done := observability.StartExternal(ctx, "cloud.CreateBucket")
	ext, err := cl.Create(cctx, cloud.CreateRequest{
		Name: name, Region: b.Spec.Region, Versioning: b.Spec.Versioning, QuotaClass: quotaClass(b),
	}, RequestToken(b))
	done(err)
	if err != nil {
		return nil, classify(err)
	}
	if c.afterCreate != nil {
		if err := c.afterCreate(ctx, b, ext); err != nil {
			return nil, err
		}
	}
	if err := c.annotate(ctx, b, map[string]string{storagev1.AnnotationCreateSucceeded: now()}, storagev1.AnnotationCreatePending); err != nil {
		return nil, err
	}
	if existedBefore {
		c.events.Eventf(b, nil, corev1.EventTypeWarning, ReasonDriftCorrected, reconciler.ActionReconcile, "cloud bucket %s was deleted outside Kubernetes; created it again", name)
	} else {
		c.events.Eventf(b, nil, corev1.EventTypeNormal, ReasonCreated, reconciler.ActionReconcile, "created cloud bucket %s in %s", name, b.Spec.Region)
	}
	return ext, nil
}

// recognise checks that an existing bucket is b's, and completes the record
// of a create that was interrupted after the cloud made the bucket.
func (c *bucketController) recognise(ctx context.Context, b *storagev1.Bucket, ext *cloud.Bucket) error {
	if ext.ClientToken != RequestToken(b) {
		return outcome.Terminal("BucketNameTaken", fmt.Errorf("cloud bucket %q exists but was not created for this Bucket (uid %s)", ext.Name, b.UID))
	}
	if ext.State == cloud.StateDeleting {
		return outcome.DependencyNotReady("BucketBeingDeleted", fmt.Sprintf("cloud bucket %s is being deleted outside Kubernetes; it is created again once gone", ext.Name), c.poll)
	}
	if b.Annotations[storagev1.AnnotationCreateSucceeded] == "" {
		if err := c.annotate(ctx, b, map[string]string{storagev1.AnnotationCreateSucceeded: now()}, storagev1.AnnotationCreatePending); err != nil {
			return err
		}
		log.FromContext(ctx).Info("found the bucket of an interrupted create; not creating another", "bucket", ext.Name)
		c.events.Eventf(b, nil, corev1.EventTypeNormal, ReasonCreateRecovered, reconciler.ActionReconcile, "found cloud bucket %s made by an interrupted create (same request token); not creating another", ext.Name)
	}
	return nil
}

// correct sets the cloud bucket's mutable fields to b's spec. A difference
// on a Bucket whose status already described this generation as Ready was
// made outside Kubernetes: that is drift, reported as DriftCorrected.
func (c *bucketController) correct(ctx context.Context, cl *cloud.Client, b *storagev1.Bucket, ext *cloud.Bucket) (*cloud.Bucket, error) {
	if ext.Region != b.Spec.Region {
		return nil, outcome.Terminal("RegionMismatch", fmt.Errorf("cloud bucket %s is in %s, the spec says %s; region cannot change", ext.Name, ext.Region, b.Spec.Region))
	}
	var req cloud.UpdateRequest
	var diffs []string
	if ext.Versioning != b.Spec.Versioning {
		req.Versioning = &b.Spec.Versioning
		diffs = append(diffs, fmt.Sprintf("versioning %t→%t", ext.Versioning, b.Spec.Versioning))
	}
	if q := quotaClass(b); ext.QuotaClass != q {
		req.QuotaClass = &q
		diffs = append(diffs, fmt.Sprintf("quotaClass %s→%s", ext.QuotaClass, q))
	}
	if len(diffs) == 0 {
		return ext, nil
	}
	last, _ := c.readyAt.Load(b.UID)
	drift := b.Status.ObservedGeneration == b.Generation && conditions.IsTrue(b, conditions.Ready) || last == b.Generation
	ctx, done := observability.StartExternal(ctx, "cloud.UpdateBucket")
	updated, err := cl.Update(ctx, ext.Name, req)
	done(err)
	if err != nil {
		return nil, classify(err)
	}
	if drift {
		log.FromContext(ctx).Info("corrected drift made outside Kubernetes", "bucket", ext.Name, "changes", diffs)
		c.events.Eventf(b, nil, corev1.EventTypeWarning, ReasonDriftCorrected, reconciler.ActionReconcile, "cloud bucket %s was changed outside Kubernetes; set back: %s", ext.Name, strings.Join(diffs, ", "))
	} else {
		c.events.Eventf(b, nil, corev1.EventTypeNormal, ReasonUpdated, reconciler.ActionReconcile, "updated cloud bucket %s: %s", ext.Name, strings.Join(diffs, ", "))
	}
	return updated, nil
}

// status marks b Ready and asks to look at it again after the resync
// interval: drift made in the cloud sends Kubernetes no event. Only a
// reconcile that reached this step (a live bucket in sync) asks for it: a
// Stalled Bucket stays quiet, a deleted one is not polled. The requeue is a
// success (outcome.RequeueAfter): Reconciling stays False, kstatus Current.
func (c *bucketController) status(_ context.Context, b *storagev1.Bucket, _ reconciler.Observed) error {
	c.readyAt.Store(b.UID, b.Generation)
	if err := conditions.MarkReady(b, ReasonAvailable, fmt.Sprintf("cloud bucket %s is available in %s", b.Status.ExternalName, b.Spec.Region)); err != nil {
		return err
	}
	return outcome.RequeueAfter(c.resync)
}

// deleteBucket is the finalizer step: it deletes b's cloud bucket and is
// Done only when a GET says it is gone. A bucket that is not b's (another
// request token or account) is never deleted.
func (c *bucketController) deleteBucket(ctx context.Context, b *storagev1.Bucket) (finalizer.StepResult, error) {
	c.readyAt.Delete(b.UID)
	name := b.Annotations[storagev1.AnnotationExternalName]
	if name == "" {
		return finalizer.Done(), nil // no create was ever attempted
	}
	if b.Spec.DeletionPolicy == storagev1.DeletionOrphan {
		c.events.Eventf(b, nil, corev1.EventTypeNormal, ReasonOrphaned, reconciler.ActionReconcile, "deletionPolicy Orphan: cloud bucket %s is left in place", name)
		return finalizer.Done(), nil
	}
	cl, err := c.cloudClient(ctx, b)
	if err != nil {
		return finalizer.StepResult{}, err
	}
	gctx, done := observability.StartExternal(ctx, "cloud.GetBucket")
	ext, err := cl.Get(gctx, name)
	done(err)
	switch {
	case cloud.IsNotFound(err):
		return finalizer.Done(), nil // verified gone
	case cloud.CodeOf(err) == cloud.CodeAccessDenied:
		return finalizer.Done(), nil // another account's bucket: never ours to delete
	case err != nil:
		return finalizer.StepResult{}, classify(err)
	case ext.ClientToken != RequestToken(b):
		log.FromContext(ctx).Info("cloud bucket was not created for this Bucket; leaving it", "bucket", name)
		return finalizer.Done(), nil
	case ext.State == cloud.StateDeleting:
		return finalizer.RequeueAfter(c.poll), nil
	}
	dctx, done := observability.StartExternal(ctx, "cloud.DeleteBucket")
	err = cl.Delete(dctx, name)
	done(err)
	if err != nil && !cloud.IsNotFound(err) {
		return finalizer.StepResult{}, classify(err)
	}
	return finalizer.RequeueAfter(c.poll), nil // look again: done only once a GET says 404
}

// cloudClient reads b's credentials (live: Secrets other than the
// connection Secrets are not cached) and returns a client for them.
func (c *bucketController) cloudClient(ctx context.Context, b *storagev1.Bucket) (*cloud.Client, error) {
	key := c.defaults
	if ref := b.Spec.CredentialsSecretRef; ref != nil {
		key = types.NamespacedName{Namespace: b.Namespace, Name: ref.Name}
	}
	if key.Name == "" {
		return nil, outcome.Terminal("NoCredentials", errors.New("spec.credentialsSecretRef is not set and the operator has no default credentials"))
	}
	var s corev1.Secret
	if err := c.apiReader.Get(ctx, key, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, outcome.DependencyNotReady("CredentialsNotFound", fmt.Sprintf("credentials Secret %s not found", key), 10*time.Second)
		}
		return nil, fmt.Errorf("read credentials Secret %s: %w", key, err)
	}
	creds := cloud.Credentials{AccessKeyID: string(s.Data[CredentialsAccessKeyID]), SecretAccessKey: string(s.Data[CredentialsSecretAccessKey])}
	if creds.AccessKeyID == "" || creds.SecretAccessKey == "" {
		return nil, outcome.DependencyNotReady("CredentialsIncomplete",
			fmt.Sprintf("credentials Secret %s needs the keys %s and %s", key, CredentialsAccessKeyID, CredentialsSecretAccessKey), 30*time.Second)
	}
	cl, err := cloud.NewClient(c.endpoint, creds, cloud.WithHTTPClient(c.http), cloud.WithTimeout(c.callTimeout), cloud.WithRetryGate(c.gate))
	if err != nil {
		return nil, outcome.Terminal("InvalidCloudEndpoint", err)
	}
	return cl, nil
}

// annotate sets and removes annotations on b with an optimistic-lock merge
// patch, so a marker is never written over a newer object; b is updated
// from the answer.
func (c *bucketController) annotate(ctx context.Context, b *storagev1.Bucket, set map[string]string, remove ...string) error {
	orig := b.DeepCopy()
	anns := b.GetAnnotations()
	if anns == nil {
		anns = map[string]string{}
	}
	for k, v := range set {
		anns[k] = v
	}
	for _, k := range remove {
		delete(anns, k)
	}
	b.SetAnnotations(anns)
	if err := c.client.Patch(ctx, b, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("record annotations on %s/%s: %w", b.Namespace, b.Name, err)
	}
	return nil
}

// classify maps a cloud error onto opkit's outcome classes.
func classify(err error) error {
	var ce *cloud.Error
	if !errors.As(err, &ce) {
		// Timeouts, refused connections, cancelled calls: try again with backoff.
		return outcome.Transient("CloudUnreachable", err)
	}
	switch {
	case ce.StatusCode == http.StatusTooManyRequests:
		// outcome honours Retry-After only for API-server statuses; a foreign
		// API's is a fixed wait, which DependencyNotReady expresses exactly
		// (and the client refuses to call before it passes anyway).
		return outcome.DependencyNotReady("RateLimited", err.Error(), max(ce.RetryAfter, time.Second))
	case ce.Code == cloud.CodeQuotaExceeded:
		return outcome.Terminal("QuotaExceeded", err)
	case ce.Code == cloud.CodeInvalidBucketName:
		return outcome.Terminal("InvalidBucketName", err)
	case ce.Code == cloud.CodeBucketAlreadyExists, ce.Code == cloud.CodeAccessDenied:
		return outcome.Terminal("BucketNameTaken", err)
	case ce.Code == cloud.CodeInvalidAccessKey:
		return outcome.DependencyNotReady("CredentialsRejected", err.Error(), 30*time.Second)
	case ce.Code == cloud.CodeOperationAborted:
		return outcome.DependencyNotReady("BucketBeingDeleted", err.Error(), 2*time.Second)
	case ce.StatusCode >= 500:
		return outcome.Transient("CloudUnavailable", err)
	case ce.StatusCode >= 400:
		return outcome.Terminal("CloudRejected", err)
	}
	return outcome.Transient("CloudError", err)
}

func connectionSecret(b *storagev1.Bucket, ext *cloud.Bucket) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: b.Namespace, Name: ConnectionSecretName(b),
			Labels: map[string]string{"app.kubernetes.io/managed-by": "opkit-bucket", "storage.example.com/bucket": b.Name},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			ConnectionEndpoint:        []byte(ext.Endpoint),
			ConnectionBucket:          []byte(ext.Name),
			ConnectionRegion:          []byte(ext.Region),
			ConnectionAccessKeyID:     []byte(ext.AccessKeyID),
			ConnectionSecretAccessKey: []byte(ext.SecretAccessKey),
		},
	}
}

func quotaClass(b *storagev1.Bucket) string {
	if b.Spec.QuotaClass == "" {
		return cloud.QuotaStandard
	}
	return b.Spec.QuotaClass
}

func now() string { return time.Now().UTC().Format(time.RFC3339) }

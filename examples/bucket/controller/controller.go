// Package controller is the bucket example operator's logic: a Bucket
// (storage.example.com/v1) becomes a bucket in the cloud API of package
// cloud, plus a connection Secret. The cloud-resource lifecycle is opkit's
// external package, plugged into the reconciler builder; this package is
// only the cloud client (observe, create, update, delete a bucket) and the
// classification of its errors:
//
//   - crash-safe create: the external name and a create-pending marker are
//     written to the Bucket before the cloud call, with a request token
//     derived from the Bucket's UID, so a create interrupted at any point is
//     found, not repeated (external.AnnotationCreatePending);
//   - deletion: the cloud bucket is deleted, and the finalizer removed only
//     once a GET says 404; deletionPolicy Orphan leaves it;
//   - errors: quota and naming errors are Terminal (Stalled, no retry), 5xx
//     and timeouts back off, 429 closes the endpoint for every Bucket until
//     the server's Retry-After has passed;
//   - the connection Secret (endpoint, bucket credentials) is owned by the
//     Bucket; credentials never reach status, events or logs;
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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/ensure"
	storagev1 "github.com/opkit/opkit/examples/bucket/api/v1"
	"github.com/opkit/opkit/examples/bucket/cloud"
	"github.com/opkit/opkit/external"
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

// Event reasons the controller's Buckets get (from package external),
// besides the reconciler's.
const (
	// ReasonCreated (Normal): the cloud bucket was created.
	ReasonCreated = external.ReasonCreated
	// ReasonCreateRecovered (Normal): a create interrupted before its result
	// was recorded had succeeded; the bucket was found by its name and
	// request token and not created again.
	ReasonCreateRecovered = external.ReasonCreateRecovered
	// ReasonUpdated (Normal): the cloud bucket was changed to a new spec.
	ReasonUpdated = external.ReasonUpdated
	// ReasonDriftCorrected (Warning): the cloud bucket had been changed (or
	// deleted) outside Kubernetes and was set back to the spec.
	ReasonDriftCorrected = external.ReasonDriftCorrected
	// ReasonOrphaned (Normal): deletionPolicy Orphan left the cloud bucket.
	ReasonOrphaned = external.ReasonOrphaned
)

// The Bucket API names the markers; they must be the external package's.
var _ = map[bool]struct{}{
	storagev1.AnnotationExternalName == external.AnnotationExternalName &&
		storagev1.AnnotationCreatePending == external.AnnotationCreatePending &&
		storagev1.AnnotationCreateSucceeded == external.AnnotationCreateSucceeded: {},
	false: {}, // a compile error (duplicate key) if they differ
}

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
	// Limiter paces the cloud calls of every object of one account
	// (credentials Secret) and honours the cloud's Retry-After across them;
	// give the same one to Setup and SetupQueues. Nil: a Limiter per
	// controller with no rate limit, honouring Retry-After.
	Limiter *external.Limiter
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
// Secrets the bucket and queue controllers write (by ensure's manager
// label), so the operator does not hold every Secret of the cluster in
// memory. Credentials Secrets are read live, when needed. Pass it as
// cache.Options.ByObject.
func CacheByObject() map[client.Object]cache.ByObject {
	req, err := labels.NewRequirement(ensure.LabelManager, selection.In, []string{Name, QueueName})
	if err != nil {
		panic(err) // constant, valid input
	}
	return map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Label: labels.NewSelector().Add(*req)},
	}
}

// Setup registers the bucket controller with mgr.
func Setup(mgr manager.Manager, o Options) error {
	if o.CloudEndpoint == "" {
		return errors.New("bucket controller: a cloud endpoint is required")
	}
	o = defaults(o)
	conn := &connector{apiReader: mgr.GetAPIReader(), o: o}
	return reconciler.For(mgr, Name, func() *storagev1.Bucket { return &storagev1.Bucket{} }).
		Finalizer(FinalizerName).
		External(conn,
			external.WithExternalName(ExternalName),
			external.WithClassifier(external.ClassifierFn(Classify)),
			external.WithLimiter(o.Limiter),
			external.WithEndpoint(func(b *storagev1.Bucket) string { return conn.endpoint(b.Namespace, b.Spec.CredentialsSecretRef) }),
			external.WithPolicy(func(b *storagev1.Bucket) external.Policy {
				return external.Policy{Orphan: b.Spec.DeletionPolicy == storagev1.DeletionOrphan}
			}),
			external.WithConnectionSecret(ConnectionSecretName),
			external.WithPollInterval(o.ResyncInterval),
			external.WithProgressPollInterval(o.DeletePollInterval),
		).
		Status(func(_ context.Context, b *storagev1.Bucket, _ reconciler.Observed) error {
			return conditions.MarkReady(b, ReasonAvailable, fmt.Sprintf("cloud bucket %s is available in %s", b.Status.ExternalName, b.Spec.Region))
		}).
		Observability(o.Observability).
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: o.Concurrency}).
		Complete()
}

func defaults(o Options) Options {
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
	if o.Limiter == nil {
		o.Limiter = external.NewLimiter(0, 1)
	}
	return o
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

// RequestToken is the create request token (Idempotency-Key) of b: the
// external package's token (b's UID) with a prefix, the same for every
// attempt of every process, so a retried create returns the bucket an
// earlier attempt made, and a bucket is recognised as b's by it.
func RequestToken(b *storagev1.Bucket) string { return "bucket-" + external.Token(b) }

// ConnectionSecretName is the name of b's connection Secret.
func ConnectionSecretName(b *storagev1.Bucket) string { return b.Name + "-connection" }

// connector makes a cloud client with b's credentials.
type connector struct {
	apiReader client.Reader
	o         Options
}

// endpoint is the Limiter key of an object in namespace ns with the
// credentials ref: the cloud's limits are per account.
func (c *connector) endpoint(ns string, ref *storagev1.SecretReference) string {
	return c.o.CloudEndpoint + "|" + c.credentialsKey(ns, ref).String()
}

func (c *connector) credentialsKey(ns string, ref *storagev1.SecretReference) types.NamespacedName {
	if ref != nil {
		return types.NamespacedName{Namespace: ns, Name: ref.Name}
	}
	return c.o.DefaultCredentials
}

// Connect reads b's credentials and returns a client for them.
func (c *connector) Connect(ctx context.Context, b *storagev1.Bucket) (external.Client[*storagev1.Bucket], error) {
	cl, err := c.cloud(ctx, b.Namespace, b.Spec.CredentialsSecretRef)
	if err != nil {
		return nil, err
	}
	return &bucketClient{cl: cl, afterCreate: c.o.AfterExternalCreate}, nil
}

// cloud reads the credentials (live: Secrets other than the connection
// Secrets are not cached) and returns a cloud client for them.
func (c *connector) cloud(ctx context.Context, ns string, ref *storagev1.SecretReference) (*cloud.Client, error) {
	key := c.credentialsKey(ns, ref)
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
	cl, err := cloud.NewClient(c.o.CloudEndpoint, creds, cloud.WithHTTPClient(c.o.HTTPClient), cloud.WithTimeout(c.o.CallTimeout))
	if err != nil {
		return nil, outcome.Terminal("InvalidCloudEndpoint", err)
	}
	return cl, nil
}

// bucketClient is the external.Client of Buckets.
type bucketClient struct {
	cl          *cloud.Client
	afterCreate func(context.Context, *storagev1.Bucket, *cloud.Bucket) error
}

// Observe reads the bucket and compares it with b's spec.
func (c *bucketClient) Observe(ctx context.Context, b *storagev1.Bucket, name string) (external.Observation, error) {
	if b.Spec.BucketName != "" && b.Spec.BucketName != name {
		return external.Observation{}, outcome.Terminal("ExternalNameMismatch", fmt.Errorf("spec.bucketName %q differs from the recorded external name %q", b.Spec.BucketName, name))
	}
	ext, err := traced(ctx, "cloud.GetBucket", func(ctx context.Context) (*cloud.Bucket, error) { return c.cl.Get(ctx, name) })
	switch {
	case cloud.IsNotFound(err):
		return external.Observation{}, nil
	case cloud.CodeOf(err) == cloud.CodeAccessDenied:
		return external.Observation{Exists: true, Foreign: true}, nil // another account's
	case err != nil:
		return external.Observation{}, err
	case ext.ClientToken != RequestToken(b):
		return external.Observation{Exists: true, Foreign: true}, nil
	case ext.State == cloud.StateDeleting:
		return external.Observation{Exists: true, Deleting: true}, nil
	case ext.Region != b.Spec.Region:
		return external.Observation{}, outcome.Terminal("RegionMismatch", fmt.Errorf("cloud bucket %s is in %s, the spec says %s; region cannot change", ext.Name, ext.Region, b.Spec.Region))
	}
	setStatus(b, ext)
	_, diffs := updateFor(b, ext)
	return external.Observation{
		Exists: true, UpToDate: len(diffs) == 0, Diff: strings.Join(diffs, ", "),
		ConnectionDetails: connectionDetails(ext),
	}, nil
}

// Create creates the bucket with b's request token.
func (c *bucketClient) Create(ctx context.Context, b *storagev1.Bucket, req external.CreateRequest) (external.Creation, error) {
	ext, err := traced(ctx, "cloud.CreateBucket", func(ctx context.Context) (*cloud.Bucket, error) {
		return c.cl.Create(ctx, cloud.CreateRequest{
			Name: req.Name, Region: b.Spec.Region, Versioning: b.Spec.Versioning, QuotaClass: quotaClass(b),
		}, "bucket-"+req.Token)
	})
	if err != nil {
		return external.Creation{}, err
	}
	if c.afterCreate != nil {
		if err := c.afterCreate(ctx, b, ext); err != nil {
			return external.Creation{}, err
		}
	}
	setStatus(b, ext)
	return external.Creation{ConnectionDetails: connectionDetails(ext)}, nil
}

// Update sets the bucket's mutable fields to b's spec.
func (c *bucketClient) Update(ctx context.Context, b *storagev1.Bucket, name string) (external.Update, error) {
	ext, err := c.cl.Get(ctx, name)
	if err != nil {
		return external.Update{}, err
	}
	req, _ := updateFor(b, ext)
	if ext, err = traced(ctx, "cloud.UpdateBucket", func(ctx context.Context) (*cloud.Bucket, error) { return c.cl.Update(ctx, name, req) }); err != nil {
		return external.Update{}, err
	}
	setStatus(b, ext)
	return external.Update{ConnectionDetails: connectionDetails(ext)}, nil
}

// Delete starts deleting the bucket.
func (c *bucketClient) Delete(ctx context.Context, _ *storagev1.Bucket, name string) error {
	_, err := traced(ctx, "cloud.DeleteBucket", func(ctx context.Context) (struct{}, error) { return struct{}{}, c.cl.Delete(ctx, name) })
	if err != nil && !cloud.IsNotFound(err) {
		return err
	}
	return nil
}

// traced runs one cloud call in a trace span (a child of the reconcile's).
func traced[R any](ctx context.Context, name string, call func(context.Context) (R, error)) (R, error) {
	ctx, done := observability.StartExternal(ctx, name)
	r, err := call(ctx)
	done(err)
	return r, err
}

// updateFor returns the update that sets ext to b's spec, and the
// differences as "field old→new".
func updateFor(b *storagev1.Bucket, ext *cloud.Bucket) (cloud.UpdateRequest, []string) {
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
	return req, diffs
}

func setStatus(b *storagev1.Bucket, ext *cloud.Bucket) {
	b.Status.ExternalName, b.Status.Endpoint, b.Status.ConnectionSecretName = ext.Name, ext.Endpoint, ConnectionSecretName(b)
}

func connectionDetails(ext *cloud.Bucket) external.ConnectionDetails {
	return external.ConnectionDetails{
		ConnectionEndpoint:        []byte(ext.Endpoint),
		ConnectionBucket:          []byte(ext.Name),
		ConnectionRegion:          []byte(ext.Region),
		ConnectionAccessKeyID:     []byte(ext.AccessKeyID),
		ConnectionSecretAccessKey: []byte(ext.SecretAccessKey),
	}
}

// Classify maps a cloud error onto the external package's kinds: quota and
// naming errors are Terminal, 429 Throttled with the server's Retry-After,
// 5xx and unreachable endpoints Retryable. The code is the cloud's error
// code (a fixed set).
func Classify(err error) external.Failure {
	var ce *cloud.Error
	if !errors.As(err, &ce) {
		if outcome.Classify(err).Class != outcome.ClassTransient {
			return external.Failure{} // already an outcome (credentials, names)
		}
		// Timeouts, refused connections, cancelled calls: try again with backoff.
		return external.Failure{Kind: external.Retryable, Code: "CloudUnreachable"}
	}
	switch {
	case ce.StatusCode == http.StatusTooManyRequests:
		return external.Failure{Kind: external.Throttled, Code: cloud.CodeSlowDown, RetryAfter: ce.RetryAfter}
	case ce.Code == cloud.CodeQuotaExceeded, ce.Code == cloud.CodeInvalidBucketName:
		return external.Failure{Kind: external.Terminal, Code: ce.Code}
	case ce.Code == cloud.CodeBucketAlreadyExists, ce.Code == cloud.CodeAccessDenied:
		return external.Failure{Kind: external.Terminal, Code: "BucketNameTaken"}
	case ce.Code == cloud.CodeInvalidAccessKey:
		return external.Failure{Kind: external.Retryable, Code: "CredentialsRejected"}
	case ce.Code == cloud.CodeOperationAborted:
		return external.Failure{Kind: external.Retryable, Code: "BucketBeingDeleted"}
	case ce.StatusCode >= 500:
		return external.Failure{Kind: external.Retryable, Code: "CloudUnavailable"}
	case ce.StatusCode >= 400:
		return external.Failure{Kind: external.Terminal, Code: "CloudRejected"}
	}
	return external.Failure{Kind: external.Retryable, Code: "CloudError"}
}

func quotaClass(b *storagev1.Bucket) string {
	if b.Spec.QuotaClass == "" {
		return cloud.QuotaStandard
	}
	return b.Spec.QuotaClass
}

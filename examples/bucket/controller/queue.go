package controller

import (
	"context"
	"fmt"
	"math"
	"strings"

	"k8s.io/utils/ptr"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	storagev1 "github.com/opkit/opkit/examples/bucket/api/v1"
	"github.com/opkit/opkit/examples/bucket/cloud"
	"github.com/opkit/opkit/external"
	"github.com/opkit/opkit/reconciler"
)

// QueueName is the queue controller's name.
const QueueName = "queue"

// Keys of the queue connection Secret "<queue>-queue".
const (
	ConnectionQueueURL    = "url"
	ConnectionAccessToken = "accessToken"
)

// +kubebuilder:rbac:groups=storage.example.com,resources=queues,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=storage.example.com,resources=queues/status,verbs=get;patch
// +kubebuilder:rbac:groups=storage.example.com,resources=queues/finalizers,verbs=update

// SetupQueues registers the queue controller with mgr: a Queue becomes a
// cloud queue named after its namespace and name, with its URL and access
// token in the Secret "<name>-queue". Everything else — crash-safe create,
// late-initialised defaults, drift, deletion, the shared rate limit, error
// classes — is package external's.
func SetupQueues(mgr manager.Manager, o Options) error {
	o = defaults(o)
	conn := &connector{apiReader: mgr.GetAPIReader(), o: o}
	return reconciler.For(mgr, QueueName, func() *storagev1.Queue { return &storagev1.Queue{} }).
		External(external.ConnectorFn[*storagev1.Queue](func(ctx context.Context, q *storagev1.Queue) (external.Client[*storagev1.Queue], error) {
			cl, err := conn.cloud(ctx, q.Namespace, &q.Spec.CredentialsSecretRef)
			return queueClient{cl}, err
		}),
			external.WithExternalName(func(q *storagev1.Queue) string { return q.Namespace + "_" + q.Name }),
			external.WithClassifier(external.ClassifierFn(Classify)),
			external.WithLimiter(o.Limiter),
			external.WithEndpoint(func(q *storagev1.Queue) string { return conn.endpoint(q.Namespace, &q.Spec.CredentialsSecretRef) }),
			external.WithPolicy(func(q *storagev1.Queue) external.Policy {
				return external.Policy{Orphan: q.Spec.DeletionPolicy == storagev1.DeletionOrphan}
			}),
			external.WithConnectionSecret(func(q *storagev1.Queue) string { return q.Name + "-queue" }),
			external.WithPollInterval(o.ResyncInterval),
		).
		Observability(o.Observability).
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: o.Concurrency}).
		Complete()
}

// queueClient is the external.Client of Queues.
type queueClient struct{ cl *cloud.Client }

func (c queueClient) Observe(ctx context.Context, q *storagev1.Queue, name string) (external.Observation, error) {
	ext, err := c.cl.GetQueue(ctx, name)
	switch {
	case cloud.IsQueueNotFound(err):
		return external.Observation{}, nil
	case err != nil:
		return external.Observation{}, err
	case ext.ClientToken != "queue-"+external.Token(q):
		return external.Observation{Exists: true, Foreign: true}, nil
	}
	obs := external.Observation{Exists: true, ConnectionDetails: external.ConnectionDetails{
		ConnectionQueueURL: []byte(ext.URL), ConnectionAccessToken: []byte(ext.AccessToken),
	}}
	// Late initialisation: what the spec left out takes the cloud's value.
	if q.Spec.RetentionSeconds == nil || q.Spec.VisibilityTimeoutSeconds == nil {
		q.Spec.RetentionSeconds = orDefault(q.Spec.RetentionSeconds, ext.RetentionSeconds)
		q.Spec.VisibilityTimeoutSeconds = orDefault(q.Spec.VisibilityTimeoutSeconds, ext.VisibilityTimeoutSeconds)
		obs.LateInitialized = true
	}
	_, diffs := queueUpdate(q, ext)
	obs.UpToDate, obs.Diff = len(diffs) == 0, strings.Join(diffs, ", ")
	q.Status.URL = ext.URL
	return obs, nil
}

func (c queueClient) Create(ctx context.Context, q *storagev1.Queue, req external.CreateRequest) (external.Creation, error) {
	ext, err := c.cl.CreateQueue(ctx, cloud.CreateQueueRequest{
		Name: req.Name, FIFO: q.Spec.FIFO,
		RetentionSeconds: int(ptr.Deref(q.Spec.RetentionSeconds, 0)), VisibilityTimeoutSeconds: int(ptr.Deref(q.Spec.VisibilityTimeoutSeconds, 0)),
	}, "queue-"+req.Token)
	if err != nil {
		return external.Creation{}, err
	}
	q.Status.URL = ext.URL
	return external.Creation{ConnectionDetails: external.ConnectionDetails{
		ConnectionQueueURL: []byte(ext.URL), ConnectionAccessToken: []byte(ext.AccessToken),
	}}, nil
}

func (c queueClient) Update(ctx context.Context, q *storagev1.Queue, name string) (external.Update, error) {
	ext, err := c.cl.GetQueue(ctx, name)
	if err != nil {
		return external.Update{}, err
	}
	req, _ := queueUpdate(q, ext)
	_, err = c.cl.UpdateQueue(ctx, name, req)
	return external.Update{}, err
}

func (c queueClient) Delete(ctx context.Context, _ *storagev1.Queue, name string) error {
	if err := c.cl.DeleteQueue(ctx, name); err != nil && !cloud.IsQueueNotFound(err) {
		return err
	}
	return nil
}

// queueUpdate returns the update that sets ext to q's spec, and the
// differences; FIFO cannot change, so a difference there is not updated.
func queueUpdate(q *storagev1.Queue, ext *cloud.Queue) (cloud.UpdateQueueRequest, []string) {
	var req cloud.UpdateQueueRequest
	var diffs []string
	if r := q.Spec.RetentionSeconds; r != nil && int(*r) != ext.RetentionSeconds {
		req.RetentionSeconds = ptr.To(int(*r))
		diffs = append(diffs, fmt.Sprintf("retentionSeconds %d→%d", ext.RetentionSeconds, *r))
	}
	if v := q.Spec.VisibilityTimeoutSeconds; v != nil && int(*v) != ext.VisibilityTimeoutSeconds {
		req.VisibilityTimeoutSeconds = ptr.To(int(*v))
		diffs = append(diffs, fmt.Sprintf("visibilityTimeoutSeconds %d→%d", ext.VisibilityTimeoutSeconds, *v))
	}
	return req, diffs
}

func orDefault(p *int32, v int) *int32 {
	if p != nil {
		return p
	}
	return ptr.To(int32(min(v, math.MaxInt32))) //nolint:gosec // bounded just above
}

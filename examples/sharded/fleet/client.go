package fleet

import (
	"context"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
)

// newReplicaClient is the manager.Options.NewClient of a replica: the
// manager's usual client, which also tells the overlap detector (when set)
// that this replica is inside Reconcile for a WebApp: the webapp Reconciler's
// first read of the object happens only after sharding.Shard.Begin admitted it
// (Begin reads the cache directly and is not seen here). See [OverlapDetector].
func newReplicaClient(member string, d *OverlapDetector) func(*rest.Config, client.Options) (client.Client, error) {
	return func(cfg *rest.Config, opts client.Options) (client.Client, error) {
		c, err := client.New(cfg, opts)
		if err != nil {
			return nil, err
		}
		return &replicaClient{Client: c, member: member, d: d}, nil
	}
}

type replicaClient struct {
	client.Client
	member string
	d      *OverlapDetector
}

// inReconcile returns the WebApp when obj is one and ctx is a reconcile's.
func inReconcile(ctx context.Context, obj client.Object) (*webappv1.WebApp, string) {
	app, ok := obj.(*webappv1.WebApp)
	if !ok {
		return nil, ""
	}
	return app, string(controller.ReconcileIDFromContext(ctx))
}

func (c *replicaClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	app, id := inReconcile(ctx, obj)
	if id == "" {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	if c.d != nil {
		c.d.enter(ctx, c.member, key, id)
	}
	err := c.Client.Get(ctx, key, obj, opts...)
	if err == nil {
		if c.d != nil {
			c.d.visit(key, c.member, app.Generation)
		}
	}
	return err
}

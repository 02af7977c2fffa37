package observability

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// TracerName is the instrumentation scope of every span this package starts.
const TracerName = "github.com/opkit/opkit/observability"

// Span attribute keys.
const (
	AttrController       = attribute.Key("opkit.controller")
	AttrReconcileID      = attribute.Key("opkit.reconcile_id")
	AttrResult           = attribute.Key("opkit.result")
	AttrObjectKind       = attribute.Key("opkit.object.kind")
	AttrObjectNamespace  = attribute.Key("opkit.object.namespace")
	AttrObjectName       = attribute.Key("opkit.object.name")
	AttrTriggerEvent     = attribute.Key("opkit.trigger.event")
	AttrTriggerKind      = attribute.Key("opkit.trigger.kind")
	AttrTriggerNamespace = attribute.Key("opkit.trigger.namespace")
	AttrTriggerName      = attribute.Key("opkit.trigger.name")
	AttrTriggerCoalesced = attribute.Key("opkit.trigger.coalesced")
	AttrAPIVerb          = attribute.Key("opkit.api.verb")
	AttrAPISubresource   = attribute.Key("opkit.api.subresource")
)

// StartExternal starts a client span named name for a call to something
// outside the cluster (a cloud API, a database) as a child of the span in
// ctx, and returns a function that ends it, recording err when non-nil:
//
//	ctx, done := observability.StartExternal(ctx, "s3.PutObject")
//	err := put(ctx)
//	done(err)
//
// The span comes from the TracerProvider of the span already in ctx (the
// reconcile span of [Observability.Wrap]); with none, or the default no-op
// provider, it costs a context lookup and records nothing.
func StartExternal(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, func(error)) {
	tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer(TracerName)
	ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, func(err error) { endSpan(span, err) }
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// tracingClient starts a child span for every write it sends. Reads go
// straight through: they are usually served from the cache and would drown
// the writes that matter.
type tracingClient struct {
	client.Client
	tracer trace.Tracer
}

// tracingClientFor wraps c so each write is a span of tracer.
func tracingClientFor(c client.Client, tracer trace.Tracer) client.Client {
	return &tracingClient{Client: c, tracer: tracer}
}

func (c *tracingClient) start(ctx context.Context, verb, subresource string, obj any) (context.Context, trace.Span) {
	name := "kube." + verb
	attrs := []attribute.KeyValue{AttrAPIVerb.String(verb)}
	if subresource != "" {
		name += " " + subresource
		attrs = append(attrs, AttrAPISubresource.String(subresource))
	}
	attrs = append(attrs, objectAttrs(c.Scheme(), obj)...)
	return c.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

func objectAttrs(scheme *runtime.Scheme, obj any) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	switch o := obj.(type) {
	case client.Object:
		kind := o.GetObjectKind().GroupVersionKind().Kind
		if scheme != nil {
			if gvk, err := apiutil.GVKForObject(o, scheme); err == nil {
				kind = gvk.Kind
			}
		}
		attrs = append(attrs, AttrObjectKind.String(kind), AttrObjectNamespace.String(o.GetNamespace()), AttrObjectName.String(o.GetName()))
	case interface {
		GetName() *string
		GetNamespace() *string
		GetKind() *string
	}: // generated ApplyConfigurations
		for _, kv := range []struct {
			k attribute.Key
			v *string
		}{{AttrObjectKind, o.GetKind()}, {AttrObjectNamespace, o.GetNamespace()}, {AttrObjectName, o.GetName()}} {
			if kv.v != nil {
				attrs = append(attrs, kv.k.String(*kv.v))
			}
		}
	}
	return attrs
}

func (c *tracingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	ctx, span := c.start(ctx, "create", "", obj)
	err := c.Client.Create(ctx, obj, opts...)
	endSpan(span, err)
	return err
}

func (c *tracingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	ctx, span := c.start(ctx, "update", "", obj)
	err := c.Client.Update(ctx, obj, opts...)
	endSpan(span, err)
	return err
}

func (c *tracingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	ctx, span := c.start(ctx, "patch", "", obj)
	err := c.Client.Patch(ctx, obj, patch, opts...)
	endSpan(span, err)
	return err
}

func (c *tracingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	ctx, span := c.start(ctx, "apply", "", obj)
	err := c.Client.Apply(ctx, obj, opts...)
	endSpan(span, err)
	return err
}

func (c *tracingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	ctx, span := c.start(ctx, "delete", "", obj)
	err := c.Client.Delete(ctx, obj, opts...)
	endSpan(span, err)
	return err
}

func (c *tracingClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	ctx, span := c.start(ctx, "deletecollection", "", obj)
	err := c.Client.DeleteAllOf(ctx, obj, opts...)
	endSpan(span, err)
	return err
}

func (c *tracingClient) Status() client.SubResourceWriter {
	return &tracingSubResource{c: c, name: "status", writer: c.Client.Status()}
}

func (c *tracingClient) SubResource(subResource string) client.SubResourceClient {
	sc := c.Client.SubResource(subResource)
	return &tracingSubResource{c: c, name: subResource, writer: sc, reader: sc}
}

// tracingSubResource traces writes to a subresource; reads pass through.
type tracingSubResource struct {
	c      *tracingClient
	name   string
	writer client.SubResourceWriter
	reader client.SubResourceReader // nil for Status()
}

func (s *tracingSubResource) Get(ctx context.Context, obj, subResource client.Object, opts ...client.SubResourceGetOption) error {
	if s.reader == nil {
		return s.c.Client.SubResource(s.name).Get(ctx, obj, subResource, opts...)
	}
	return s.reader.Get(ctx, obj, subResource, opts...)
}

func (s *tracingSubResource) Create(ctx context.Context, obj, subResource client.Object, opts ...client.SubResourceCreateOption) error {
	ctx, span := s.c.start(ctx, "create", s.name, obj)
	err := s.writer.Create(ctx, obj, subResource, opts...)
	endSpan(span, err)
	return err
}

func (s *tracingSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	ctx, span := s.c.start(ctx, "update", s.name, obj)
	err := s.writer.Update(ctx, obj, opts...)
	endSpan(span, err)
	return err
}

func (s *tracingSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	ctx, span := s.c.start(ctx, "patch", s.name, obj)
	err := s.writer.Patch(ctx, obj, patch, opts...)
	endSpan(span, err)
	return err
}

func (s *tracingSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	ctx, span := s.c.start(ctx, "apply", s.name, obj)
	err := s.writer.Apply(ctx, obj, opts...)
	endSpan(span, err)
	return err
}

package otlp

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

type options struct {
	endpoint    string
	insecure    bool
	headers     map[string]string
	serviceName string
	ratio       float64
}

// Option configures [NewTracerProvider].
type Option func(*options)

// Endpoint is the collector's host:port (e.g. "otel-collector.observability:4317").
// Without it the exporter's defaults apply: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT /
// OTEL_EXPORTER_OTLP_ENDPOINT, else localhost:4317.
func Endpoint(hostPort string) Option { return func(o *options) { o.endpoint = hostPort } }

// Insecure sends spans over plaintext gRPC instead of TLS.
func Insecure() Option { return func(o *options) { o.insecure = true } }

// Headers are sent with every export request (e.g. an API key).
func Headers(h map[string]string) Option { return func(o *options) { o.headers = h } }

// ServiceName sets the service.name resource attribute (default "opkit-operator").
func ServiceName(name string) Option { return func(o *options) { o.serviceName = name } }

// SampleRatio samples this fraction of new traces, in [0, 1] (default 1:
// every reconcile). Child spans follow their parent's decision.
func SampleRatio(r float64) Option { return func(o *options) { o.ratio = r } }

// NewTracerProvider returns a TracerProvider exporting to an OTLP/gRPC
// collector. The connection is made lazily; an unreachable collector does not
// fail here but drops spans (the SDK logs export errors through otel's error
// handler). It does not install itself as the global provider.
func NewTracerProvider(ctx context.Context, opts ...Option) (*sdktrace.TracerProvider, error) {
	o := options{serviceName: "opkit-operator", ratio: 1}
	for _, opt := range opts {
		opt(&o)
	}
	if o.ratio < 0 || o.ratio > 1 {
		return nil, fmt.Errorf("otlp: sample ratio %v outside [0, 1]", o.ratio)
	}
	if o.serviceName == "" {
		return nil, errors.New("otlp: empty service name")
	}
	var eo []otlptracegrpc.Option
	if o.endpoint != "" {
		eo = append(eo, otlptracegrpc.WithEndpoint(o.endpoint))
	}
	if o.insecure {
		eo = append(eo, otlptracegrpc.WithInsecure())
	}
	if len(o.headers) > 0 {
		eo = append(eo, otlptracegrpc.WithHeaders(o.headers))
	}
	exp, err := otlptracegrpc.New(ctx, eo...)
	if err != nil {
		return nil, fmt.Errorf("otlp: exporter: %w", err)
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", o.serviceName))),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.ratio))),
	), nil
}

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

// DefaultServiceName is the service.name of the spans' resource when neither
// [ServiceName] nor the environment (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES) names the service.
const DefaultServiceName = "opkit-operator"

// serviceNameKey is the OpenTelemetry semantic-convention key of the service name.
const serviceNameKey = attribute.Key("service.name")

type options struct {
	endpoint    string
	insecure    bool
	headers     map[string]string
	serviceName *string // nil: not set by an option
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

// ServiceName sets the service.name resource attribute. It overrides
// OTEL_SERVICE_NAME and a service.name in OTEL_RESOURCE_ATTRIBUTES; without
// it (and without those variables) the name is [DefaultServiceName]. An
// empty name is an error from [NewTracerProvider].
func ServiceName(name string) Option { return func(o *options) { o.serviceName = &name } }

// SampleRatio samples this fraction of new traces, in [0, 1] (default 1:
// every reconcile). Child spans follow their parent's decision.
func SampleRatio(r float64) Option { return func(o *options) { o.ratio = r } }

// NewTracerProvider returns a TracerProvider exporting to an OTLP/gRPC
// collector, with the resource described in the package documentation
// (defaults, then OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, then
// options). The connection is made lazily; an unreachable collector does not
// fail here but drops spans (the SDK logs export errors through otel's error
// handler). It does not install itself as the global provider. It returns an
// error for a sample ratio outside [0, 1], an empty [ServiceName], or a
// malformed OTEL_RESOURCE_ATTRIBUTES.
func NewTracerProvider(ctx context.Context, opts ...Option) (*sdktrace.TracerProvider, error) {
	o := options{ratio: 1}
	for _, opt := range opts {
		opt(&o)
	}
	if o.ratio < 0 || o.ratio > 1 {
		return nil, fmt.Errorf("otlp: sample ratio %v outside [0, 1]", o.ratio)
	}
	if o.serviceName != nil && *o.serviceName == "" {
		return nil, errors.New("otlp: empty service name")
	}
	res, err := newResource(ctx, o)
	if err != nil {
		return nil, err
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
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.ratio))),
	), nil
}

// newResource layers defaults, the environment and explicit options, in that
// order: resource.New merges each detector over the ones before it.
func newResource(ctx context.Context, o options) (*resource.Resource, error) {
	layers := []resource.Option{
		resource.WithAttributes(serviceNameKey.String(DefaultServiceName)),
		resource.WithFromEnv(),
	}
	if o.serviceName != nil {
		layers = append(layers, resource.WithAttributes(serviceNameKey.String(*o.serviceName)))
	}
	res, err := resource.New(ctx, layers...)
	if err != nil {
		return nil, fmt.Errorf("otlp: resource from OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME: %w", err)
	}
	return res, nil
}

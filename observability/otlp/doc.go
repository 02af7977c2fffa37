// Package otlp builds an OpenTelemetry TracerProvider that exports spans over
// OTLP/gRPC, for [github.com/opkit/opkit/observability.WithTracerProvider].
//
// It is its own Go module, github.com/opkit/opkit/observability/otlp: the
// exporter, gRPC and protobuf enter a program's module graph only when the
// program imports this package, never through github.com/opkit/opkit. It
// imports no other opkit package, so its version is independent of
// opkit's:
//
//	go get github.com/opkit/opkit/observability/otlp
//
// Guarantees:
//
//   - The provider batches spans in memory (bounded by the SDK's batch
//     processor: 2048 queued spans, excess dropped) and exports them in the
//     background; call Shutdown on it when the manager stops to flush what is
//     queued.
//   - The spans' resource is built from three layers, each overriding the one
//     before it attribute by attribute: the default service.name
//     "opkit-operator"; then the environment, as the OpenTelemetry
//     specification defines it (OTEL_RESOURCE_ATTRIBUTES, a comma-separated
//     list of key=value pairs with URL-encoded values, and
//     OTEL_SERVICE_NAME, which overrides a service.name given in
//     OTEL_RESOURCE_ATTRIBUTES); then this package's options ([ServiceName]).
//     So an explicit option beats the environment, and the environment beats
//     the default. Attributes from the environment that no option sets are
//     kept.
//   - A malformed OTEL_RESOURCE_ATTRIBUTES (an entry without "=") is an error
//     from [NewTracerProvider], not a silently smaller resource.
//   - The exporter's endpoint, headers and TLS settings follow the OTLP
//     exporter's own environment variables (OTEL_EXPORTER_OTLP_*) unless an
//     option sets them.
package otlp

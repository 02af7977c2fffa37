// Package otlp builds an OpenTelemetry TracerProvider that exports spans over
// OTLP/gRPC, for [observability.WithTracerProvider]. It is a separate package
// so that programs which keep the default no-op tracing do not link the
// exporter and its gRPC stack.
//
// The provider batches spans in memory (bounded by the SDK's batch processor:
// 2048 queued spans, excess dropped) and exports them in the background; call
// Shutdown on it when the manager stops to flush what is queued.
package otlp

package otlp_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/opkit/opkit/observability/otlp"
)

// collector is a minimal OTLP/gRPC trace collector that remembers span names.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
	attrs map[string]string
}

func (c *collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			c.attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.names = append(c.names, s.GetName())
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func TestSpansReachAnOTLPCollector(t *testing.T) {
	lis, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	col := &collector{attrs: map[string]string{}}
	collectortrace.RegisterTraceServiceServer(srv, col)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp, err := otlp.NewTracerProvider(ctx, otlp.Endpoint(lis.Addr().String()), otlp.Insecure(), otlp.ServiceName("shop-operator"))
	if err != nil {
		t.Fatal(err)
	}
	var _ trace.TracerProvider = tp
	_, span := tp.Tracer("test").Start(ctx, "reconcile shop")
	span.End()
	if err := tp.Shutdown(ctx); err != nil { // flushes the batch
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.names) != 1 || col.names[0] != "reconcile shop" || col.attrs["service.name"] != "shop-operator" {
		t.Fatalf("collector got spans %v with resource %v", col.names, col.attrs)
	}
}

func TestNewTracerProviderRejectsBadOptions(t *testing.T) {
	if _, err := otlp.NewTracerProvider(context.Background(), otlp.SampleRatio(2)); err == nil {
		t.Fatal("sample ratio 2 accepted")
	}
	if _, err := otlp.NewTracerProvider(context.Background(), otlp.ServiceName("")); err == nil {
		t.Fatal("empty service name accepted")
	}
}

package otlp_test

import (
	"context"
	"maps"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/opkit/opkit/observability/otlp"
)

// collector is a minimal OTLP/gRPC trace collector that remembers span names
// and the resource attributes they came with.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	addr  string
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

func startCollector(t *testing.T) *collector {
	t.Helper()
	lis, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	col := &collector{addr: lis.Addr().String(), attrs: map[string]string{}}
	collectortrace.RegisterTraceServiceServer(srv, col)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return col
}

// exportOne sends one span named name through a provider built with opts and
// returns the span names and resource attributes the collector received.
func exportOne(t *testing.T, name string, opts ...otlp.Option) ([]string, map[string]string) {
	t.Helper()
	col := startCollector(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp, err := otlp.NewTracerProvider(ctx, append([]otlp.Option{otlp.Endpoint(col.addr), otlp.Insecure()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	var _ trace.TracerProvider = tp
	_, span := tp.Tracer("test").Start(ctx, name)
	span.End()
	if err := tp.Shutdown(ctx); err != nil { // flushes the batch
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	return append([]string(nil), col.names...), maps.Clone(col.attrs)
}

func TestSpansReachAnOTLPCollector(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	names, attrs := exportOne(t, "reconcile shop", otlp.ServiceName("shop-operator"))
	if len(names) != 1 || names[0] != "reconcile shop" || attrs["service.name"] != "shop-operator" {
		t.Fatalf("collector got spans %v with resource %v", names, attrs)
	}
}

// The resource: options over OTEL_SERVICE_NAME over OTEL_RESOURCE_ATTRIBUTES
// over the default, attribute by attribute.
func TestResourcePrecedence(t *testing.T) {
	cases := []struct {
		name       string
		svcEnv     string // OTEL_SERVICE_NAME
		attrsEnv   string // OTEL_RESOURCE_ATTRIBUTES
		opts       []otlp.Option
		want       map[string]string
		wantAbsent []string
	}{
		{
			name: "default", want: map[string]string{"service.name": otlp.DefaultServiceName},
			wantAbsent: []string{"deployment.environment.name"},
		},
		{
			name: "OTEL_SERVICE_NAME over the default", svcEnv: "env-operator",
			want: map[string]string{"service.name": "env-operator"},
		},
		{
			name: "OTEL_RESOURCE_ATTRIBUTES over the default", attrsEnv: "service.name=attrs-operator,deployment.environment.name=prod,k8s.namespace.name=ops%20team",
			want: map[string]string{"service.name": "attrs-operator", "deployment.environment.name": "prod", "k8s.namespace.name": "ops team"},
		},
		{
			name: "OTEL_SERVICE_NAME over OTEL_RESOURCE_ATTRIBUTES", svcEnv: "env-operator", attrsEnv: "service.name=attrs-operator,deployment.environment.name=prod",
			want: map[string]string{"service.name": "env-operator", "deployment.environment.name": "prod"},
		},
		{
			name: "ServiceName over the environment, other env attributes kept", svcEnv: "env-operator", attrsEnv: "service.name=attrs-operator,deployment.environment.name=prod",
			opts: []otlp.Option{otlp.ServiceName("option-operator")},
			want: map[string]string{"service.name": "option-operator", "deployment.environment.name": "prod"},
		},
		{
			name: "ServiceName over the default", opts: []otlp.Option{otlp.ServiceName("option-operator")},
			want: map[string]string{"service.name": "option-operator"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OTEL_SERVICE_NAME", tc.svcEnv)
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", tc.attrsEnv)
			names, attrs := exportOne(t, "reconcile", tc.opts...)
			if len(names) != 1 {
				t.Fatalf("collector got spans %v", names)
			}
			for k, v := range tc.want {
				if attrs[k] != v {
					t.Errorf("resource %s = %q, want %q (resource %v)", k, attrs[k], v, attrs)
				}
			}
			for _, k := range tc.wantAbsent {
				if _, ok := attrs[k]; ok {
					t.Errorf("resource has %s: %v", k, attrs)
				}
			}
		})
	}
}

func TestNewTracerProviderRejectsBadOptions(t *testing.T) {
	if _, err := otlp.NewTracerProvider(context.Background(), otlp.SampleRatio(2)); err == nil {
		t.Fatal("sample ratio 2 accepted")
	}
	if _, err := otlp.NewTracerProvider(context.Background(), otlp.ServiceName("")); err == nil {
		t.Fatal("empty service name accepted")
	}
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=prod,no-value")
	_, err := otlp.NewTracerProvider(context.Background())
	if err == nil || !strings.Contains(err.Error(), "OTEL_RESOURCE_ATTRIBUTES") || !strings.Contains(err.Error(), "no-value") {
		t.Fatalf("malformed OTEL_RESOURCE_ATTRIBUTES: want an error naming it and the bad entry, got %v", err)
	}
}

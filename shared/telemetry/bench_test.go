package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// discard is an exporter that drops every span.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkPublishSpan measures one traced publish (StartPublish, inject,
// RecordAck-free End) with tracing off, recorded but dropped, and exported
// over OTLP/HTTP to a local endpoint that discards the request.
func BenchmarkPublishSpan(b *testing.B) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	otlp, shutdown, err := Setup(context.Background(), Config{ServiceName: "bench", Endpoint: collector.URL, Sampler: sdktrace.AlwaysSample()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	for _, bc := range []struct {
		name string
		tp   trace.TracerProvider
	}{
		{"off", noop.NewTracerProvider()},
		{"batch-discard", sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}, sdktrace.WithMaxQueueSize(1<<16)))},
		{"otlp-http", otlp},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tr := NewTracer(bc.tp, nil)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				msg := &nats.Msg{Subject: "events.pharmacy.dispense", Header: nats.Header{}}
				_, span := tr.StartPublish(ctx, msg, MessageID("x"))
				Fail(span, "CODE", "validation")
				span.End()
			}
		})
	}
}

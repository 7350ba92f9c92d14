package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// discard is an exporter that drops every span.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// benchProvider is a tracer provider the benchmarks compare.
type benchProvider struct {
	name string
	tp   trace.TracerProvider
}

// benchProviders returns tracing off, recorded but dropped, and exported
// over OTLP/HTTP to a local endpoint that discards the request, by
// deadletter's exporter (Setup's) and by the SDK's; the endpoint and the
// exporters stop with the benchmark.
func benchProviders(b *testing.B) []benchProvider {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(collector.Close)
	otlp, shutdown, err := Setup(context.Background(), Config{ServiceName: "bench", Endpoint: collector.URL, Sampler: sdktrace.AlwaysSample()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = shutdown(context.Background()) })
	sdkExp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(collector.URL+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	sdkOTLP := sdktrace.NewTracerProvider(sdktrace.WithBatcher(sdkExp, sdktrace.WithMaxQueueSize(DefaultMaxQueueSize)))
	b.Cleanup(func() { _ = sdkOTLP.Shutdown(context.Background()) })
	return []benchProvider{
		{"off", noop.NewTracerProvider()},
		{"batch-discard", sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}, sdktrace.WithMaxQueueSize(1<<16)))},
		{"otlp-http", otlp},
		{"otlp-http-sdk-exporter", sdkOTLP},
	}
}

// BenchmarkPublishSpan measures one traced publish (StartPublish, inject,
// RecordAck-free End) with tracing off, recorded but dropped, and exported
// over OTLP/HTTP to a local endpoint that discards the request.
func BenchmarkPublishSpan(b *testing.B) {
	for _, bc := range benchProviders(b) {
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

// benchMsg is a JetStream message as a consumer receives it, for
// BenchmarkIngestSpans: only what StartConsume reads is implemented.
type benchMsg struct {
	jetstream.Msg
	subject string
	data    []byte
	header  nats.Header
	meta    *jetstream.MsgMetadata
}

func (m *benchMsg) Subject() string                           { return m.subject }
func (m *benchMsg) Data() []byte                              { return m.data }
func (m *benchMsg) Headers() nats.Header                      { return m.header }
func (m *benchMsg) Metadata() (*jetstream.MsgMetadata, error) { return m.meta, nil }

// BenchmarkIngestSpans measures what tracing adds to one event the
// validator commits without a downstream: its validate span continuing the
// publisher's context, with the commit's outcome and LEDGER sequence, and
// its export. Compare off with otlp-http (OTLP/HTTP to a local endpoint
// that discards the request) for the cost per event. The untraced-*
// cases are events published without a traceparent: their span is a root
// of the derived trace (EventTraceID).
func BenchmarkIngestSpans(b *testing.B) {
	h := nats.Header{}
	h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	meta := &jetstream.MsgMetadata{Stream: "EVENTS", Consumer: "validator", NumDelivered: 1,
		Sequence: jetstream.SequencePair{Stream: 12345, Consumer: 12345}}
	traced := &benchMsg{subject: "events.pharmacy.dispense", data: make([]byte, 530), header: h, meta: meta}
	untraced := &benchMsg{subject: "events.pharmacy.dispense", data: make([]byte, 530), meta: meta}
	ack := &jetstream.PubAck{Stream: "LEDGER", Sequence: 6789}
	for _, bc := range benchProviders(b) {
		for _, mc := range []struct {
			prefix string
			msg    *benchMsg
		}{{"", traced}, {"untraced-", untraced}} {
			b.Run(mc.prefix+bc.name, func(b *testing.B) {
				tr := NewTracer(bc.tp, nil)
				b.ReportAllocs()
				for b.Loop() {
					_, span := tr.StartConsume(context.Background(), mc.msg, Operation("validate"))
					span.SetAttributes(DomainKey.String("pharmacy"), OutcomeKey.String("committed"), LedgerSequenceKey.Int64(int64(ack.Sequence)))
					span.End()
				}
			})
		}
	}
}

// BenchmarkExportSpans measures encoding and sending a batch of 512 validate
// spans (the batch processor's batch) to a local endpoint that discards
// it, by deadletter's exporter and by the SDK's, per span.
func BenchmarkExportSpans(b *testing.B) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(collector.Close)
	rec := tracetest.NewSpanRecorder()
	res, err := newResource(Config{ServiceName: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res))
	tr := NewTracer(tp, nil)
	h := nats.Header{}
	h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	msg := &benchMsg{subject: "events.pharmacy.dispense", data: make([]byte, 530), header: h,
		meta: &jetstream.MsgMetadata{Stream: "EVENTS", Consumer: "validator", NumDelivered: 1,
			Sequence: jetstream.SequencePair{Stream: 12345, Consumer: 12345}}}
	for range 512 {
		_, span := tr.StartConsume(context.Background(), msg, Operation("validate"))
		span.SetAttributes(DomainKey.String("pharmacy"), OutcomeKey.String("committed"), LedgerSequenceKey.Int64(6789))
		span.End()
	}
	spans := rec.Ended()
	ours, _ := newOTLPExporter(Config{Endpoint: collector.URL}, collector.Client())
	sdkExp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(collector.URL+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		exp  sdktrace.SpanExporter
	}{{"deadletter", ours}, {"sdk", sdkExp}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.exp.ExportSpans(context.Background(), spans); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
		})
	}
}

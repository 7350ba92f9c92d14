package telemetry

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP endpoint recording each request's body
// (decompressed) and headers, answering with the statuses in answers (then
// 200).
type collector struct {
	*httptest.Server
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	answers []int
	calls   atomic.Int32
}

func newCollector(t testing.TB, answers ...int) *collector {
	c := &collector{answers: answers}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(c.calls.Add(1)) - 1
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.bodies = append(c.bodies, b)
		c.headers = append(c.headers, r.Header.Clone())
		c.mu.Unlock()
		if n < len(c.answers) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(c.answers[n])
			return
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(c.Close)
	return c
}

// request decodes the i-th request received.
func (c *collector) request(t testing.TB, i int) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if i >= len(c.bodies) {
		t.Fatalf("collector received %d requests, want at least %d", len(c.bodies), i+1)
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(c.bodies[i], &req); err != nil {
		t.Fatalf("request %d is not an ExportTraceServiceRequest: %v", i, err)
	}
	return &req
}

// sampleSpans records spans using every feature an OTLP span has: local and
// remote parents, each span kind, every attribute type (zero values too),
// events, links, statuses, trace state, two instrumentation scopes (one
// with attributes), two resources, and limits that drop attributes, events
// and links.
func sampleSpans(t testing.TB) []sdktrace.ReadOnlySpan {
	rec := tracetest.NewSpanRecorder()
	res1, err := newResource(Config{ServiceName: "svc-one", ServiceVersion: "1.0.0", InstanceID: "i-1"})
	if err != nil {
		t.Fatal(err)
	}
	res2, err := newResource(Config{ServiceName: "svc-two"})
	if err != nil {
		t.Fatal(err)
	}
	tp1 := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res1))
	limits := sdktrace.NewSpanLimits()
	limits.AttributeCountLimit, limits.EventCountLimit, limits.LinkCountLimit = 2, 1, 1
	limits.AttributePerEventCountLimit, limits.AttributePerLinkCountLimit = 1, 1
	tp2 := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res2), sdktrace.WithRawSpanLimits(limits))
	t.Cleanup(func() {
		_ = tp1.Shutdown(context.Background())
		_ = tp2.Shutdown(context.Background())
	})
	tr := tp1.Tracer("deadletter/test", trace.WithInstrumentationVersion("0.1.0"))
	other := tp1.Tracer("other", trace.WithInstrumentationAttributes(attribute.String("scope.attr", "x")))
	ts, err := trace.ParseTraceState("vendor=abc,other=x")
	if err != nil {
		t.Fatal(err)
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true,
	})
	ctx := context.Background()

	ctx1, root := tr.Start(ctx, "root", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.Bool("b.false", false), attribute.Bool("b.true", true),
		attribute.Int64("i.zero", 0), attribute.Int64("i.neg", -42), attribute.Int64("i.big", 1<<62),
		attribute.Float64("f", 3.25), attribute.Float64("f.zero", 0),
		attribute.String("s.empty", ""), attribute.String("s", "ünïcode ✓"),
		attribute.BoolSlice("bs", []bool{true, false}), attribute.Int64Slice("is", []int64{1, -2, 0}),
		attribute.Float64Slice("fs", []float64{0.5, -1}), attribute.StringSlice("ss", []string{"a", ""}),
		attribute.StringSlice("ss.empty", []string{}),
		attribute.ByteSlice("bytes", []byte{0, 1, 2}),
		attribute.Slice("slice", attribute.StringValue("x"), attribute.IntValue(7)),
		attribute.Map("map", attribute.String("k", "v"), attribute.Bool("on", true)),
	))
	root.AddEvent("an event", trace.WithAttributes(attribute.String("code", "GTIN_CHECK_DIGIT_FAILED")))
	root.AddEvent("bare event")
	root.SetStatus(codes.Error, "GTIN_CHECK_DIGIT_FAILED")

	_, child := tr.Start(ctx1, "child", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("link", "message")}}))
	child.SetStatus(codes.Ok, "")
	child.End()
	root.End()

	_, fromRemote := tr.Start(trace.ContextWithRemoteSpanContext(ctx, remote), "from remote", trace.WithSpanKind(trace.SpanKindProducer))
	fromRemote.End()
	_, server := other.Start(ctx, "server", trace.WithSpanKind(trace.SpanKindServer))
	server.End()
	_, client := other.Start(ctx, "client", trace.WithSpanKind(trace.SpanKindClient))
	client.End()

	_, limited := tp2.Tracer("deadletter/test").Start(ctx, "limited", trace.WithAttributes(
		attribute.String("a", "1"), attribute.String("b", "2"), attribute.String("c", "3"), attribute.String("d", "4")),
		trace.WithLinks(
			trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("x", "1"), attribute.String("y", "2")}},
			trace.Link{SpanContext: remote}))
	limited.AddEvent("one", trace.WithAttributes(attribute.String("x", "1"), attribute.String("y", "2")))
	limited.AddEvent("two")
	limited.End()

	spans := rec.Ended()
	if len(spans) != 6 {
		t.Fatalf("recorded %d spans, want 6", len(spans))
	}
	return spans
}

// normalize orders a request's resource spans by resource and its scope
// spans by scope: the SDK's exporter groups through maps, in no set order.
func normalize(req *coltracepb.ExportTraceServiceRequest) {
	key := func(m proto.Message) string { return prototext.Format(m) }
	slices.SortFunc(req.ResourceSpans, func(a, b *tracepb.ResourceSpans) int {
		return strings.Compare(key(a.Resource), key(b.Resource))
	})
	for _, rs := range req.ResourceSpans {
		slices.SortFunc(rs.ScopeSpans, func(a, b *tracepb.ScopeSpans) int {
			return strings.Compare(key(a.Scope), key(b.Scope))
		})
	}
}

// TestOTLPEncoding checks that deadletter's exporter sends what the
// OpenTelemetry SDK's OTLP/HTTP exporter sends for the same spans: both
// requests, decoded with the generated OTLP types, are equal, but for the
// links' trace state, which the OTLP Link message has and the SDK's
// exporter leaves out.
func TestOTLPEncoding(t *testing.T) {
	spans := sampleSpans(t)
	ctx := context.Background()

	theirs := newCollector(t)
	ref, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(theirs.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	_ = ref.Shutdown(ctx)

	ours := newCollector(t)
	exp, ok := newOTLPExporter(Config{Endpoint: ours.URL}, ours.Client())
	if !ok {
		t.Fatal("exporter refused the collector's URL")
	}
	if err := exp.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	// A second export reuses the encoder's buffers and cached resources.
	if err := exp.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}

	want := theirs.request(t, 0)
	for i := range 2 {
		got := ours.request(t, i)
		normalize(want)
		normalize(got)
		links := 0
		for _, rs := range got.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					for _, l := range sp.Links {
						if l.TraceState != "vendor=abc,other=x" {
							t.Errorf("link of %q has trace state %q, want the linked context's", sp.Name, l.TraceState)
						}
						l.TraceState = "" // the SDK's exporter leaves it out
						links++
					}
				}
			}
		}
		if links != 2 {
			t.Errorf("%d links, want 2", links)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("export %d differs from the SDK exporter's:\n got: %s\nwant: %s", i, prototext.Format(got), prototext.Format(want))
		}
	}
	if n := len(want.ResourceSpans); n != 2 {
		t.Errorf("%d resource spans, want 2", n)
	}
	if h := ours.headers[0].Get("Content-Type"); h != "application/x-protobuf" {
		t.Errorf("Content-Type %q", h)
	}
}

// TestOTLPExporterRetries checks the OTLP/HTTP retry rules: a retryable
// refusal (503 with Retry-After) is sent again until accepted; a
// non-retryable one (400) is an error at once.
func TestOTLPExporterRetries(t *testing.T) {
	spans := sampleSpans(t)
	tests := []struct {
		name      string
		answers   []int
		wantErr   bool
		wantCalls int32
	}{
		{"accepted", nil, false, 1},
		{"unavailable, then accepted", []int{http.StatusServiceUnavailable}, false, 2},
		{"bad request", []int{http.StatusBadRequest}, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCollector(t, tc.answers...)
			exp, _ := newOTLPExporter(Config{Endpoint: c.URL}, c.Client())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := exp.ExportSpans(ctx, spans)
			if (err != nil) != tc.wantErr {
				t.Fatalf("export error %v, want error %v", err, tc.wantErr)
			}
			if n := c.calls.Load(); n != tc.wantCalls {
				t.Errorf("%d requests, want %d", n, tc.wantCalls)
			}
		})
	}
}

// TestOTLPExporterEnvironment checks the OTEL_EXPORTER_OTLP_* settings the
// exporter reads: the traces endpoint, headers (URL-encoded values) and
// gzip compression; and that Shutdown stops it.
func TestOTLPExporterEnvironment(t *testing.T) {
	c := newCollector(t)
	t.Setenv(EnvTracesEndpoint, c.URL+"/custom/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "ignored=1")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "Authorization=Bearer%20abc, X-Tenant = pharmacy ,malformed")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
	exp, ok := newOTLPExporter(Config{}, c.Client())
	if !ok {
		t.Fatal("exporter refused the collector's URL")
	}
	if exp.url != c.URL+"/custom/traces" {
		t.Errorf("url %q", exp.url)
	}
	ctx := context.Background()
	if err := exp.ExportSpans(ctx, sampleSpans(t)); err != nil {
		t.Fatal(err)
	}
	h := c.headers[0]
	if h.Get("Authorization") != "Bearer abc" || h.Get("X-Tenant") != "pharmacy" || h.Get("Ignored") != "" {
		t.Errorf("headers %v", h)
	}
	if h.Get("Content-Encoding") != "gzip" {
		t.Errorf("Content-Encoding %q, want gzip", h.Get("Content-Encoding"))
	}
	if n := len(c.request(t, 0).ResourceSpans); n != 2 {
		t.Errorf("%d resource spans, want 2", n)
	}
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(ctx, sampleSpans(t)); err == nil {
		t.Error("an export after Shutdown succeeded")
	}

	// No collector listening: the batch fails at once, not after retries.
	c.Close()
	exp, _ = newOTLPExporter(Config{Endpoint: c.URL}, &http.Client{})
	start := time.Now()
	if err := exp.ExportSpans(ctx, sampleSpans(t)); err == nil {
		t.Error("an export to a closed port succeeded")
	} else if d := time.Since(start); d >= retryFirst {
		t.Errorf("an export to a closed port took %s: it was retried", d)
	}

	for _, bad := range []string{"unix:///tmp/otlp.sock", "127.0.0.1:4318"} {
		t.Setenv(EnvTracesEndpoint, bad)
		if _, ok := newOTLPExporter(Config{}, c.Client()); ok {
			t.Errorf("exporter took %q", bad)
		}
	}
}

package telemetry

import (
	"context"
	"errors"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"

	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// recorder returns a Tracer whose ended spans the recorder keeps.
func recorder(tb testing.TB) (Tracer, *tracetest.SpanRecorder) {
	tb.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return NewTracer(tp, nil), rec
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestStartPublish(t *testing.T) {
	tr, rec := recorder(t)
	ctx, parent := tr.Tracer().Start(context.Background(), "parent")
	msg := &nats.Msg{Subject: "events.pharmacy.dispense", Data: []byte(`{"x":1}`)}
	_, span := tr.StartPublish(ctx, msg, MessageID("m-1"))
	span.End()
	parent.End()

	got := rec.Ended()[0]
	if got.Name() != "send events.pharmacy.dispense" || got.SpanKind() != trace.SpanKindProducer {
		t.Errorf("span %q kind %v", got.Name(), got.SpanKind())
	}
	if got.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("parent %v, want %v", got.Parent().SpanID(), parent.SpanContext().SpanID())
	}
	a := attrs(got)
	for k, want := range map[attribute.Key]string{
		"messaging.system": "nats", "messaging.destination.name": "events.pharmacy.dispense",
		"messaging.operation.type": "send", "messaging.operation.name": "send", "messaging.message.id": "m-1",
	} {
		if a[k].AsString() != want {
			t.Errorf("%s = %q, want %q", k, a[k].AsString(), want)
		}
	}
	if a["messaging.message.body.size"].AsInt64() != 7 {
		t.Errorf("body size %v", a["messaging.message.body.size"])
	}
	if sc := tr.SpanContext(msg.Header); sc.SpanID() != got.SpanContext().SpanID() || sc.TraceID() != got.SpanContext().TraceID() {
		t.Errorf("injected %v, want the publish span %v", sc, got.SpanContext())
	}
}

func TestStartConsume(t *testing.T) {
	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	js := srv.JetStream(t)
	ctx := context.Background()
	tr, rec := recorder(t)

	pctx, pub := tr.Tracer().Start(ctx, "publisher")
	msg := nats.NewMsg(subjects.Event("pharmacy", "dispense"))
	msg.Data = []byte(`{}`)
	msg.Header.Set(envelope.DLQID, "pharmacy_0123")
	msg.Header.Set(envelope.RedriveCount, "2")
	tr.Inject(pctx, msg.Header)
	pub.End()
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, subjects.EventsStream, jetstream.ConsumerConfig{Durable: "t", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cons.Next()
	if err != nil {
		t.Fatal(err)
	}
	other := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})

	tests := []struct {
		name       string
		opts       []Option
		wantName   string
		wantParent trace.SpanContext
		wantLinks  int
	}{
		{"parent from the headers", []Option{Operation("validate")}, "validate events.pharmacy.dispense", pub.SpanContext(), 0},
		{"parent given, message linked", []Option{Operation("quarantine"), Parent(other)}, "quarantine events.pharmacy.dispense", other, 1},
		{"invalid parent ignored", []Option{Parent(trace.SpanContext{})}, "process events.pharmacy.dispense", pub.SpanContext(), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := len(rec.Ended())
			_, span := tr.StartConsume(ctx, m, tc.opts...)
			span.End()
			got := rec.Ended()[n]
			if got.Name() != tc.wantName || got.SpanKind() != trace.SpanKindConsumer {
				t.Errorf("span %q kind %v", got.Name(), got.SpanKind())
			}
			if got.Parent().SpanID() != tc.wantParent.SpanID() || got.SpanContext().TraceID() != tc.wantParent.TraceID() {
				t.Errorf("parent %v in trace %v, want %v", got.Parent().SpanID(), got.SpanContext().TraceID(), tc.wantParent)
			}
			if len(got.Links()) != tc.wantLinks {
				t.Errorf("%d links, want %d", len(got.Links()), tc.wantLinks)
			}
			if tc.wantLinks == 1 && got.Links()[0].SpanContext.SpanID() != pub.SpanContext().SpanID() {
				t.Errorf("link %v, want the message's context", got.Links()[0].SpanContext)
			}
			a := attrs(got)
			if a[StreamKey].AsString() != subjects.EventsStream || a[SequenceKey].AsInt64() != 1 || a[DeliveryCountKey].AsInt64() != 1 ||
				a["messaging.message.id"].AsString() != "EVENTS/1" || a["messaging.consumer.group.name"].AsString() != "t" ||
				a["messaging.operation.type"].AsString() != "process" {
				t.Errorf("jetstream attributes %v", a)
			}
			if a[DLQIDKey].AsString() != "pharmacy_0123" || a[RedriveCountKey].AsInt64() != 2 {
				t.Errorf("redrive attributes %v", a)
			}
		})
	}
}

func TestStartRedrive(t *testing.T) {
	tr, rec := recorder(t)
	dctx, drain := tr.Tracer().Start(context.Background(), "drain")
	msg := nats.NewMsg("events.pharmacy.dispense")
	_, span := tr.StartRedrive(dctx, msg, Redrive{DLQID: "pharmacy_1", Domain: "pharmacy", Count: 1,
		OriginalTraceID: testTraceID, OriginalSpanID: testSpanID})
	span.End()
	drain.End()
	got := rec.Ended()[0]
	if got.Parent().IsValid() || got.SpanContext().TraceID() == drain.SpanContext().TraceID() {
		t.Errorf("redrive is not a new root: parent %v", got.Parent())
	}
	if got.Name() != "redrive events.pharmacy.dispense" {
		t.Errorf("name %q", got.Name())
	}
	links := got.Links()
	if len(links) != 2 || links[0].SpanContext.TraceID().String() != testTraceID || links[1].SpanContext.SpanID() != drain.SpanContext().SpanID() {
		t.Fatalf("links %+v", links)
	}
	a := attrs(got)
	if a[OriginalTraceIDKey].AsString() != testTraceID || a[DLQIDKey].AsString() != "pharmacy_1" || a[RedriveCountKey].AsInt64() != 1 {
		t.Errorf("attributes %v", a)
	}
	if sc := tr.SpanContext(msg.Header); sc.TraceID() != got.SpanContext().TraceID() {
		t.Errorf("headers carry %v, want the new trace", sc.TraceID())
	}
}

func TestFail(t *testing.T) {
	tr, rec := recorder(t)
	_, span := tr.Start(context.Background(), "commit")
	Fail(span, dscsa.GTINCheckDigitFailed, "validation", StageKey.String("validate"))
	span.End()
	got := rec.Ended()[0]
	if got.Status().Code != otelcodes.Error || got.Status().Description != string(dscsa.GTINCheckDigitFailed) {
		t.Errorf("status %+v", got.Status())
	}
	a := attrs(got)
	if a[ErrorCodeKey].AsString() != string(dscsa.GTINCheckDigitFailed) || a[FailureClassKey].AsString() != "validation" {
		t.Errorf("attributes %v", a)
	}
	if ev := got.Events(); len(ev) != 1 || ev[0].Name != FailureEvent || len(ev[0].Attributes) != 3 {
		t.Errorf("events %+v", ev)
	}
}

func TestTraceURL(t *testing.T) {
	tests := []struct{ name, base, id, want string }{
		{"default base", "", testTraceID, "http://127.0.0.1:16686/trace/" + testTraceID},
		{"base with slash", "https://jaeger.example/trace/", "ab", "https://jaeger.example/trace/ab"},
		{"base without slash", "https://jaeger.example/trace", "ab", "https://jaeger.example/trace/ab"},
		{"no trace", "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := TraceURL(tc.base, tc.id); got != tc.want {
				t.Errorf("TraceURL(%q, %q) = %q, want %q", tc.base, tc.id, got, tc.want)
			}
		})
	}
}

// clearEnv unsets the variables Setup reads for the test.
func clearEnv(t *testing.T) {
	for _, k := range []string{EnvEndpoint, EnvTracesEndpoint, EnvProtocol, EnvTracesProtocol, EnvServiceName,
		EnvSDKDisabled, EnvTracesExporter, EnvSampler} {
		t.Setenv(k, "")
	}
}

func TestSetupOff(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		cfg  Config
	}{
		{"no endpoint", nil, Config{ServiceName: "x"}},
		{"sdk disabled", map[string]string{EnvEndpoint: "http://127.0.0.1:1", EnvSDKDisabled: "true"}, Config{}},
		{"exporter none", map[string]string{EnvTracesEndpoint: "http://127.0.0.1:1/v1/traces", EnvTracesExporter: "none"}, Config{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			tp, shutdown, err := Setup(context.Background(), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := tp.(noop.TracerProvider); !ok {
				t.Errorf("provider %T, want the no-op", tp)
			}
			if err := shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestSetupUnsupported(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
	}{
		{"grpc protocol", map[string]string{EnvProtocol: "grpc"}},
		{"traces protocol wins", map[string]string{EnvProtocol: "http/protobuf", EnvTracesProtocol: "http/json"}},
		{"zipkin exporter", map[string]string{EnvTracesExporter: "zipkin"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(EnvEndpoint, "http://127.0.0.1:4318")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if _, _, err := Setup(context.Background(), Config{}); !errors.Is(err, ErrUnsupported) {
				t.Errorf("err = %v, want ErrUnsupported", err)
			}
		})
	}
}

// TestSetupExports checks that spans reach the OTLP/HTTP endpoint, from the
// environment or the config, that Shutdown flushes the batch, and that
// nothing of the exporter is left running after it.
func TestSetupExports(t *testing.T) {
	tests := []struct {
		name string
		env  func(url string) map[string]string
		cfg  func(url string) Config
	}{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", func(u string) map[string]string { return map[string]string{EnvEndpoint: u} }, func(string) Config { return Config{} }},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", func(u string) map[string]string { return map[string]string{EnvTracesEndpoint: u + "/v1/traces"} }, func(string) Config { return Config{} }},
		{"Config.Endpoint", func(string) map[string]string { return nil }, func(u string) Config { return Config{Endpoint: u + "/"} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			var posts atomic.Int64
			collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/traces" && r.Method == http.MethodPost {
					posts.Add(1)
				}
				w.Header().Set("Content-Type", "application/x-protobuf")
				w.WriteHeader(http.StatusOK)
			}))
			defer collector.Close()
			for k, v := range tc.env(collector.URL) {
				t.Setenv(k, v)
			}
			leaks := goleak.IgnoreCurrent()
			tp, shutdown, err := Setup(context.Background(), tc.cfg(collector.URL))
			if err != nil {
				t.Fatal(err)
			}
			_, span := tp.Tracer("test").Start(context.Background(), "one")
			span.End()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if posts.Load() == 0 {
				t.Error("shutdown did not flush the span to the collector")
			}
			collector.CloseClientConnections()
			goleak.VerifyNone(t, leaks, goleak.IgnoreTopFunction("net/http.(*conn).serve"),
				goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
		})
	}
}

// TestConsumeSpanAttributesAtEnd: a consume span keeps the attributes set
// on it (through the span or the context) until End, then has them all
// with the messaging ones; status and events pass at once; what is set
// after End is dropped.
func TestConsumeSpanAttributesAtEnd(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := NewTracer(tp, nil)
	msg := &benchMsg{subject: "events.fsma.receiving", data: []byte("{}"), header: nats.Header{},
		meta: &jetstream.MsgMetadata{Stream: "EVENTS", Consumer: "validator", NumDelivered: 2,
			Sequence: jetstream.SequencePair{Stream: 7, Consumer: 9}}}
	ctx, span := tr.StartConsume(context.Background(), msg, Operation("validate"), Attributes(StageKey.String("validate")))
	span.SetAttributes(DomainKey.String("fsma"))
	trace.SpanFromContext(ctx).SetAttributes(OutcomeKey.String("committed"))
	Fail(span, "CODE", "validation")
	if got := len(rec.Started()); got != 1 || len(rec.Ended()) != 0 {
		t.Fatalf("started %d, ended %d", got, len(rec.Ended()))
	}
	span.End()
	span.SetAttributes(DLQIDKey.String("late"))
	span.End()
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended", len(ended))
	}
	a := map[attribute.Key]attribute.Value{}
	for _, kv := range ended[0].Attributes() {
		a[kv.Key] = kv.Value
	}
	for key, want := range map[attribute.Key]string{
		"messaging.operation.name": "validate", "messaging.message.id": "EVENTS/7", "messaging.consumer.group.name": "validator",
		StageKey: "validate", DomainKey: "fsma", OutcomeKey: "committed", ErrorCodeKey: "CODE",
	} {
		if got := a[key].String(); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	if _, ok := a[DLQIDKey]; ok {
		t.Error("an attribute set after End was recorded")
	}
	if ended[0].Status().Code != otelcodes.Error || len(ended[0].Events()) != 1 {
		t.Errorf("status %v, %d events", ended[0].Status(), len(ended[0].Events()))
	}
}

package telemetry

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

func TestEventTraceID(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	base := EventTraceID("EVENTS", 42, at)
	if !base.IsValid() {
		t.Fatal("invalid id")
	}
	tests := []struct {
		name   string
		stream string
		seq    uint64
		at     time.Time
		same   bool
	}{
		{"same event, same id", "EVENTS", 42, at, true},
		{"same instant in another zone", "EVENTS", 42, at.In(time.FixedZone("x", 3600)), true},
		{"another sequence", "EVENTS", 43, at, false},
		{"another stream", "REPLAYS", 42, at, false},
		{"same sequence of a stream made again", "EVENTS", 42, at.Add(time.Nanosecond), false},
		{"original unreadable (zero time)", "EVENTS", 42, time.Time{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := EventTraceID(tc.stream, tc.seq, tc.at); (got == base) != tc.same {
				t.Errorf("id %s vs %s: same = %v, want %v", got, base, got == base, tc.same)
			}
		})
	}
}

// TestStartConsumeUntraced: deliveries of a message without trace context
// are roots of one derived trace, which EventRoot names from the stream
// position alone (the quarantiner's advisory path); a message with context
// keeps its own; without deadletter's IDGenerator each is a trace of its
// own (nothing breaks).
func TestStartConsumeUntraced(t *testing.T) {
	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	js := srv.JetStream(t)
	ctx := context.Background()
	ack, err := js.Publish(ctx, subjects.Event("pharmacy", "dispense"), []byte(`{}`))
	if err != nil {
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
	meta, err := m.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := js.Stream(ctx, subjects.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := raw.GetMsg(ctx, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	want := EventTraceID(subjects.EventsStream, ack.Sequence, meta.Timestamp)

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(IDGenerator()))
	t.Cleanup(func() { _ = tp.Shutdown(ctx) })
	tr := NewTracer(tp, nil)
	plain, _ := recorder(t)

	tests := []struct {
		name  string
		tr    Tracer
		opts  []Option
		check func(trace.SpanContext) bool
	}{
		{"delivery", tr, nil, func(sc trace.SpanContext) bool { return sc.TraceID() == want }},
		{"the same message again", tr, nil, func(sc trace.SpanContext) bool { return sc.TraceID() == want }},
		{"advisory path: named by the stored original", tr,
			[]Option{EventRoot(subjects.EventsStream, ack.Sequence, stored.Time)},
			func(sc trace.SpanContext) bool { return sc.TraceID() == want }},
		{"a parent wins", tr, []Option{Parent(trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{7}, TraceFlags: trace.FlagsSampled}))},
			func(sc trace.SpanContext) bool { return sc.TraceID() == trace.TraceID{7} }},
		{"provider without the generator", plain, nil, func(sc trace.SpanContext) bool { return sc.IsValid() && sc.TraceID() != want }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cctx, span := tc.tr.StartConsume(ctx, m, tc.opts...)
			span.End()
			if sc := span.SpanContext(); !tc.check(sc) {
				t.Errorf("trace %s (derived %s)", sc.TraceID(), want)
			}
			// A new root under the consume span's context is random: the
			// derivation does not leak to later steps.
			_, child := tc.tr.Tracer().Start(cctx, "later", trace.WithNewRoot())
			child.End()
			if child.SpanContext().TraceID() == want {
				t.Error("a new root under the span took the derived id")
			}
		})
	}

	// The derived spans are roots, with no parent to point at.
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() == want && s.Parent().IsValid() {
			t.Errorf("span %q has parent %v", s.Name(), s.Parent())
		}
	}
}

func TestStartLifecycle(t *testing.T) {
	tr, rec := recorder(t)
	tests := []struct {
		name      string
		r         Redrive
		wantLinks int
	}{
		{"original traced", Redrive{DLQID: "pharmacy_1", Domain: "pharmacy", Count: 1, OriginalTraceID: testTraceID, OriginalSpanID: testSpanID}, 1},
		{"original without trace", Redrive{DLQID: "pharmacy_2", Domain: "pharmacy"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := len(rec.Ended())
			_, span := tr.StartLifecycle(context.Background(), "correct", tc.r)
			span.End()
			got := rec.Ended()[n]
			if got.Name() != "correct" || got.Parent().IsValid() || got.SpanKind() != trace.SpanKindInternal {
				t.Errorf("span %q kind %v parent %v: want an internal root", got.Name(), got.SpanKind(), got.Parent())
			}
			if len(got.Links()) != tc.wantLinks || (tc.wantLinks == 1 && got.Links()[0].SpanContext.TraceID().String() != testTraceID) {
				t.Errorf("links %+v", got.Links())
			}
			a := attrs(got)
			if a[OriginalTraceIDKey].AsString() != tc.r.OriginalTraceID || a[DLQIDKey].AsString() != tc.r.DLQID || a[RedriveCountKey].AsInt64() != int64(tc.r.Count) {
				t.Errorf("attributes %v", a)
			}
		})
	}
}

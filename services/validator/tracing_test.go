package validator

import (
	"context"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// TestTracePropagation checks, without a collector, the context each
// message the validator writes carries: the failure report's is the
// validator's publish span (so the quarantiner joins the event's trace) while
// the original's headers are kept verbatim in the report; a LEDGER write
// carries none, its sequence being on the validate span (no downstream: no
// commit span) as deadletter.ledger_seq; and the spans sit in the
// publisher's trace when it had one.
func TestTracePropagation(t *testing.T) {
	const upstreamTrace, upstreamSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	upstream := "00-" + upstreamTrace + "-" + upstreamSpan + "-01"
	tests := []struct {
		name        string
		dir, file   string
		traceparent string
		stream      string
		spanName    string // the span whose context the written message carries ("": the validate span)
		noContext   bool   // the written message carries no trace context
	}{
		{"failure report, traced publisher", "invalid", "INVALID_DEA_NUMBER--missing-registrant.json", upstream, subjects.FailuresStream, "send dlq.intake.pharmacy", false},
		{"failure report, untraced publisher", "invalid", "INVALID_DEA_NUMBER--missing-registrant.json", "", subjects.FailuresStream, "send dlq.intake.pharmacy", false},
		// Without a downstream the validate span stands for the commit.
		{"ledger write, traced publisher", "valid", "dispense-schedule-ii.json", upstream, subjects.LedgerStream, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t)
			srv.Provision(t, streams.DefaultOptions())
			js := srv.JetStream(t)
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			cfg := testConfig()
			cfg.TracerProvider = tp
			v := startValidator(t, srv, cfg, nil)

			subject, data := example(t, "pharmacy", tc.dir, tc.file)
			msg := nats.NewMsg(subject)
			msg.Data = data
			if tc.traceparent != "" {
				msg.Header.Set("traceparent", tc.traceparent)
			}
			if _, err := js.PublishMsg(context.Background(), msg); err != nil {
				t.Fatal(err)
			}
			waitMsgs(t, js, tc.stream, 1)
			v.stop()

			st, err := js.Stream(context.Background(), tc.stream)
			if err != nil {
				t.Fatal(err)
			}
			out, err := st.GetMsg(context.Background(), 1)
			if err != nil {
				t.Fatal(err)
			}
			carried := telemetry.NewTracer(nil, nil).SpanContext(out.Header)
			var written, validate sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				switch s.Name() {
				case tc.spanName:
					written = s
				case "validate " + subject:
					validate = s
				}
			}
			if tc.spanName == "" {
				written = validate
			}
			if written == nil || validate == nil {
				t.Fatalf("spans %q and validate not both recorded", tc.spanName)
			}
			switch {
			case tc.noContext:
				if carried.IsValid() || len(out.Header.Values("traceparent")) > 0 {
					t.Errorf("%s message carries trace context %v, want none", tc.stream, out.Header)
				}
				if got := attrOf(written, telemetry.LedgerSequenceKey); got != strconv.FormatUint(out.Sequence, 10) {
					t.Errorf("validate span has %s %q, want the LEDGER sequence %d", telemetry.LedgerSequenceKey, got, out.Sequence)
				}
			case carried.SpanID() != written.SpanContext().SpanID() || carried.TraceID() != written.SpanContext().TraceID():
				t.Errorf("%s message carries %v, want the %q span %v", tc.stream, carried, tc.spanName, written.SpanContext())
			}
			if tc.spanName != "" && written.Parent().SpanID() != validate.SpanContext().SpanID() {
				t.Errorf("%q is not a child of the validate span", tc.spanName)
			}
			wantParent := trace.SpanID{}
			if tc.traceparent != "" {
				wantParent, _ = trace.SpanIDFromHex(upstreamSpan)
				if got := validate.SpanContext().TraceID().String(); got != upstreamTrace {
					t.Errorf("validate span in trace %s, want the publisher's %s", got, upstreamTrace)
				}
			}
			if validate.Parent().SpanID() != wantParent {
				t.Errorf("validate span parent %v, want %v", validate.Parent().SpanID(), wantParent)
			}
			if tc.stream == subjects.FailuresStream {
				f := failures(t, js)[0]
				if got := f.Headers["traceparent"]; tc.traceparent != "" && (len(got) != 1 || got[0] != tc.traceparent) {
					t.Errorf("failure report keeps original traceparent %q, want %q", got, tc.traceparent)
				}
				if _, ok := f.Headers["traceparent"]; tc.traceparent == "" && ok {
					t.Errorf("the original's headers gained a traceparent: %v", f.Headers)
				}
			}
		})
	}
}

// attrOf returns the value of span's attribute key as text ("" if absent).
func attrOf(span sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range span.Attributes() {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

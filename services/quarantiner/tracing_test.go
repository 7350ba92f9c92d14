package quarantiner

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestTraceContext checks, without a collector, the trace each record names
// and the quarantine span's parent: the original's trace when the original
// carried one, else the trace the record is written in (continued from the
// failure report's own headers); and a lifecycle record names the trace of
// the request that appended it.
func TestTraceContext(t *testing.T) {
	const origTrace, origSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	const reportTrace, reportSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	e := newEnv(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg := testConfig()
	cfg.TracerProvider = tp
	q := e.start(t, cfg, nil)
	data := []byte(`{"transaction_id": "TX-1",`)

	tests := []struct {
		name           string
		originalHeader bool
		wantTrace      string
		wantSpan       string // "" : the quarantine span's own id
	}{
		{"original traced", true, origTrace, origSpan},
		{"original untraced", false, reportTrace, ""},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			subject := "events.pharmacy.dispense"
			seq := e.publishEvent(t, subject, data, nil)
			f := structural(subject, seq, data, codes.MalformedJSON)
			if !tc.originalHeader {
				f.Headers = nil
			}
			b, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			m := nats.NewMsg(subjects.Failure(f.Domain))
			m.Data = b
			m.Header.Set("traceparent", "00-"+reportTrace+"-"+reportSpan+"-01")
			published := time.Now()
			if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			e.waitRecords(t, i+1)
			var r record.Record
			for _, x := range e.allRecords(t) {
				if x.SourceSeq == seq {
					r = x
				}
			}
			var span sdktrace.ReadOnlySpan
			natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
				for _, s := range rec.Ended() {
					if s.Name() == "quarantine "+subjects.Failure(f.Domain) && s.SpanContext().TraceID().String() == reportTrace &&
						s.StartTime().After(published) {
						span = s
						return nil
					}
				}
				return errors.New("quarantine span not ended yet")
			})
			if got := span.Parent().SpanID().String(); got != reportSpan {
				t.Errorf("quarantine span parent %s, want the report's %s", got, reportSpan)
			}
			want := tc.wantSpan
			if want == "" {
				want = span.SpanContext().SpanID().String()
			}
			if r.TraceID != tc.wantTrace || r.SpanID != want {
				t.Errorf("record trace %s span %s, want %s %s", r.TraceID, r.SpanID, tc.wantTrace, want)
			}
		})
	}

	t.Run("lifecycle record", func(t *testing.T) {
		var first record.Record
		for _, x := range e.allRecords(t) {
			if x.Index == 0 {
				first = x
			}
		}
		const redriveTrace, redriveSpan = "11111111111111111111111111111111", "2222222222222222"
		req := api.AppendRequest{DLQID: first.DLQID, Domain: first.Domain, Kind: record.KindRedriveRequested, ExpectedIndex: new(int), DrainID: "d1"}
		*req.ExpectedIndex = 1
		b, _ := json.Marshal(req)
		m := nats.NewMsg(api.QuarantinerAppend)
		m.Data = b
		m.Header.Set("traceparent", "00-"+redriveTrace+"-"+redriveSpan+"-01")
		if _, err := q.nc.RequestMsg(m, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		var got record.Record
		for _, x := range e.allRecords(t) {
			if x.DLQID == first.DLQID && x.Index == 1 {
				got = x
			}
		}
		if got.TraceID != redriveTrace {
			t.Errorf("lifecycle record trace %q, want the request's %s", got.TraceID, redriveTrace)
		}
		var server sdktrace.ReadOnlySpan
		natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
			for _, s := range rec.Ended() {
				if s.Name() == "append "+api.QuarantinerAppend {
					server = s
					return nil
				}
			}
			return errors.New("append span not ended yet")
		})
		if server.Parent().SpanID().String() != redriveSpan || got.SpanID != server.SpanContext().SpanID().String() {
			t.Errorf("append span %v, record span %s", server, got.SpanID)
		}
	})
}

package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
	"github.com/deadletter/deadletter/tests/internal/jaeger"
)

// Service names the test providers export under.
const (
	publisherService   = "test-publisher"
	validatorService   = "deadletter-validator"
	quarantinerService = "deadletter-quarantiner"
)

// provider sets up a tracer provider as a service would (telemetry.Setup),
// exporting synchronously to j at 100 % sampling, shut down at cleanup.
func provider(tb testing.TB, j *jaeger.Jaeger, service string) trace.TracerProvider {
	tb.Helper()
	tp, shutdown, err := telemetry.Setup(context.Background(), telemetry.Config{
		ServiceName: service, Endpoint: j.OTLPHTTP, Synchronous: true, Sampler: sdktrace.AlwaysSample(),
	})
	if err != nil {
		tb.Fatalf("telemetry setup: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			tb.Errorf("telemetry shutdown: %v", err)
		}
	})
	return tp
}

// running is a stack started by startStack.
type running struct {
	*stack.Stack
	logs *natstest.Buffer
	// Stop stops the stack and waits for it (also done at cleanup).
	Stop func()
}

// startStack runs the all-in-one stack (embedded server on a free port, temp
// store, no metrics listener) with cfg adjusted by edit, and stops it at
// cleanup. Its JSON log is kept for inspection.
func startStack(tb testing.TB, edit func(*stack.Config)) *running {
	tb.Helper()
	cfg := stack.DefaultConfig()
	cfg.DataDir, cfg.AnchorDir = tb.TempDir(), tb.TempDir()
	cfg.Port = -1
	cfg.PasswordCost = access.MinBcryptCost // the server checks passwords under the race detector
	cfg.SyncAlways = false
	cfg.MetricsAddr = ""
	cfg.Quarantiner.Workers = 4
	cfg.Validator.Workers = 8
	if edit != nil {
		edit(&cfg)
	}
	logs := &natstest.Buffer{}
	s, err := stack.New(cfg, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		tb.Fatalf("stack: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("stack stopped with %v", err)
			}
		})
	}
	tb.Cleanup(stop)
	select {
	case <-s.Ready():
	case err := <-done:
		done <- err
		tb.Fatalf("stack exited at start-up: %v", err)
	case <-time.After(30 * time.Second):
		tb.Fatal("stack not ready after 30 s")
	}
	return &running{Stack: s, logs: logs, Stop: stop}
}

// published is an event a test published, with its publish span.
type published struct {
	subject string
	seq     uint64
	traceID string
	spanID  string
}

// publish publishes data to subject inside a producer span of tp (the
// publisher's own tracing), as an instrumented publisher would.
func publish(tb testing.TB, js jetstream.JetStream, tp trace.TracerProvider, subject string, data []byte) published {
	tb.Helper()
	tr := telemetry.NewTracer(tp, nil)
	msg := nats.NewMsg(subject)
	msg.Data = data
	ctx, span := tr.StartPublish(context.Background(), msg)
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		tb.Fatalf("publish: %v", err)
	}
	telemetry.RecordAck(span, ack)
	span.End()
	sc := span.SpanContext()
	return published{subject: subject, seq: ack.Sequence, traceID: sc.TraceID().String(), spanID: sc.SpanID().String()}
}

// example returns a schemas/testdata file with each old → new replacement
// applied (to plant marker strings), checked to still give wantCode ("" for
// a valid event).
func example(tb testing.TB, path, subject string, wantCode string, replace ...string) []byte {
	tb.Helper()
	b, err := fs.ReadFile(schemas.FS, "testdata/"+path)
	if err != nil {
		tb.Fatal(err)
	}
	s := string(b)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(s, replace[i]) {
			tb.Fatalf("%s has no %q", path, replace[i])
		}
		s = strings.ReplaceAll(s, replace[i], replace[i+1])
	}
	g, err := gate.New(0)
	if err != nil {
		tb.Fatal(err)
	}
	_, err = g.Check(subject, []byte(s))
	if got := codeOf(err); got != wantCode {
		tb.Fatalf("%s gives %q, want %q", path, got, wantCode)
	}
	return []byte(s)
}

func codeOf(err error) string {
	if err == nil {
		return ""
	}
	return string(codes.Of(err))
}

// quarantined waits for and returns the first record of the chain whose
// source is EVENTS sequence seq.
func quarantined(tb testing.TB, js jetstream.JetStream, seq uint64) record.Record {
	tb.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, subjects.QuarantineStream)
	if err != nil {
		tb.Fatal(err)
	}
	var found record.Record
	natstest.CheckFor(tb, 30*time.Second, 50*time.Millisecond, func() error {
		for n := uint64(1); ; n++ {
			m, err := st.GetMsg(ctx, n)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return fmt.Errorf("no record of EVENTS/%d yet", seq)
			}
			if err != nil {
				return err
			}
			var r record.Record
			if err := json.Unmarshal(m.Data, &r); err != nil {
				return err
			}
			if r.SourceStream == subjects.EventsStream && r.SourceSeq == seq && r.Index == 0 {
				found = r
				return nil
			}
		}
	})
	return found
}

// waitTrace polls Jaeger until trace id satisfies ok (which explains what is
// missing), and returns it.
func waitTrace(tb testing.TB, j *jaeger.Jaeger, id string, ok func(jaeger.Trace) error) jaeger.Trace {
	tb.Helper()
	var tr jaeger.Trace
	natstest.CheckFor(tb, 30*time.Second, 100*time.Millisecond, func() error {
		var err error
		if tr, err = j.Trace(id); err != nil {
			return err
		}
		return ok(tr)
	})
	return tr
}

// one returns the only span of service named with prefix.
func one(tb testing.TB, tr jaeger.Trace, service, prefix string) jaeger.Span {
	tb.Helper()
	s := tr.Find(service, prefix)
	if len(s) != 1 {
		tb.Fatalf("trace %s: %d spans %q of %s, want 1\n%s", tr.TraceID, len(s), prefix, service, describe(tr))
	}
	return s[0]
}

// need returns an error unless the trace has at least n spans of service
// named with prefix.
func need(tr jaeger.Trace, service, prefix string, n int) error {
	if got := len(tr.Find(service, prefix)); got < n {
		return fmt.Errorf("%d spans %q of %s, want %d", got, prefix, service, n)
	}
	return nil
}

// describe lists a trace's spans, for failure messages.
func describe(tr jaeger.Trace) string {
	var b strings.Builder
	for _, s := range tr.Spans {
		fmt.Fprintf(&b, "  %s %s %q parent=%s status=%s\n", tr.Service(s), s.SpanID, s.OperationName, s.Parent(), s.Tag("otel.status_code"))
	}
	return b.String()
}

// checkParent fails unless child's parent is parent.
func checkParent(tb testing.TB, child, parent jaeger.Span) {
	tb.Helper()
	if child.Parent() != parent.SpanID || child.TraceID != parent.TraceID {
		tb.Errorf("%q: parent %s, want %q (%s)", child.OperationName, child.Parent(), parent.OperationName, parent.SpanID)
	}
}

// checkTags fails unless span has every tag of want.
func checkTags(tb testing.TB, span jaeger.Span, want map[string]string) {
	tb.Helper()
	for k, v := range want {
		if got := span.Tag(k); got != v {
			tb.Errorf("%q: tag %s = %q, want %q", span.OperationName, k, got, v)
		}
	}
}

// checkNoMarkers fails if any span Jaeger holds, of any service, or the
// stack's log, contains one of the markers planted in payloads.
func checkNoMarkers(tb testing.TB, j *jaeger.Jaeger, logs string, markers ...string) {
	tb.Helper()
	services, err := j.Services()
	if err != nil {
		tb.Fatal(err)
	}
	spans := 0
	for _, svc := range services {
		traces, err := j.Traces(svc)
		if err != nil {
			tb.Fatal(err)
		}
		for _, tr := range traces {
			spans += len(tr.Spans)
			b, err := json.Marshal(tr)
			if err != nil {
				tb.Fatal(err)
			}
			for _, m := range markers {
				if bytes.Contains(b, []byte(m)) {
					tb.Errorf("trace %s (service %s) contains payload marker %q", tr.TraceID, svc, m)
				}
			}
		}
	}
	if spans == 0 {
		tb.Error("no span exported: the marker check checked nothing")
	}
	for _, m := range markers {
		if strings.Contains(logs, m) {
			tb.Errorf("the log contains payload marker %q", m)
		}
	}
}

// ledgerSeqOf returns the LEDGER sequence of the commit of EVENTS sequence
// seq (its Deadletter-Source-Seq header).
func ledgerSeqOf(tb testing.TB, js jetstream.JetStream, seq uint64) uint64 {
	tb.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, subjects.LedgerStream)
	if err != nil {
		tb.Fatal(err)
	}
	for n := uint64(1); ; n++ {
		m, err := st.GetMsg(ctx, n)
		if err != nil {
			tb.Fatalf("no LEDGER commit of EVENTS/%d: %v", seq, err)
		}
		if m.Header.Get(envelope.SourceSeq) == strconv.FormatUint(seq, 10) {
			return m.Sequence
		}
	}
}

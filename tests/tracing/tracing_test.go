package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
	"github.com/deadletter/deadletter/tests/internal/jaeger"
)

// Marker strings planted in test payloads: no span may ever contain one.
const (
	markerTX     = "MRK7f3a1cTX"
	markerActor  = "MRK7f3a1cACTOR"
	markerPO     = "MRK7f3a1cPO"
	markerRetry  = "MRK7f3a1cRETRY"
	markerRetry2 = "MRK7f3a1cRPH"
)

// connect returns a JetStream context of user on the stack: the publisher
// sends events through its account's import, the break-glass admin reads
// the stores to check them.
func connect(tb testing.TB, s *running, user string) jetstream.JetStream {
	tb.Helper()
	nc, err := s.ConnectAs(user)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return js
}

// TestStructuralFailureIsOneTrace publishes a valid event and a structural
// failure through the stack: the failure's publish, validate (status Error,
// the code), failure report and quarantine spans form ONE trace across three
// services with the right parents, and the record names that trace; the
// valid event's trace holds its commit and no quarantine.
func TestStructuralFailureIsOneTrace(t *testing.T) {
	natstest.Long(t, "Jaeger")
	j := jaeger.Start(t)
	pub := provider(t, j, publisherService)
	s := startStack(t, func(c *stack.Config) {
		c.Validator.TracerProvider = provider(t, j, validatorService)
		c.Quarantiner.TracerProvider = provider(t, j, quarantinerService)
	})
	js, pubjs := connect(t, s, access.Admin), connect(t, s, string(access.RolePublisher))

	valid := example(t, "pharmacy/valid/dispense-schedule-ii.json", "events.pharmacy.dispense", "",
		"INV-2025-0181", markerTX, "RPH-0412", markerActor)
	bad := example(t, "dscsa/invalid/GTIN_CHECK_DIGIT_FAILED--digital-link-bad-check.json", "events.dscsa.shipping",
		string(dscsa.GTINCheckDigitFailed), "PO-778120", markerPO)
	ok := publish(t, pubjs, pub, "events.pharmacy.dispense", valid)
	failed := publish(t, pubjs, pub, "events.dscsa.shipping", bad)

	rec := quarantined(t, js, failed.seq)
	if rec.ErrorCode != dscsa.GTINCheckDigitFailed || rec.TraceID != failed.traceID || rec.SpanID != failed.spanID {
		t.Errorf("record code %s trace %s span %s, want %s %s %s", rec.ErrorCode, rec.TraceID, rec.SpanID,
			dscsa.GTINCheckDigitFailed, failed.traceID, failed.spanID)
	}

	t.Run("failed event", func(t *testing.T) {
		tr := waitTrace(t, j, failed.traceID, func(tr jaeger.Trace) error {
			for _, n := range []struct{ svc, prefix string }{
				{publisherService, "send events.dscsa.shipping"}, {validatorService, "validate "},
				{validatorService, "send dlq.intake.dscsa"}, {quarantinerService, "quarantine dlq.intake.dscsa"},
				{quarantinerService, "send quarantine."},
			} {
				if err := need(tr, n.svc, n.prefix, 1); err != nil {
					return err
				}
			}
			return nil
		})
		p := one(t, tr, publisherService, "send events.dscsa.shipping")
		if p.Parent() != "" {
			t.Errorf("publish span has parent %s", p.Parent())
		}
		v := one(t, tr, validatorService, "validate events.dscsa.shipping")
		checkParent(t, v, p)
		checkTags(t, v, map[string]string{
			"span.kind": "consumer", "otel.status_code": "ERROR", "otel.status_description": string(dscsa.GTINCheckDigitFailed),
			"deadletter.error_code": string(dscsa.GTINCheckDigitFailed), "deadletter.failure_class": string(record.ClassValidation),
			"deadletter.domain": "dscsa", "deadletter.dlq_id": rec.DLQID,
			"messaging.system": "nats", "messaging.operation.type": "process", "messaging.operation.name": "validate",
			"messaging.destination.name": subjects.Published(string(access.RolePublisher), "dscsa", "shipping"), "messaging.consumer.group.name": "validator",
			"messaging.nats.jetstream.stream": "EVENTS", "messaging.nats.jetstream.sequence": strconv.FormatUint(failed.seq, 10),
			"messaging.nats.jetstream.delivery_count": "1", "messaging.message.id": "EVENTS/" + strconv.FormatUint(failed.seq, 10),
		})
		if !v.HasEvent(telemetry.FailureEvent) {
			t.Errorf("validate span has no %s event", telemetry.FailureEvent)
		}
		if n := len(tr.Find(validatorService, "commit")); n != 0 {
			t.Errorf("a structural failure has %d commit spans", n)
		}
		f := one(t, tr, validatorService, "send dlq.intake.dscsa")
		checkParent(t, f, v)
		checkTags(t, f, map[string]string{"span.kind": "producer", "messaging.operation.type": "send",
			"messaging.nats.jetstream.stream": "FAILURES"})
		q := one(t, tr, quarantinerService, "quarantine dlq.intake.dscsa")
		checkParent(t, q, f)
		checkTags(t, q, map[string]string{"span.kind": "consumer", "deadletter.dlq_id": rec.DLQID,
			"deadletter.failure_class": string(record.ClassValidation), "deadletter.error_code": string(dscsa.GTINCheckDigitFailed),
			"deadletter.outcome": string(record.KindQuarantined), "messaging.nats.jetstream.stream": "FAILURES"})
		w := one(t, tr, quarantinerService, "send quarantine.{domain}.{dlq_id}")
		checkParent(t, w, q)
		checkTags(t, w, map[string]string{"messaging.nats.jetstream.stream": "QUARANTINE", "deadletter.dlq_id": rec.DLQID,
			"messaging.destination.name": "quarantine.dscsa." + rec.DLQID})
	})

	// Without a downstream the commit is the LEDGER write alone: the
	// validate span stands for it (its LEDGER sequence, no child span).
	// With one, the commit is a span of its own (TestExhaustedEventIsOneTrace).
	t.Run("valid event", func(t *testing.T) {
		tr := waitTrace(t, j, ok.traceID, func(tr jaeger.Trace) error {
			return need(tr, validatorService, "validate events.pharmacy.dispense", 1)
		})
		p := one(t, tr, publisherService, "send events.pharmacy.dispense")
		v := one(t, tr, validatorService, "validate events.pharmacy.dispense")
		checkParent(t, v, p)
		ledgerSeq := ledgerSeqOf(t, js, ok.seq)
		checkTags(t, v, map[string]string{"deadletter.outcome": "committed", "otel.status_code": "", "deadletter.domain": "pharmacy",
			"deadletter.ledger_seq": strconv.FormatUint(ledgerSeq, 10)})
		if n := len(tr.Find(validatorService, "commit")); n != 0 {
			t.Errorf("a commit without downstream has %d commit spans", n)
		}
		if n := len(tr.Find(quarantinerService, "")); n != 0 {
			t.Errorf("a committed event's trace has %d quarantiner spans", n)
		}
	})

	t.Run("no payload value in spans or logs", func(t *testing.T) {
		checkNoMarkers(t, j, s.logs.String(), markerTX, markerActor, markerPO)
	})
}

// TestExhaustedEventIsOneTrace makes every commit fail transiently (the
// downstream answers 503) until MaxDeliver: the event's trace shows each
// delivery attempt with its commit and downstream call, and the quarantine
// written from the max-deliveries advisory, continuing the original's trace.
func TestExhaustedEventIsOneTrace(t *testing.T) {
	natstest.Long(t, "Jaeger")
	const maxDeliver = 3
	j := jaeger.Start(t)
	pub := provider(t, j, publisherService)
	var (
		mu           sync.Mutex
		traceparents []string
	)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparents = append(traceparents, r.Header.Get("Traceparent"))
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	s := startStack(t, func(c *stack.Config) {
		c.Validator.TracerProvider = provider(t, j, validatorService)
		c.Quarantiner.TracerProvider = provider(t, j, quarantinerService)
		c.Validator.DownstreamURL = down.URL
		c.Validator.DownstreamTimeout = 2 * time.Second
		c.Validator.ClaimLease = 5 * time.Second
		c.Validator.MaxDeliver = maxDeliver
		c.Validator.BackoffBase = 20 * time.Millisecond
		c.Validator.BackoffMax = 50 * time.Millisecond
	})
	js, pubjs := connect(t, s, access.Admin), connect(t, s, string(access.RolePublisher))
	data := example(t, "pharmacy/valid/dispense-schedule-ii.json", "events.pharmacy.dispense", "",
		"INV-2025-0181", markerRetry, "RPH-0412", markerRetry2)
	ev := publish(t, pubjs, pub, "events.pharmacy.dispense", data)

	rec := quarantined(t, js, ev.seq)
	if rec.Class != record.ClassExhausted || rec.ErrorCode != codes.DownstreamUnavailable || rec.TraceID != ev.traceID {
		t.Errorf("record class %s code %s trace %s, want exhausted %s %s", rec.Class, rec.ErrorCode, rec.TraceID, codes.DownstreamUnavailable, ev.traceID)
	}
	// The validator reports the exhausted event to FAILURES on its last
	// delivery (package validator): the quarantine span consumes that
	// report, a child of the report's publish span.
	const advisory = "quarantine dlq.intake.pharmacy"
	tr := waitTrace(t, j, ev.traceID, func(tr jaeger.Trace) error {
		if err := need(tr, validatorService, "validate ", maxDeliver); err != nil {
			return err
		}
		if err := need(tr, quarantinerService, advisory, 1); err != nil {
			return err
		}
		return need(tr, quarantinerService, "send quarantine.", 1)
	})
	p := one(t, tr, publisherService, "send events.pharmacy.dispense")
	deliveries := map[string]bool{}
	for _, v := range tr.Find(validatorService, "validate events.pharmacy.dispense") {
		checkParent(t, v, p)
		n := v.Tag("messaging.nats.jetstream.delivery_count")
		deliveries[n] = true
		class := telemetry.ClassTransient
		if n == strconv.Itoa(maxDeliver) {
			class = string(record.ClassExhausted)
		}
		checkTags(t, v, map[string]string{"otel.status_code": "ERROR", "otel.status_description": string(codes.DownstreamUnavailable),
			"deadletter.failure_class": class, "deadletter.error_code": string(codes.DownstreamUnavailable)})
		if !v.HasEvent(telemetry.FailureEvent) {
			t.Errorf("delivery %s has no failure event", n)
		}
		var commit jaeger.Span
		for _, c := range tr.Find(validatorService, "commit pharmacy") {
			if c.Parent() == v.SpanID {
				commit = c
			}
		}
		if commit.SpanID == "" {
			t.Errorf("delivery %s has no commit span\n%s", n, describe(tr))
			continue
		}
		checkTags(t, commit, map[string]string{"otel.status_code": "ERROR", "deadletter.error_code": string(codes.DownstreamUnavailable)})
		posts := 0
		for _, c := range tr.Find(validatorService, "POST") {
			if c.Parent() == commit.SpanID {
				posts++
				checkTags(t, c, map[string]string{"span.kind": "client", "http.response.status_code": "503"})
			}
		}
		if posts != 1 {
			t.Errorf("delivery %s: %d downstream calls in its commit span, want 1", n, posts)
		}
	}
	for i := 1; i <= maxDeliver; i++ {
		if !deliveries[strconv.Itoa(i)] {
			t.Errorf("no span for delivery %d (have %v)", i, deliveries)
		}
	}
	q := one(t, tr, quarantinerService, advisory)
	checkParent(t, q, one(t, tr, validatorService, "send dlq.intake.pharmacy"))
	checkTags(t, q, map[string]string{"deadletter.dlq_id": rec.DLQID, "deadletter.failure_class": string(record.ClassExhausted),
		"deadletter.outcome": string(record.KindQuarantined), "messaging.nats.jetstream.stream": "FAILURES"})
	w := one(t, tr, quarantinerService, "send quarantine.")
	checkParent(t, w, q)

	mu.Lock()
	for i, tp := range traceparents {
		if !strings.Contains(tp, ev.traceID) {
			t.Errorf("downstream call %d carried traceparent %q, not the event's trace %s", i, tp, ev.traceID)
		}
	}
	mu.Unlock()
	checkNoMarkers(t, j, s.logs.String(), markerRetry, markerRetry2)
}

// TestTracingOffLeavesNothingRunning runs the stack with tracing set up from
// an environment without an endpoint: the providers are no-ops, no exporter
// goroutine ever runs, an upstream trace context still passes through to
// the record, and nothing is left behind after shutdown.
func TestTracingOffLeavesNothingRunning(t *testing.T) {
	natstest.Long(t, "Jaeger")
	for _, k := range []string{telemetry.EnvEndpoint, telemetry.EnvTracesEndpoint, telemetry.EnvSDKDisabled, telemetry.EnvTracesExporter} {
		t.Setenv(k, "")
	}
	before := goleak.IgnoreCurrent()
	ctx := context.Background()
	tpV, shutV, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: validatorService})
	if err != nil {
		t.Fatal(err)
	}
	tpQ, shutQ, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: quarantinerService})
	if err != nil {
		t.Fatal(err)
	}
	s := startStack(t, func(c *stack.Config) {
		c.Validator.TracerProvider = tpV
		c.Quarantiner.TracerProvider = tpQ
	})
	nc, err := s.ConnectAs(string(access.RolePublisher))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const upstream = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	msg := nats.NewMsg("events.pharmacy.dispense")
	msg.Data = []byte(`{"transaction_id": "TX-1",`)
	msg.Header.Set("traceparent", upstream)
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	anc, err := s.ConnectAs(access.Admin)
	if err != nil {
		t.Fatal(err)
	}
	ajs, err := jetstream.New(anc)
	if err != nil {
		t.Fatal(err)
	}
	rec := quarantined(t, ajs, ack.Sequence)
	if rec.TraceID != "0af7651916cd43dd8448eb211c80319c" || rec.SpanID != "b7ad6b7169203331" {
		t.Errorf("record trace %s span %s, want the upstream's", rec.TraceID, rec.SpanID)
	}
	buf := make([]byte, 1<<20)
	if dump := string(buf[:runtime.Stack(buf, true)]); strings.Contains(dump, "go.opentelemetry.io/otel/sdk") ||
		strings.Contains(dump, "otlptrace") {
		t.Errorf("an OpenTelemetry SDK or exporter goroutine runs with tracing off:\n%s", dump)
	}
	nc.Close()
	anc.Close()
	s.Stop()
	if err := shutV(ctx); err != nil {
		t.Error(err)
	}
	if err := shutQ(ctx); err != nil {
		t.Error(err)
	}
	goleak.VerifyNone(t, before)
}

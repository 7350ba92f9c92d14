// Package quarantiner turns every failed event into a sealed, hash-chained
// record in the WORM QUARANTINE stream. Failures arrive two ways:
//
//   - structural failures reported by the validator on the FAILURES intake
//     (class validation);
//   - events that exhausted their deliveries, announced by the server's
//     max-deliveries advisory (captured durably in ADVISORIES): the
//     original is fetched from EVENTS by sequence, with its attempt history
//     from ATTEMPTS (class exhausted). An original that can no longer be
//     fetched still gets a record (ORIGINAL_UNAVAILABLE), loudly.
//
// Whatever way and however often a failure arrives, one source event gives
// one record: chains are keyed by dlq id and appends are conditional on the
// chain's last sequence. An intake message is acknowledged only after its
// record is stored. Records for distinct chains that are ready at the same
// time, whichever way they came, are stored as one atomic batch (one write
// and one fsync for all of them); a batch the server refuses as a whole is
// written again record by record. The quarantiner is the only writer of
// QUARANTINE; other services append lifecycle records through its
// quarantiner.append endpoint.
package quarantiner

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/failpoint"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/lifecycle"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// Version is the quarantiner's service version (SemVer).
const Version = "0.1.0"

// batchTimeout bounds one atomic batch's round trip.
const batchTimeout = 10 * time.Second

// Service is one quarantiner instance.
type Service struct {
	cfg Config
	// base is the service's skeleton: its connections, logger, start-up
	// steps and stop (package lifecycle).
	base     lifecycle.Base
	nc       *nats.Conn
	js       jetstream.JetStream
	gate     *gate.Gate
	log      *slog.Logger
	metrics  *metrics
	chains   *chains
	events   jetstream.Stream
	attempts jetstream.KeyValue
	now      func() time.Time
	// decisions checks the signed decisions of decision records.
	decisions approval.Checker
	hooks     *testHooks
	tr        telemetry.Tracer
	// started is closed once Run has set everything up (its stores bound,
	// its endpoint registered), before it consumes.
	started chan struct{}
}

// testHooks lets tests stop a quarantiner at precise points.
type testHooks struct {
	// beforeWrite runs after an intake message is read and before its
	// record is written.
	beforeWrite func()
	// beforeGather runs when the record writer has taken the first record
	// of a batch (first), before it takes the others that are queued.
	beforeGather func(w *writer, first *nats.Msg)
	// afterBatch runs when a batch is stored, before its writers are
	// answered (and so before the intake messages are acknowledged).
	afterBatch func([]*nats.Msg)
	// chooser runs when the record writer is built, with its chooser
	// (tests set its costs to make it prefer one way).
	chooser func(*batch.Chooser)
}

// New builds a quarantiner on an open connection; Run starts it.
func New(nc *nats.Conn, cfg Config, log *slog.Logger) (*Service, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g, err := gate.New(cfg.MaxPayload)
	if err != nil {
		return nil, err
	}
	if cfg.InstanceID == "" {
		cfg.InstanceID = config.InstanceID("quarantiner")
	}
	base, err := lifecycle.New(nc, "quarantiner", cfg.InstanceID, log)
	if err != nil {
		return nil, err
	}
	js := base.JS
	decisions := cfg.Decisions
	if decisions == nil {
		decisions = approval.AuditRegistry{JS: js}
	}
	return &Service{
		cfg: cfg, base: base, nc: nc, js: js, gate: g, now: time.Now, decisions: decisions,
		log:     base.Log,
		metrics: newMetrics(cfg.Registerer),
		tr:      telemetry.NewTracer(cfg.TracerProvider, cfg.Propagator),
		started: make(chan struct{}),
	}, nil
}

// Run binds the consumers and writes records until ctx is done, then drains
// the consumers, finishes the records in flight and stops its micro service.
func (s *Service) Run(ctx context.Context) (err error) {
	// Stopped during start-up: a clean stop.
	defer lifecycle.Clean(&err)
	// Set-up waits for the cluster (a leader election, a server not up
	// yet, a consumer not provisioned yet) until ctx ends: package retry.
	if s.cfg.Provision {
		if err := s.base.Provision(ctx, s.cfg.Streams); err != nil {
			return err
		}
	}
	if _, err = s.base.Stream(ctx, "QUARANTINE stream", subjects.QuarantineStream); err != nil {
		return fmt.Errorf("quarantiner: %s must be provisioned by an administrator: %w", subjects.QuarantineStream, err)
	}
	var w *writer
	if s.cfg.MaxBatch > 1 {
		w = newWriter(s.js, s.log, s.metrics, s.hooks, s.cfg.MaxBatch, s.cfg.Streams, batchTimeout)
		go w.run()
		// Registered first, so run last: after the intake workers and the
		// append handlers, the writer's only callers, have returned.
		defer w.close()
	}
	if s.chains, err = newChains(s.js, s.tr, s.cfg.ChainCache, w); err != nil {
		return fmt.Errorf("quarantiner: %w", err)
	}
	if s.events, err = s.base.Stream(ctx, "EVENTS stream", subjects.EventsStream); err != nil {
		return fmt.Errorf("quarantiner: %w", err)
	}
	if s.attempts, err = s.base.Bucket(ctx, "attempts bucket", subjects.AttemptsBucket); err != nil {
		return fmt.Errorf("quarantiner: %w", err)
	}
	failures := &lifecycle.Intake{Step: "failures consumer", Stream: subjects.FailuresStream,
		Config: s.cfg.FailuresConsumerConfig, Create: s.cfg.CreateConsumer}
	if err := s.base.Bind(ctx, failures); err != nil {
		return fmt.Errorf("quarantiner: failures consumer: %w", err)
	}
	advisories := &lifecycle.Intake{Step: "advisories consumer", Stream: subjects.AdvisoriesStream,
		Config: s.cfg.AdvisoriesConsumerConfig, Create: s.cfg.CreateConsumer}
	if err := s.base.Bind(ctx, advisories); err != nil {
		return fmt.Errorf("quarantiner: advisories consumer: %w", err)
	}

	svc, stop, err := s.base.Micro(micro.Config{
		Version:     Version,
		Description: "deadletter quarantiner: the only writer of sealed quarantine records",
	})
	if err != nil {
		return err
	}
	// Appends are served concurrently by AppendWorkers goroutines;
	// appends to one chain stay safe because each is conditional on the
	// chain's last sequence. A request still arriving while the service
	// stops is refused; the requests handed over are finished.
	requests := s.base.NewRequests(s.cfg.AppendWorkers, func(r micro.Request) {
		if r.Subject() == api.QuarantinerRepair {
			s.handleRepair(r)
			return
		}
		s.handleAppend(r)
	})
	defer func() {
		stop()
		requests.Stop()
	}()
	for _, e := range []struct{ name, description string }{
		{"append", "append a lifecycle record to a chain (redriver, operators)"},
		{"hold", "append a legal hold's record to a chain (auditor); no other kind"},
		{"repair", "seal the record of an event left without an outcome, read from EVENTS (auditor's reconciliation)"},
	} {
		if err := svc.AddGroup("quarantiner").AddEndpoint(e.name, requests.Handler(),
			micro.WithEndpointMetadata(map[string]string{"description": e.description})); err != nil {
			return fmt.Errorf("quarantiner: micro endpoint: %w", err)
		}
	}

	s.log.Info("quarantiner started", "workers", s.cfg.Workers, "append_workers", s.cfg.AppendWorkers, "redrive_cap", s.cfg.RedriveCap)
	close(s.started)
	// Until ctx ends, then every intake message delivered is handled.
	s.base.Consume(ctx, s.cfg.Workers, s.handle, failures, advisories)
	s.log.Info("quarantiner stopped")
	return nil
}

// handle processes one intake message: a failure report or an advisory.
//
// Its "quarantine <subject>" consumer span continues the event's trace: a
// failure report's headers carry the validator's context; on the advisory
// path (advisories carry no trace context of the event) the span is made a
// child of the original fetched by sequence, and links the advisory's own
// context when it has one.
func (s *Service) handle(m jetstream.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.AckWait)
	defer cancel()
	began := time.Now()
	var (
		f        record.Failure
		delay    time.Duration
		err      error
		advisory bool
	)
	switch subj := m.Subject(); {
	case isAdvisory(subj, subjects.MaxDeliveriesAdvisories):
		if s.cfg.Failpoint.Drops(failpoint.QuarantinerDropMaxDeliveries) {
			// Tests: the advisory as if ADVISORIES never stored it.
			s.log.Warn("failpoint: max-deliveries advisory dropped", "subject", subj)
			_ = m.Ack()
			return
		}
		advisory = true
		f, err = s.fromMaxDeliveries(ctx, m.Data())
	case isAdvisory(subj, subjects.TerminatedAdvisories):
		advisory = true
		var skip bool
		f, skip, delay, err = s.fromTerminated(ctx, m)
		if err == nil && skip {
			_ = m.Ack()
			return
		}
	default:
		f, err = decodeFailure(m.Data())
	}
	if err == nil && delay > 0 {
		_ = m.NakWithDelay(delay)
		return
	}
	ctx, span := s.startSpan(ctx, m, f, err == nil && advisory, began)
	defer span.End()
	if err != nil {
		telemetry.Error(span, "intake message not understood")
		s.log.Error("intake message not understood; will retry", "subject", m.Subject(), "err", err)
		_ = m.NakWithDelay(s.cfg.RetryDelay)
		return
	}
	if s.hooks != nil && s.hooks.beforeWrite != nil {
		s.hooks.beforeWrite()
	}
	out, err := s.ingest(ctx, f)
	if err != nil {
		telemetry.Error(span, "record not written")
		s.log.Error("record not written; will retry", "stream", f.Stream, "seq", f.Seq, "code", f.Code, "err", err)
		_ = m.NakWithDelay(s.cfg.RetryDelay)
		return
	}
	if out.written != nil {
		s.cfg.Failpoint.Hit(failpoint.QuarantinerAfterWrite, out.written.DLQID)
	}
	if err := m.DoubleAck(ctx); err != nil {
		// The record is stored; a redelivery is recognised as a duplicate.
		s.log.Warn("intake ack failed", "stream", f.Stream, "seq", f.Seq, "err", err)
	}
	if out.written == nil {
		span.SetAttributes(telemetry.OutcomeKey.String("already_quarantined"), attribute.String("deadletter.duplicate_reason", out.duplicate))
		s.log.Info("failure already quarantined", "dlq_id", record.DLQIDFor(f), "stream", f.Stream, "seq", f.Seq, "reason", out.duplicate)
		return
	}
	span.SetAttributes(telemetry.OutcomeKey.String(string(out.written.Kind)), attribute.Int("deadletter.record_index", out.written.Index),
		attribute.String("deadletter.audit_hash", out.written.AuditHash))
	s.metrics.writeSeconds.Observe(since(f.FailedAt))
	s.logRecord(ctx, out.written, out.seq)
}

// logRecord counts the record r stored at seq and writes its audit-log
// line: the one line of the record, in the vocabulary of package chain.
// The quarantiner, the only writer of QUARANTINE, writes it once per
// record as it is stored (the auditor writes none).
func (s *Service) logRecord(ctx context.Context, r *record.Record, seq uint64) {
	s.metrics.written.WithLabelValues(string(r.Kind), string(r.Class), string(r.ErrorCode)).Inc()
	chain.Log(ctx, s.log, chain.HeadOf(*r), seq)
}

// startSpan starts the span of an intake message once its failure f is known
// (zero when it could not be read), backdated to began. On the advisory path
// it continues the original event's trace, from the headers of the original
// fetched by sequence; a failure report continues the context in its own
// headers (the validator's), else the original's it carries. An event
// that never had trace context is a root of its derived trace
// (telemetry.EventTraceID), the one its deliveries' spans share.
func (s *Service) startSpan(ctx context.Context, m jetstream.Msg, f record.Failure, advisory bool, began time.Time) (context.Context, trace.Span) {
	opts := []telemetry.Option{telemetry.Operation("quarantine"), telemetry.StartTime(began)}
	if advisory || !s.tr.SpanContext(m.Headers()).IsValid() {
		if sc := s.tr.SpanContext(f.Headers); sc.IsValid() {
			opts = append(opts, telemetry.Parent(sc))
		} else if f.Stream != "" {
			// An untraced event: its deliveries' derived trace.
			opts = append(opts, telemetry.EventRoot(f.Stream, f.Seq, f.Published))
		}
	}
	ctx, span := s.tr.StartConsume(ctx, m, opts...)
	if f.Stream != "" {
		span.SetAttributes(telemetry.DLQIDKey.String(record.DLQIDFor(f)), telemetry.DomainKey.String(f.Domain),
			telemetry.FailureClassKey.String(string(f.Class)), telemetry.ErrorCodeKey.String(string(f.Code)),
			telemetry.RedriveCountKey.Int(f.RedriveCount))
	}
	return ctx, span
}

func isAdvisory(subject, filter string) bool {
	prefix := filter[:len(filter)-1] // drop the trailing ">"
	return len(subject) > len(prefix) && subject[:len(prefix)] == prefix
}

// Package validator is deadletter's validation gate as a service: a durable
// pull consumer on EVENTS that checks every event (schema and domain rules,
// package gate) and commits each valid one exactly once (claim in
// IDEMPOTENCY, optional downstream POST, conditional LEDGER write, mark
// committed).
//
// Structural failures are never retried: they are published to the
// FAILURES intake, and only once that publish is acknowledged is the
// original terminated. Transient failures are retried with exponential
// back-off and jitter (NakWithDelay) and their history kept in ATTEMPTS; on
// delivery MaxDeliver an event still failing is reported exhausted to
// FAILURES by the validator itself, then terminated. The consumer allows
// one spare delivery beyond it, so an event whose last attempt ended
// without an outcome (its validator killed, its report not stored) is
// delivered once more; the server's max-deliveries advisory and the
// auditor's repair of unaccounted events are only backstops behind it.
// Several instances share one durable consumer.
package validator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/failpoint"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/lifecycle"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/retry"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// Version is the validator's service version (SemVer), shown by `nats micro ls`.
const Version = "0.1.0"

// Service is one validator instance.
type Service struct {
	cfg Config
	// base is the service's skeleton: its connections, logger, start-up
	// steps and stop (package lifecycle).
	base    lifecycle.Base
	nc      *nats.Conn
	js      jetstream.JetStream
	gate    *gate.Gate
	log     *slog.Logger
	commit  *committer
	stats   counters
	metrics *metrics
	hooks   *testHooks
	tr      telemetry.Tracer
}

// counters are the instance's running totals.
type counters struct {
	received, committed, duplicates, structural, transient, exhausted atomic.Uint64
}

// Stats is a snapshot of an instance's counters.
type Stats struct {
	Received   uint64 `json:"received"`
	Committed  uint64 `json:"committed"`
	Duplicates uint64 `json:"duplicates"`
	Structural uint64 `json:"structural_failures"`
	Transient  uint64 `json:"transient_failures"`
	Exhausted  uint64 `json:"exhausted"`
}

// New builds a validator on an open connection. It compiles the schemas;
// Run does the rest.
func New(nc *nats.Conn, cfg Config, log *slog.Logger) (*Service, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.InstanceID == "" {
		cfg.InstanceID = config.InstanceID("validator")
	}
	g, err := gate.New(cfg.MaxPayload)
	if err != nil {
		return nil, err
	}
	if cfg.Publishers == nil && cfg.PublishersFile != "" {
		if cfg.Publishers, err = access.LoadPublishers(cfg.PublishersFile); err != nil {
			return nil, fmt.Errorf("validator: %w", err)
		}
	}
	base, err := lifecycle.New(nc, "validator", cfg.InstanceID, log)
	if err != nil {
		return nil, err
	}
	js := base.JS
	s := &Service{cfg: cfg, base: base, nc: nc, js: js, gate: g, log: base.Log,
		metrics: newMetrics(cfg.Registerer), tr: telemetry.NewTracer(cfg.TracerProvider, cfg.Propagator)}
	s.commit = &committer{js: js, owner: cfg.InstanceID, lease: cfg.ClaimLease, now: time.Now, ledger: subjects.Ledger, failpoint: cfg.Failpoint}
	if cfg.DownstreamURL != "" {
		s.commit.down = &downstream{url: cfg.DownstreamURL, client: &http.Client{Timeout: cfg.DownstreamTimeout}, tr: s.tr}
	}
	// Run starts the batcher, once the stores are bound. Where every group
	// would be written one event at a time (one replica, no fsync:
	// batch.Chooser), there is none: each event commits in its worker, with
	// no hand-over to a batcher and back, as with CommitBatch 1.
	if cfg.CommitBatch > 1 && !(&batch.Chooser{SyncAlways: cfg.Streams.SyncAlways, Replicas: cfg.Streams.Replicas}).OneAtATime() {
		s.commit.batch = newBatcher(s.commit, min(cfg.CommitBatch, cfg.Workers), cfg.Streams, s.log, s.metrics)
	}
	return s, nil
}

// SpareDeliveries is how many deliveries the consumer allows beyond
// Config.MaxDeliver: the validator decides exhaustion itself on delivery
// MaxDeliver, and the spare one gives an event whose last attempt ended
// without an outcome (the validator killed during it, or its failure report
// not stored) that outcome, without depending on the server's
// max-deliveries advisory, a core message nobody may be there to store when
// a cluster is electing leaders.
const SpareDeliveries = 1

// ConsumerConfig is the validator's durable consumer of EVENTS, which the
// administrator provisions (services may not create consumers).
func (c Config) ConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:     c.Consumer,
		Description: "deadletter validator",
		// No filter: EVENTS holds events.>, redriven.> and (sourced from REPLAYS) replay.> only, and an
		// unfiltered consumer is the cheapest for the server to feed.
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		MaxDeliver:    c.MaxDeliver + SpareDeliveries,
		MaxAckPending: max(1024, 4*c.Workers),
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// Stats returns the instance's counters.
func (s *Service) Stats() Stats {
	return Stats{
		Received: s.stats.received.Load(), Committed: s.stats.committed.Load(),
		Duplicates: s.stats.duplicates.Load(), Structural: s.stats.structural.Load(),
		Transient: s.stats.transient.Load(), Exhausted: s.stats.exhausted.Load(),
	}
}

// Run provisions (or checks) the streams, binds the durable consumer and
// processes events until ctx is done. It then drains the consumer, finishes
// the events in flight and stops its micro service.
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
	kv, err := s.base.Bucket(ctx, "idempotency bucket", subjects.IdempotencyBucket)
	if err != nil {
		return fmt.Errorf("validator: idempotency bucket: %w", err)
	}
	attempts, err := s.base.Bucket(ctx, "attempts bucket", subjects.AttemptsBucket)
	if err != nil {
		return fmt.Errorf("validator: attempts bucket: %w", err)
	}
	if _, err := s.base.Stream(ctx, "documents stream", streams.DocumentsStream); err != nil {
		return fmt.Errorf("validator: documents stream: %w", err)
	}
	s.commit.kv = kv
	s.commit.hooks = s.hooks
	// IDEMPOTENCY restored from LEDGER beside ingest, never before it.
	s.commit.restoring.Store(true)
	rctx, stopRestore := context.WithCancel(ctx)
	restored := make(chan struct{})
	go func() {
		defer close(restored)
		s.restoreKeys(rctx)
	}()
	defer func() {
		stopRestore()
		<-restored
	}()
	if s.commit.batch != nil {
		batched := make(chan struct{})
		go func() {
			defer close(batched)
			s.commit.batch.run()
		}()
		// After the workers: no event is handed over any more; then
		// every outcome is handled (acks sent) before Run returns.
		defer func() {
			s.commit.batch.close()
			<-batched
		}()
	}
	events := &lifecycle.Intake{Step: "events consumer", Stream: subjects.EventsStream, Config: s.cfg.ConsumerConfig, Create: s.cfg.CreateConsumer}
	if err := s.base.Bind(ctx, events); err != nil {
		return fmt.Errorf("validator: %w", err)
	}

	svc, stop, err := s.base.Micro(micro.Config{
		Version:     Version,
		Description: "deadletter validation gate: checks events and commits them exactly once",
		StatsHandler: func(*micro.Endpoint) any {
			return s.Stats()
		},
	})
	if err != nil {
		return err
	}
	defer stop()
	if err := svc.AddGroup("validator").AddEndpoint("check", endpoint.Guard(micro.HandlerFunc(s.handleCheck)),
		micro.WithEndpointSubject("check.>"),
		micro.WithEndpointMetadata(map[string]string{"description": "dry-run an event: validator.check.<domain>.<type> with the payload as body"})); err != nil {
		return fmt.Errorf("validator: micro endpoint: %w", err)
	}

	s.log.Info("validator started", "consumer", s.cfg.Consumer, "workers", s.cfg.Workers,
		"max_deliver", s.cfg.MaxDeliver, "downstream", s.downstreamName())
	// Until ctx ends, then every event delivered is handled.
	s.base.Consume(ctx, s.cfg.Workers, func(m jetstream.Msg) { s.handle(m, attempts) }, events)
	s.log.Info("validator stopped", "stats", s.Stats())
	return nil
}

func (s *Service) downstreamName() string {
	if s.commit.down == nil {
		return "none"
	}
	return s.commit.down.String()
}

// validateOp names the validator's consume spans.
var validateOp = telemetry.Operation("validate")

// handle processes one delivery and ends it with exactly one of: ack
// (committed or duplicate), term (after the failure is stored in FAILURES),
// or nak with delay (transient; retried until MaxDeliver).
//
// Each delivery is one "validate <subject>" consumer span, child of the
// publisher's context in the message headers. With a downstream system of
// record, the commit (claim, downstream POST, LEDGER write) is a "commit
// <domain>" child span of its own; without one, the commit is the single
// LEDGER write, recorded on the validate span (outcome, LEDGER stream and
// sequence; its failure is the span's): a child span would repeat the
// parent's timing and double what tracing costs per event. For a
// structural failure the publish to FAILURES is a child span whose headers
// carry the context on to the quarantiner.
func (s *Service) handle(m jetstream.Msg, attempts jetstream.KeyValue) {
	s.stats.received.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ProcessTimeout)
	ctx, span := s.tr.StartConsume(ctx, m, validateOp)
	// end ends the delivery's handling; with a batcher it runs once the
	// event's group is written, after handle returned.
	end := func() {
		span.End()
		cancel()
	}
	meta, err := m.Metadata()
	if err != nil {
		defer end()
		s.log.Error("message without metadata", "subject", m.Subject(), "err", err)
		telemetry.Error(span, "message without metadata")
		// Not a delivery of EVENTS (no metadata): the one settlement
		// outside settle.
		_ = m.Nak()
		return
	}
	d := delivery{m: m, meta: meta, publisher: envelope.PublisherOf(m.Subject(), m.Headers())}
	d.dlqID, d.redrives = envelope.RedriveOf(m.Subject(), m.Headers())
	dlqID := d.dlqID
	if subjects.IsDocument(m.Subject(), dscsa.Name) {
		defer end()
		s.handleDocument(ctx, d, attempts)
		return
	}
	// Read (decoded) once: checked, and its content hash taken, from the
	// same form.
	ev, env, err := s.check(m.Subject(), m.Data())
	if err == nil {
		env.Publisher = d.publisher
		err = s.authorize(env)
	}
	if err != nil {
		defer end()
		// Identified, not the checked envelope: an event its publisher
		// may not publish gets a chain of its own (its bytes' hash),
		// never one named by the key of the party it names.
		id := s.gate.Identify(m.Subject(), m.Data())
		id.Publisher = d.publisher
		s.structural(ctx, d, &id, record.StageValidate, err, attempts)
		return
	}
	if hist, ok := s.decidedExhausted(ctx, meta, attempts); ok {
		defer end()
		last := hist[len(hist)-1]
		s.exhaust(ctx, d, env, cause{code: last.Code, detail: last.Reason}, hist)
		return
	}
	start := time.Now()
	cctx, cspan := ctx, trace.Span(nil)
	if s.commit.down != nil {
		cctx, cspan = s.tr.Start(ctx, "commit "+env.Domain, telemetry.DomainKey.String(env.Domain),
			semconv.MessagingDestinationTemplate("ledger.{domain}.{key}"))
	}
	// The content a second event with this key must equal to be a
	// duplicate (else an IDEMPOTENCY_CONFLICT).
	hash := idempotency.CheckedDocHash(env, m.Data(), ev.Doc)
	outcome := func(ledgerSeq uint64, err error) {
		defer end()
		if cspan != nil {
			endCommitSpan(cspan, ledgerSeq, err)
		}
		s.outcome(ctx, d, env, start, cspan == nil, span, ledgerSeq, err, attempts)
	}
	if s.commit.batch != nil {
		s.commit.batch.submit(cctx, env, m.Data(), hash, meta.Sequence.Stream, dlqID, outcome)
		return
	}
	outcome(s.commit.commit(cctx, env, m.Data(), hash, meta.Sequence.Stream, dlqID))
}

// outcome ends a commit attempt of a delivery with exactly one of: ack
// (committed or duplicate), nak with delay (transient), or the structural
// path. ledgerOnSpan: the commit was the LEDGER write alone, recorded on
// the validate span.
func (s *Service) outcome(ctx context.Context, d delivery, env envelope.Envelope,
	start time.Time, ledgerOnSpan bool, span trace.Span, ledgerSeq uint64, err error, attempts jetstream.KeyValue) {
	meta := d.meta
	// Each span's attributes are set in as few calls as possible: every
	// SetAttributes call may copy the span's attributes again.
	switch classify(err, s.lastAttempt(meta)) {
	case resultCommitted:
		if ledgerOnSpan {
			span.SetAttributes(telemetry.DomainKey.String(env.Domain), telemetry.OutcomeKey.String("committed"),
				telemetry.LedgerSequenceKey.Int64(int64(ledgerSeq)))
		} else {
			span.SetAttributes(telemetry.DomainKey.String(env.Domain), telemetry.OutcomeKey.String("committed"))
		}
		s.stats.committed.Add(1)
		s.metrics.outcome(outcomeCommitted)
		s.metrics.committed(start)
		s.settle(d, acked())
		if s.log.Enabled(ctx, slog.LevelDebug) {
			s.log.Debug("committed", "seq", meta.Sequence.Stream, "key", env.IdempotencyKey, "ledger_seq", ledgerSeq)
		}
		if meta.NumDelivered > 1 {
			_ = attempts.Delete(ctx, attemptKey(meta.Sequence.Stream))
		}
	case resultDuplicate:
		span.SetAttributes(telemetry.DomainKey.String(env.Domain), telemetry.OutcomeKey.String("duplicate"))
		s.stats.duplicates.Add(1)
		s.metrics.outcome(outcomeDuplicate)
		s.settle(d, acked())
		s.log.Info("duplicate acknowledged", "seq", meta.Sequence.Stream, "key", env.IdempotencyKey)
	case resultRetry, resultExhausted:
		// transient records the attempt first; on the last delivery it
		// reports the event exhausted.
		s.transient(ctx, d, env, err, attempts)
	default:
		s.structural(ctx, d, &env, record.StageCommit, err, attempts)
	}
}

// conflictOf returns the record.Conflict of an IDEMPOTENCY_CONFLICT error
// (nil for any other).
func conflictOf(err error) *record.Conflict {
	var ce *conflictError
	if errors.As(err, &ce) {
		return ce.conflict()
	}
	return nil
}

// check runs the gate on an event published on subject (gate.Read, then
// gate.CheckEvent), returning the event as read (decoded) too; a panic in
// a domain rule becomes INTERNAL_ERROR (a structural failure, quarantined)
// rather than a crash.
func (s *Service) check(subject string, data []byte) (ev gate.Event, env envelope.Envelope, err error) {
	defer s.recoverCheck(subject, &err)
	if ev, err = s.gate.Read(subject, data); err != nil {
		return ev, env, err
	}
	env, err = s.gate.CheckEvent(ev)
	return ev, env, err
}

// checkEvent runs the gate on a read (decoded) event, published on
// subject or an event of a document on its subject; a panic in a domain
// rule becomes INTERNAL_ERROR (a structural failure, quarantined) rather
// than a crash.
func (s *Service) checkEvent(subject string, ev gate.Event) (env envelope.Envelope, err error) {
	defer s.recoverCheck(subject, &err)
	return s.gate.CheckEvent(ev)
}

// recoverCheck turns a panic of the gate into INTERNAL_ERROR.
func (s *Service) recoverCheck(subject string, err *error) {
	if r := recover(); r != nil {
		s.log.Error("validation panicked", "subject", subject)
		*err = codes.Errorf(codes.Internal, "validation panicked")
	}
}

// authorize requires env's publisher to be one that may publish for its
// party (Config.Publishers); without a table, or for an event whose
// subject names no publisher, there is nothing to check.
func (s *Service) authorize(env envelope.Envelope) error {
	if s.cfg.Publishers == nil || env.Publisher == "" || s.cfg.Publishers.Allows(env.Publisher, env.Domain, env.PartyID) {
		return nil
	}
	return codes.Errorf(codes.PartyNotAuthorized, "publisher %q may not publish %s events for the event's party", env.Publisher, env.Domain)
}

// endCommitSpan ends the span of one commit attempt, failed with its code
// and class unless it committed (at LEDGER sequence ledgerSeq) or found the
// event already committed.
func endCommitSpan(span trace.Span, ledgerSeq uint64, err error) {
	switch {
	case err == nil:
		span.SetAttributes(telemetry.StreamKey.String(subjects.LedgerStream), telemetry.SequenceKey.Int64(int64(ledgerSeq)),
			telemetry.OutcomeKey.String("committed"))
	case errors.Is(err, ErrAlreadyCommitted):
		span.SetAttributes(telemetry.OutcomeKey.String("duplicate"))
	case codes.Of(err).Transient():
		telemetry.Fail(span, codes.Of(err), telemetry.ClassTransient, telemetry.StageKey.String(record.StageCommit))
	default:
		telemetry.Fail(span, codes.Of(err), string(record.ClassValidation), telemetry.StageKey.String(record.StageCommit))
	}
	span.End()
}

// reportPolicy retries a failure report until the delivery's
// ProcessTimeout, 100 ms to 2 s apart, each attempt bounded to half the
// AckWait (at most 5 s): the delivery is marked in progress before each
// one, so the server never redelivers it meanwhile.
func (s *Service) reportPolicy() retry.Policy {
	return retry.Policy{Attempt: min(5*time.Second, s.cfg.AckWait/2), Initial: 100 * time.Millisecond, Max: 2 * time.Second, Kind: "failure report"}
}

// report stores f in FAILURES (de-duplicated per EVENTS sequence), then
// terminates the original with the error code as reason (a reason the
// quarantiner's terminated-advisory listener skips). If the report cannot be
// stored before the delivery's ProcessTimeout (it is retried meanwhile),
// the original is redelivered later instead, and false is returned: it is
// never terminated without a stored failure.
func (s *Service) report(ctx context.Context, d delivery, f record.Failure) bool {
	meta := d.meta
	err := s.storeFailure(ctx, d, f, record.FailureMsgID(meta.Stream, meta.Sequence.Stream))
	if err != nil {
		s.log.Error("failure report not stored; will retry", "seq", meta.Sequence.Stream, "code", f.Code, "class", f.Class, "err", err)
		s.settle(d, retryAfter(backoff(s.cfg.BackoffBase, s.cfg.BackoffMax, meta.NumDelivered)))
		return false
	}
	s.settle(d, terminated(f.Code))
	return true
}

// storeFailure stores f in FAILURES under the de-duplication id msgID,
// retried until the delivery's ProcessTimeout (reportPolicy), the
// delivery marked in progress before each attempt.
func (s *Service) storeFailure(ctx context.Context, d delivery, f record.Failure, msgID string) error {
	m, meta := d.m, d.meta
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	out := nats.NewMsg(subjects.Failure(f.Domain))
	out.Data = b
	out.Header.Set(envelope.ErrorCode, string(f.Code))
	out.Header.Set(envelope.SourceStream, meta.Stream)
	out.Header.Set(envelope.SourceSeq, strconv.FormatUint(meta.Sequence.Stream, 10))
	// The failure report carries this publish's context in its own
	// headers (f.Headers keeps the original's, verbatim): the
	// quarantiner's span becomes its child, in the event's trace.
	pctx, pspan := s.tr.StartPublish(ctx, out, telemetry.MessageID(msgID),
		telemetry.Attributes(telemetry.DomainKey.String(f.Domain), telemetry.ErrorCodeKey.String(string(f.Code))))
	defer pspan.End()
	// Retried within this delivery while FAILURES is unavailable (a
	// stream leader being elected), the server told the delivery is in
	// progress before each attempt: a nak per failed attempt would burn
	// the event's deliveries in seconds, and an event that runs out of
	// them while FAILURES is down depends on the advisory, which a
	// stream without a leader at that moment does not store.
	var ack *jetstream.PubAck
	err = s.reportPolicy().Do(pctx, s.log, "failure report", func(actx context.Context) error {
		_ = m.InProgress()
		var perr error
		ack, perr = s.js.PublishMsg(actx, out, jetstream.WithMsgID(msgID))
		return perr
	})
	telemetry.RecordAck(pspan, ack)
	if err != nil {
		telemetry.Error(pspan, "failure report not stored")
	}
	return err
}

// structural reports a failure to FAILURES, then terminates the original.
// If the report cannot be stored, the original is redelivered later instead:
// it is never terminated without a stored failure.
func (s *Service) structural(ctx context.Context, d delivery, env *envelope.Envelope, stage string, err error, attempts jetstream.KeyValue) {
	m, meta, dlqID, redrives := d.m, d.meta, d.dlqID, d.redrives
	why, now := causeOf(err), time.Now().UTC()
	code := why.code
	hist := append(readAttempts(ctx, attempts, meta.Sequence.Stream), d.attempt(stage, why, now))
	f := failureOf(d, d.single(subjects.DomainOf(m.Subject(), s.gate.Domains()), env), record.ClassValidation, why, hist, now)
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(telemetry.DomainKey.String(f.Domain), telemetry.DLQIDKey.String(record.DLQIDFor(f)),
		telemetry.RedriveCountKey.Int(redrives), telemetry.OutcomeKey.String("structural"))
	telemetry.Fail(span, code, string(record.ClassValidation), telemetry.StageKey.String(stage))
	if !s.report(ctx, d, f) {
		return
	}
	s.stats.structural.Add(1)
	s.metrics.outcome(outcomeStructural)
	s.metrics.failure(f.Domain, code)
	if f.Conflict != nil {
		s.metrics.conflict(f.Domain)
		s.log.Warn("idempotency conflict quarantined", "seq", meta.Sequence.Stream, "key", env.IdempotencyKey, "ledger_seq", f.Conflict.LedgerSeq,
			"committed_hash", f.Conflict.CommittedHash, "content_hash", f.Conflict.ContentHash, "dlq_id", record.DLQIDFor(f))
	}
	s.log.Info("event rejected", "seq", meta.Sequence.Stream, "subject", m.Subject(), "code", code, "stage", stage, "dlq_id", dlqID)
}

// transient records the attempt and schedules a redelivery. On delivery
// MaxDeliver it reports the event exhausted to FAILURES itself, then
// terminates it (exhaust). The consumer's spare delivery (SpareDeliveries)
// covers a validator that dies before the report is stored, and the
// server's max-deliveries advisory, a core message that is lost when
// ADVISORIES has no leader at that moment, only one that dies on the
// spare delivery too.
func (s *Service) transient(ctx context.Context, d delivery, env envelope.Envelope, err error, attempts jetstream.KeyValue) {
	m, meta := d.m, d.meta
	s.stats.transient.Add(1)
	why := causeOf(err)
	code := why.code
	span := trace.SpanFromContext(ctx)
	s.metrics.outcome(outcomeTransient)
	s.metrics.failure(env.Domain, code)
	hist := record.History{Subject: m.Subject(), Domain: env.Domain, IdempotencyKey: env.IdempotencyKey,
		Attempts: readAttempts(ctx, attempts, meta.Sequence.Stream)}
	hist.Attempts = append(hist.Attempts, d.attempt(record.StageCommit, why, time.Now().UTC()))
	if b, err := json.Marshal(hist); err == nil {
		if _, err := attempts.Put(ctx, attemptKey(meta.Sequence.Stream), b); err != nil {
			s.log.Warn("attempt history not stored", "seq", meta.Sequence.Stream, "err", err)
		}
	}
	if s.lastAttempt(meta) {
		// The decision is in ATTEMPTS (an attempt of the last delivery):
		// a spare delivery after a crash in exhaust reports it again.
		s.exhaust(ctx, d, env, why, hist.Attempts)
		return
	}
	delay := backoff(s.cfg.BackoffBase, s.cfg.BackoffMax, meta.NumDelivered)
	var held *heldError
	if errors.As(err, &held) {
		// Another validator holds the key: retrying before its lease ends
		// only burns deliveries. Wait for the commit or the lease's end.
		if until := time.Until(held.until); until > delay {
			delay = until + backoff(s.cfg.BackoffBase, s.cfg.BackoffMax, 1)
		}
	}
	span.SetAttributes(telemetry.DomainKey.String(env.Domain), telemetry.OutcomeKey.String("transient"))
	telemetry.Fail(span, code, telemetry.ClassTransient, telemetry.StageKey.String(record.StageCommit),
		attribute.Int64("deadletter.retry_delay_ms", delay.Milliseconds()))
	s.log.Info("transient failure; retrying", "seq", meta.Sequence.Stream, "key", env.IdempotencyKey, "code", code,
		"delivery", meta.NumDelivered, "delay_ms", delay.Milliseconds())
	s.settle(d, retryAfter(delay))
}

// lastAttempt reports whether the delivery is the last one that tries the
// event (delivery MaxDeliver), or a spare one beyond it.
func (s *Service) lastAttempt(meta *jetstream.MsgMetadata) bool {
	return meta.NumDelivered >= uint64(s.cfg.MaxDeliver)
}

// decidedExhausted returns the attempt history of an event on a spare
// delivery whose last attempt already failed transiently (an attempt of
// delivery MaxDeliver or later is recorded): its validator decided it
// exhausted, and died or could not store the report. The event is then
// reported exhausted again, never tried again: a report that was stored
// before the crash would otherwise sit beside a later commit. ok is false
// on an earlier delivery, or when the last attempt left no history (it
// died before deciding): the event is then tried once more.
func (s *Service) decidedExhausted(ctx context.Context, meta *jetstream.MsgMetadata, attempts jetstream.KeyValue) (hist []record.Attempt, ok bool) {
	if meta.NumDelivered <= uint64(s.cfg.MaxDeliver) {
		return nil, false
	}
	hist = readAttempts(ctx, attempts, meta.Sequence.Stream)
	if n := len(hist); n > 0 && hist[n-1].Delivery >= uint64(s.cfg.MaxDeliver) {
		return hist, true
	}
	return nil, false
}

// exhaust reports an event exhausted to FAILURES (its attempts in hist,
// the last one's code and detail), then terminates it (report).
func (s *Service) exhaust(ctx context.Context, d delivery, env envelope.Envelope, why cause, hist []record.Attempt) {
	meta, code := d.meta, why.code
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(telemetry.DomainKey.String(env.Domain), telemetry.OutcomeKey.String("exhausted"))
	telemetry.Fail(span, code, string(record.ClassExhausted), telemetry.StageKey.String(record.StageCommit))
	s.log.Warn("event exhausted its deliveries", "seq", meta.Sequence.Stream, "key", env.IdempotencyKey, "code", code, "deliveries", meta.NumDelivered)
	s.cfg.Failpoint.Hit(failpoint.ValidatorLastDelivery, env.IdempotencyKey)
	// The last attempt's cause (a conflict is never transient).
	why.conflict = nil
	f := failureOf(d, d.single(env.Domain, &env), record.ClassExhausted, why, hist, time.Now().UTC())
	if s.report(ctx, d, f) {
		s.stats.exhausted.Add(1)
		s.metrics.outcome(outcomeExhausted)
	}
}

// attemptKey is the ATTEMPTS key of an EVENTS sequence.
func attemptKey(seq uint64) string { return strconv.FormatUint(seq, 10) }

// readAttempts returns the attempts recorded so far for an EVENTS sequence.
func readAttempts(ctx context.Context, kv jetstream.KeyValue, seq uint64) []record.Attempt {
	e, err := kv.Get(ctx, attemptKey(seq))
	if err != nil {
		return nil
	}
	var hist record.History
	_ = json.Unmarshal(e.Value(), &hist)
	return hist.Attempts
}

// checkReply is the answer of validator.check.
type checkReply struct {
	OK       bool               `json:"ok"`
	Envelope *envelope.Envelope `json:"envelope,omitempty"`
}

// handleCheck dry-runs the gate: validator.check.<domain>.<type> with the
// payload as body answers the envelope, or an error with its code.
func (s *Service) handleCheck(r micro.Request) {
	if r.Subject() == documentCheckSubject {
		s.handleCheckDocument(r)
		return
	}
	subject := "events." + r.Subject()[len("validator.check."):]
	_, env, err := s.check(subject, r.Data())
	if err == nil {
		// A publisher's dry run answers as its publish would.
		if caller, cerr := access.CallerOf(nats.Header(r.Headers())); cerr == nil && caller.Role == access.RolePublisher {
			env.Publisher = caller.User
			err = s.authorize(env)
		}
	}
	if err != nil {
		_ = r.Error(string(codes.Of(err)), codes.DetailOf(err), nil)
		return
	}
	_ = r.RespondJSON(checkReply{OK: true, Envelope: &env})
}

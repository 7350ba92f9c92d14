// Package redriver replays quarantined events back through the validation
// gate, deliberately and safely: drains (filtered, rate-limited, bounded in
// concurrency, ordered per business key, durable, resumable) and single
// redrives (optionally with a corrected payload), plus the release of
// poison events, as a NATS micro service (drain.start, drain.status,
// drain.cancel, drain.resume, drain.list, redrive, release), and the
// two-person approval of the actions its policy names (approval.list,
// approval.get, approval.approve, approval.reject, policy.get, policy.set).
//
// The Service registers the endpoints and checks each caller; the work is
// done by its parts, one job each (ADR 0017): drains with their canary and
// pause (package drains), single redrives, corrections, releases and
// dismissals (package single), approvals and policy (package approvals),
// and the replay engine the first two share (package replay).
//
// A replay re-publishes the event's effective payload straight into EVENTS
// on redriven.<domain>.<type>.<dlq_id>.<n> (subjects.Redriven: only the
// redriver may publish there, so only there does the validator honour the
// redrive headers) with the headers Deadletter-Dlq-Id and
// Deadletter-Redrive-Count, an unguessable Nats-Msg-Id (replay.MsgID: it
// names the replay; EVENTS de-duplicates nothing by it) and the
// expectation that its subject, its own, is empty: a retry of a stored
// replay is refused and resolves to the stored copy (publishAlone), so a
// replay is stored once, for as long as EVENTS keeps it. It passes the
// full validator and the idempotent commit again. (Earlier redrivers
// stored replays in REPLAYS, which EVENTS still sources.)
//
// Every change a person makes (drain, cancel, redrive, correction,
// release) is recorded under the caller the server attached to the request
// (access.CallerOf), never under the request's free-text actor, and needs
// the operator role; the redriver creates no consumer (its reads are batch
// direct gets) and answers only requests whose reply subject is a
// requester's inbox. The redriver never writes
// QUARANTINE: each lifecycle step is a conditional append through
// quarantiner.append (redrive_requested before publishing — the CAS that
// keeps two redrivers from replaying one event at once —, corrected,
// replayed, skipped_duplicate, released). Outcomes are observed, never
// assumed: the key committed in IDEMPOTENCY by this replay, or a failure
// the quarantiner appended to the chain.
package redriver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/services/redriver/approvals"
	"github.com/deadletter/deadletter/services/redriver/drains"
	"github.com/deadletter/deadletter/services/redriver/replay"
	"github.com/deadletter/deadletter/services/redriver/single"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/lifecycle"
	"github.com/deadletter/deadletter/shared/notify"
	"github.com/deadletter/deadletter/shared/rebuild"
	"github.com/deadletter/deadletter/shared/retry"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// Version is the redriver's service version (SemVer).
const Version = "0.1.0"

// GCPercent is the garbage-collector target of a redriver process (its
// command passes it to runner.Main; GOGC still wins). A drain's selection
// is the redriver's live heap (40 bytes per selected event, 40 MB at a
// million), so the default 200 of deadletter's processes would let the heap
// reach three times it; Go's 100 keeps a million-event drain under 256 MiB.
const GCPercent = 100

// Service is one redriver instance.
type Service struct {
	cfg Config
	// base is the service's skeleton: its connections, logger, start-up
	// steps and stop (package lifecycle).
	base    lifecycle.Base
	nc      *nats.Conn
	js      jetstream.JetStream
	gate    *gate.Gate
	log     *slog.Logger
	metrics *metrics
	chains  *chains
	// replayer replays events for drains and redrives (package replay).
	replayer *replay.Replayer
	tr       telemetry.Tracer
	// redrives are single redrives, corrections, releases and dismissals
	// (package single).
	redrives *single.Redrives
	// approvalDesk is two-person approval and its policy (package
	// approvals).
	approvalDesk *approvals.Desk
	// drainRunner runs drains, with their canary and pause (package
	// drains).
	drainRunner *drains.Runner
	// alerts publishes the notifications (a paused drain, a pending
	// approval); set by Run, nil (publishing nothing) before.
	alerts *notify.Publisher

	// runCtx is the parent of every drain and background observation;
	// cancelled at shutdown.
	runCtx    context.Context
	runCancel context.CancelFunc
	wg        sync.WaitGroup
}

// New builds a redriver on an open connection; Run starts it.
func New(nc *nats.Conn, cfg Config, log *slog.Logger) (*Service, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.InstanceID == "" {
		cfg.InstanceID = config.InstanceID("redriver")
	}
	g, err := gate.New(cfg.MaxPayload)
	if err != nil {
		return nil, err
	}
	base, err := lifecycle.New(nc, "redriver", cfg.InstanceID, log)
	if err != nil {
		return nil, err
	}
	secret, err := cfg.replaySecret()
	if err != nil {
		return nil, err
	}
	js, log := base.JS, base.Log
	m := newMetrics(cfg.Registerer)
	s := &Service{
		tr:  telemetry.NewTracer(cfg.TracerProvider, cfg.Propagator),
		cfg: cfg, base: base, nc: nc, js: js, gate: g,
		log:     log,
		metrics: m,
	}
	s.replayer = replay.New(replay.Config{JS: js, NC: nc, Log: log, Gate: g, Tracer: s.tr, Secret: secret,
		OutcomeTimeout: cfg.OutcomeTimeout, PollMin: cfg.PollMin, PollMax: cfg.PollMax, Failpoint: cfg.Failpoint,
		Batch: cfg.ReplayBatch, Linger: cfg.ReplayLinger, Streams: cfg.Streams, Metrics: m.replayMetrics()})
	decisions := cfg.Decisions
	if decisions == nil {
		decisions = approval.AuditRegistry{JS: js}
	}
	s.approvalDesk = &approvals.Desk{JS: js, NC: nc, Log: log, Now: cfg.Now, Decisions: decisions,
		Limits:    approval.Limits{PerRequester: cfg.MaxPendingPerRequester, PerChain: cfg.MaxPendingPerChain},
		Failpoint: cfg.Failpoint, Refused: m.approvalsRefused, Alert: func(ev notify.Event) { s.alerts.Publish(ev) }, Exec: executor{s}}
	s.redrives = &single.Redrives{Replayer: s.replayer, Decisions: decisions, Approver: s.approvalDesk, Decider: policyDecider{s.approvalDesk}, Tracer: s.tr, Log: log,
		RedriveWait: cfg.RedriveWait, OutcomeTimeout: cfg.OutcomeTimeout, Outcomes: m.outcomes, Spawn: s.spawn}
	s.drainRunner = drains.New(drains.Config{InstanceID: cfg.InstanceID, DefaultRatePerSecond: cfg.DefaultRatePerSecond,
		DefaultConcurrency: cfg.DefaultConcurrency, MaxConcurrency: cfg.MaxConcurrency, MaxDrains: cfg.MaxDrains, DrainLease: cfg.DrainLease,
		JS: js, Log: log, Replayer: s.replayer, Approvals: s.approvalDesk, Alert: func(ev notify.Event) { s.alerts.Publish(ev) },
		Metrics: drains.Metrics{Outcomes: m.outcomes, Retries: m.retries, InFlight: m.inFlight, Drains: m.drains, Pauses: m.pauses,
			Unrecorded: m.unrecorded}}, &s.wg)
	return s, nil
}

// spawn runs fn in the background under the run context; Run waits for
// it at shutdown.
func (s *Service) spawn(fn func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn(s.runCtx)
	}()
}

// Status returns the live status of a drain running on this instance; ok
// is false when it does not run here.
func (s *Service) Status(id string) (st api.DrainState, ok bool) { return s.drainRunner.Status(id) }

// InstanceID returns the instance's id (the owner of its drains).
func (s *Service) InstanceID() string { return s.cfg.InstanceID }

// Run serves the endpoints and runs drains until ctx is done; it resumes
// the drains DRAINS says are running whose owner is this instance, or whose
// owner's heartbeat is older than DrainLease. At shutdown it stops taking
// requests, interrupts the drains (they stay running in DRAINS, to be
// resumed) and waits for them.
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
		return fmt.Errorf("redriver: %s must be provisioned by an administrator: %w", subjects.QuarantineStream, err)
	}
	s.chains = &chains{reader: chain.NewReader(s.js), app: chain.NewAppender(s.nc, api.QuarantinerAppend).WithTracer(s.tr)}
	s.approvalDesk.Chains = s.chains
	holds := hold.NewStore(s.js, s.log)
	s.redrives.Chains, s.redrives.Holds = s.chains, holds.Active
	idem, err := s.base.Bucket(ctx, "idempotency bucket", subjects.IdempotencyBucket)
	if err != nil {
		return fmt.Errorf("redriver: %w", err)
	}
	drainsKV, err := s.base.Bucket(ctx, "drains bucket", subjects.DrainsBucket)
	if err != nil {
		return fmt.Errorf("redriver: %w", err)
	}
	if err := retry.Provisioning().Do(ctx, s.log, "approvals bucket", s.approvalDesk.Open); err != nil {
		return fmt.Errorf("redriver: %w", err)
	}
	// APPROVALS and DRAINS are indexes of sealed facts: restored from
	// their write-once sources before anything reads them (package
	// rebuild). A failed restore is logged and the start goes on: verify
	// keeps reporting what is wrong.
	for _, b := range []string{subjects.ApprovalsBucket, subjects.DrainsBucket} {
		rep, err := rebuild.Restore(ctx, s.js, b, rebuild.Options{})
		if err != nil {
			s.log.Error("INDEX_RESTORE_FAILED", "bucket", b, "code", api.CodeOf(rebuild.APIError(err)), "err", err)
			continue
		}
		rebuild.LogReport(ctx, s.log, rep)
	}
	ncfg := s.cfg.Notify
	ncfg.OnOutcome = func(k notify.Kind, outcome string) { s.metrics.notifications.WithLabelValues(string(k), outcome).Inc() }
	if s.alerts, err = notify.New(s.nc, "redriver", ncfg, s.log); err != nil {
		return fmt.Errorf("redriver: %w", err)
	}
	defer s.alerts.Close()
	s.runCtx, s.runCancel = context.WithCancel(context.Background())
	defer s.runCancel()
	s.replayer.Chains, s.replayer.Idem, s.replayer.Holds = s.chains, idem, holds.Active
	s.drainRunner.Open(s.runCtx, drainsKV, idem, holds)
	waitReplays := s.replayer.Run(s.runCtx)
	defer func() { s.runCancel(); waitReplays() }()

	// Requests are served by the endpoint layer (strict decoding and
	// validation, bounded time and concurrency), which tracks those in
	// flight: shutdown waits for them before it waits for the drains and
	// observations they started.
	serving, err := s.base.Serve(micro.Config{
		Version:     Version,
		Description: "deadletter redriver: drains and redrives of quarantined events through the validation gate",
	}, endpoint.Options{Context: s.runCtx, MaxInFlight: s.cfg.MaxInFlight,
		Refused: func(_, code string) { s.metrics.refused.WithLabelValues(code).Inc() }})
	if err != nil {
		return err
	}
	defer serving.Stop()
	srv, svc := serving.Server, serving.Service
	// Each endpoint is the endpoint table's row (access.Endpoints): its
	// name, time limit and the roles allowed (caller) come from there.
	// The redrive waits for its replay's outcome up to RedriveWait beyond
	// the table's time limit.
	redrive, err := endpoint.Listed(api.Redrive)
	if err != nil {
		return fmt.Errorf("redriver: micro: %w", err)
	}
	redrive.Timeout += s.cfg.RedriveWait
	if err := serving.Add(
		endpoint.AddListed(srv, svc, api.DrainStart, s.handleDrainStart),
		endpoint.AddListed(srv, svc, api.DrainStatus, s.handleDrainStatus),
		endpoint.AddListed(srv, svc, api.DrainCancel, s.handleDrainCancel),
		endpoint.AddListed(srv, svc, api.DrainResume, s.handleDrainResume),
		endpoint.AddListed(srv, svc, api.DrainList, s.handleDrainList),
		endpoint.Add(srv, svc, redrive, s.handleRedrive),
		endpoint.AddListed(srv, svc, api.Release, s.handleRelease),
		endpoint.AddListed(srv, svc, api.Dismiss, s.handleDismiss),
		endpoint.AddListed(srv, svc, api.ApprovalList, s.handleApprovalList),
		endpoint.AddListed(srv, svc, api.ApprovalGet, s.handleApprovalGet),
		endpoint.AddListed(srv, svc, api.ApprovalApprove, s.handleApprovalApprove),
		endpoint.AddListed(srv, svc, api.ApprovalReject, s.handleApprovalReject),
		endpoint.AddListed(srv, svc, api.ApprovalHoldLift, s.handleApprovalHoldLift),
		endpoint.AddListed(srv, svc, api.PolicyGet, s.handlePolicyGet),
		endpoint.AddListed(srv, svc, api.PolicySet, s.handlePolicySet),
	); err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	s.drainRunner.TakeOver(tctx)
	cancel()
	// Approvals signed but not executed (a crash in between): executed
	// now, in the background (a correction waits for its replay).
	s.approvalDesk.Sweep(s.runCtx, &s.wg, 0)
	// Drain events not in AUDIT yet (the outbox): written now, and until
	// AUDIT takes them.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.drainRunner.RunOutbox(s.runCtx)
	}()
	s.log.Info("redriver started", "default_rate", s.cfg.DefaultRatePerSecond, "default_concurrency", s.cfg.DefaultConcurrency)
	t := time.NewTicker(s.cfg.DrainLease)
	defer t.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-t.C:
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			s.drainRunner.TakeOver(tctx)
			cancel()
			s.approvalDesk.Sweep(s.runCtx, &s.wg, approvals.ApproveTimeout+time.Minute)
		}
	}
	serving.Close()
	s.runCancel()
	serving.Wait() // no request in flight: none can start a drain or an observation now
	s.wg.Wait()    // the drains and observations

	s.log.Info("redriver stopped")
	return nil
}

// handleDrainStart starts a drain, or answers a dry run's plan.
func (s *Service) handleDrainStart(ctx context.Context, m endpoint.Meta, req api.DrainStartRequest) (api.DrainStartReply, error) {
	id, err := s.caller(m, req.Actor)
	if err != nil {
		return api.DrainStartReply{}, err
	}
	return s.drainRunner.Start(ctx, id, m.Body, req)
}

// handleDrainStatus answers a drain's status (any person role but a
// publisher).
func (s *Service) handleDrainStatus(ctx context.Context, m endpoint.Meta, req api.DrainIDRequest) (api.DrainState, error) {
	if err := drains.CheckID(req.DrainID); err != nil {
		return api.DrainState{}, err
	}
	if _, err := s.caller(m, ""); err != nil {
		return api.DrainState{}, err
	}
	return s.drainRunner.State(ctx, req.DrainID)
}

// handleDrainCancel cancels a drain.
func (s *Service) handleDrainCancel(ctx context.Context, m endpoint.Meta, req api.DrainIDRequest) (api.DrainState, error) {
	if err := drains.CheckID(req.DrainID); err != nil {
		return api.DrainState{}, err
	}
	who, err := s.caller(m, "")
	if err != nil {
		return api.DrainState{}, err
	}
	return s.drainRunner.Cancel(ctx, who, req.DrainID)
}

// handleDrainResume continues a paused drain (INVALID_TRANSITION when it
// is not paused).
func (s *Service) handleDrainResume(ctx context.Context, m endpoint.Meta, req api.DrainResumeRequest) (api.DrainState, error) {
	if err := drains.CheckID(req.DrainID); err != nil {
		return api.DrainState{}, err
	}
	who, err := s.caller(m, "")
	if err != nil {
		return api.DrainState{}, err
	}
	return s.drainRunner.Resume(ctx, who, req)
}

// drainListRequest is drain.list's request: none (an empty body or {}).
type drainListRequest struct{}

// handleDrainList lists the drains in DRAINS (any person role but a
// publisher).
func (s *Service) handleDrainList(ctx context.Context, m endpoint.Meta, _ drainListRequest) (api.DrainListReply, error) {
	if _, err := s.caller(m, ""); err != nil {
		return api.DrainListReply{}, err
	}
	return s.drainRunner.List(ctx)
}

// Package redriver replays quarantined events back through the validation
// gate, deliberately and safely: drains (filtered, rate-limited, bounded in
// concurrency, ordered per business key, durable, resumable) and single
// redrives (optionally with a corrected payload), plus the release of
// poison events, as a NATS micro service (drain.start, drain.status,
// drain.cancel, drain.resume, drain.list, redrive, release), and the
// two-person approval of the actions its policy names (approval.list,
// approval.get, approval.approve, approval.reject, policy.get, policy.set:
// approval.go).
//
// A replay re-publishes the event's effective payload straight into EVENTS
// on redriven.<domain>.<type>.<dlq_id>.<n> (subjects.Redriven: only the
// redriver may publish there, so only there does the validator honour the
// redrive headers) with the headers Deadletter-Dlq-Id and
// Deadletter-Redrive-Count, an unguessable Nats-Msg-Id (replayMsgID: it
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
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/services/redriver/approvals"
	"github.com/deadletter/deadletter/services/redriver/outbox"
	"github.com/deadletter/deadletter/services/redriver/replay"
	"github.com/deadletter/deadletter/services/redriver/single"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/notify"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/retry"
	"github.com/deadletter/deadletter/shared/streams"
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
	cfg      Config
	nc       *nats.Conn
	js       jetstream.JetStream
	gate     *gate.Gate
	checkers map[string]gate.Checker
	log      *slog.Logger
	metrics  *metrics
	chains   *chains
	idem     jetstream.KeyValue
	drains   jetstream.KeyValue
	// replayer replays events for drains and redrives (package replay).
	replayer *replay.Replayer
	tr       telemetry.Tracer
	// redrives are single redrives, corrections, releases and dismissals
	// (package single).
	redrives *single.Redrives
	// approvalDesk is two-person approval and its policy (package
	// approvals).
	approvalDesk *approvals.Desk
	// holdStore reads the active legal holds (holds.go).
	holdStore *hold.Store
	// outbox is the loop of drain events not in AUDIT yet (outbox.go,
	// package outbox).
	outbox *outbox.Loop
	// alerts publishes the notifications (a paused drain, a pending
	// approval); set by Run, nil (publishing nothing) before.
	alerts *notify.Publisher

	// runCtx is the parent of every drain and background observation;
	// cancelled at shutdown.
	runCtx    context.Context
	runCancel context.CancelFunc
	wg        sync.WaitGroup

	mu      sync.Mutex
	running map[string]*drainRun
	// startMu serializes drain starts (their overlap check and launch).
	startMu sync.Mutex
}

// New builds a redriver on an open connection; Run starts it.
func New(nc *nats.Conn, cfg Config, log *slog.Logger) (*Service, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.InstanceID == "" {
		cfg.InstanceID = config.InstanceID("redriver")
	}
	g, err := gate.New(cfg.MaxPayload)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("redriver: %w", err)
	}
	secret, err := cfg.replaySecret()
	if err != nil {
		return nil, err
	}
	signer, ephemeral, err := cfg.approvalSigner()
	if err != nil {
		return nil, err
	}
	checkers := map[string]gate.Checker{}
	for _, c := range gate.Checkers() {
		checkers[c.Domain()] = c
	}
	log = log.With("service", "redriver", "instance", cfg.InstanceID)
	m := newMetrics(cfg.Registerer)
	s := &Service{
		tr:  telemetry.NewTracer(cfg.TracerProvider, cfg.Propagator),
		cfg: cfg, nc: nc, js: js, gate: g, checkers: checkers,
		log:     log,
		metrics: m,
		running: map[string]*drainRun{},
		outbox:  outbox.NewLoop(),
	}
	s.replayer = replay.New(replay.Config{JS: js, NC: nc, Log: log, Gate: g, Tracer: s.tr, Secret: secret,
		OutcomeTimeout: cfg.OutcomeTimeout, PollMin: cfg.PollMin, PollMax: cfg.PollMax, Failpoint: cfg.Failpoint,
		Batch: cfg.ReplayBatch, Linger: cfg.ReplayLinger, Streams: cfg.Streams, Metrics: m.replayMetrics()})
	s.approvalDesk = &approvals.Desk{JS: js, NC: nc, Log: log, Now: cfg.Now, Signer: signer, Ephemeral: ephemeral,
		ReauthURLs: cfg.ReauthURLs, ReauthOptions: cfg.ReauthOptions,
		Limits:    approval.Limits{PerRequester: cfg.MaxPendingPerRequester, PerChain: cfg.MaxPendingPerChain},
		Failpoint: cfg.Failpoint, Refused: m.approvalsRefused, Alert: func(ev notify.Event) { s.alerts.Publish(ev) }, Exec: executor{s}}
	s.redrives = &single.Redrives{Replayer: s.replayer, Approver: s.approvalDesk, Tracer: s.tr, Log: log,
		RedriveWait: cfg.RedriveWait, OutcomeTimeout: cfg.OutcomeTimeout, Outcomes: m.outcomes, Spawn: s.spawn}
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
func (s *Service) Status(id string) (st api.DrainState, ok bool) {
	s.mu.Lock()
	d, ok := s.running[id]
	s.mu.Unlock()
	if !ok {
		return api.DrainState{}, false
	}
	return d.snapshot(), true
}

// InstanceID returns the instance's id (the owner of its drains).
func (s *Service) InstanceID() string { return s.cfg.InstanceID }

// Run serves the endpoints and runs drains until ctx is done; it resumes
// the drains DRAINS says are running whose owner is this instance, or whose
// owner's heartbeat is older than DrainLease. At shutdown it stops taking
// requests, interrupts the drains (they stay running in DRAINS, to be
// resumed) and waits for them.
func (s *Service) Run(ctx context.Context) (err error) {
	// Stopped during start-up: a clean stop.
	defer func() {
		if errors.Is(err, retry.ErrStopped) {
			err = nil
		}
	}()
	// Set-up waits for the cluster (a leader election, a server not up
	// yet, a consumer not provisioned yet) until ctx ends: package retry.
	if s.cfg.Provision {
		if err := retry.Provisioning().Do(ctx, s.log, "provision", func(ctx context.Context) error {
			return streams.EnsureCore(ctx, s.js, s.cfg.Streams)
		}); err != nil {
			return fmt.Errorf("%s: %w", "redriver", err)
		}
	}
	_, err = retry.Value(ctx, s.log, "QUARANTINE stream", func(ctx context.Context) (jetstream.Stream, error) {
		return s.js.Stream(ctx, subjects.QuarantineStream)
	})
	if err != nil {
		return fmt.Errorf("redriver: %s must be provisioned by an administrator: %w", subjects.QuarantineStream, err)
	}
	s.chains = &chains{reader: chain.NewReader(s.js), nc: s.nc, tr: s.tr}
	s.approvalDesk.Chains = s.chains
	s.holdStore = hold.NewStore(s.js, s.log)
	s.redrives.Chains, s.redrives.Holds = s.chains, s.holdStore.Active
	s.idem, err = retry.Value(ctx, s.log, "idempotency bucket", func(ctx context.Context) (jetstream.KeyValue, error) {
		return s.js.KeyValue(ctx, subjects.IdempotencyBucket)
	})
	if err != nil {
		return fmt.Errorf("redriver: %w", err)
	}
	s.drains, err = retry.Value(ctx, s.log, "drains bucket", func(ctx context.Context) (jetstream.KeyValue, error) {
		return s.js.KeyValue(ctx, subjects.DrainsBucket)
	})
	if err != nil {
		return fmt.Errorf("redriver: %w", err)
	}
	if err := retry.Provisioning().Do(ctx, s.log, "approvals bucket", s.approvalDesk.Open); err != nil {
		return fmt.Errorf("redriver: %w", err)
	}
	ncfg := s.cfg.Notify
	ncfg.OnOutcome = func(k notify.Kind, outcome string) { s.metrics.notifications.WithLabelValues(string(k), outcome).Inc() }
	if s.alerts, err = notify.New(s.nc, "redriver", ncfg, s.log); err != nil {
		return fmt.Errorf("redriver: %w", err)
	}
	defer s.alerts.Close()
	s.runCtx, s.runCancel = context.WithCancel(context.Background())
	defer s.runCancel()
	s.replayer.Chains, s.replayer.Idem, s.replayer.Holds = s.chains, s.idem, s.holdStore.Active
	waitReplays := s.replayer.Run(s.runCtx)
	defer func() { s.runCancel(); waitReplays() }()

	svc, err := micro.AddService(s.nc, micro.Config{
		Name:        "redriver",
		Version:     Version,
		Description: "deadletter redriver: drains and redrives of quarantined events through the validation gate",
	})
	if err != nil {
		return fmt.Errorf("redriver: micro: %w", err)
	}
	stopSvc := sync.OnceFunc(func() { _ = svc.Stop() })
	defer stopSvc()
	// Requests are served by the endpoint layer (strict decoding and
	// validation, bounded time and concurrency), which tracks those in
	// flight: shutdown waits for them before it waits for the drains and
	// observations they started.
	srv := endpoint.NewServer(s.nc, endpoint.Options{Context: s.runCtx, MaxInFlight: s.cfg.MaxInFlight, Log: s.log,
		Refused: func(_, code string) { s.metrics.refused.WithLabelValues(code).Inc() }})
	defer srv.Wait()
	// Each endpoint is the endpoint table's row (access.Endpoints): its
	// name, time limit and the roles allowed (caller) come from there.
	// The redrive waits for its replay's outcome up to RedriveWait beyond
	// the table's time limit.
	redrive, err := endpoint.Listed(api.Redrive)
	if err != nil {
		return fmt.Errorf("redriver: micro: %w", err)
	}
	redrive.Timeout += s.cfg.RedriveWait
	for _, err := range []error{
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
	} {
		if err != nil {
			return fmt.Errorf("redriver: micro: %w", err)
		}
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	s.takeOver(tctx)
	cancel()
	// Approvals signed but not executed (a crash in between): executed
	// now, in the background (a correction waits for its replay).
	s.approvalDesk.Sweep(s.runCtx, &s.wg, 0)
	// Drain events not in AUDIT yet (the outbox): written now, and until
	// AUDIT takes them.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.runOutbox(s.runCtx)
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
			s.takeOver(tctx)
			cancel()
			s.approvalDesk.Sweep(s.runCtx, &s.wg, approvals.ApproveTimeout+time.Minute)
		}
	}
	stopSvc()
	s.runCancel()
	srv.Wait()  // no request in flight: none can start a drain or an observation now
	s.wg.Wait() // the drains and observations

	s.log.Info("redriver stopped")
	return nil
}

// takeOver resumes the drains left running by this instance or by an
// owner whose heartbeat is older than DrainLease (CAS on the revision, so
// one instance wins).
func (s *Service) takeOver(ctx context.Context) {
	drains, err := s.listDrains(ctx)
	if err != nil {
		s.log.Warn("drains not listed", "err", err)
		return
	}
	for _, d := range drains {
		s.mu.Lock()
		_, local := s.running[d.key]
		full := len(s.running) >= s.cfg.MaxDrains
		s.mu.Unlock()
		if local || full || d.err != nil {
			continue
		}
		st := d.state
		if st.Status != api.DrainRunning && st.Status != api.DrainSelecting {
			continue
		}
		if st.Owner != s.cfg.InstanceID && time.Since(st.Heartbeat) < s.cfg.DrainLease {
			continue
		}
		st.Resumed++
		st.Owner, st.Heartbeat = s.cfg.InstanceID, time.Now().UTC()
		b, _ := json.Marshal(st)
		rev, err := s.drains.Update(ctx, d.key, b, d.rev)
		if err != nil {
			continue // another instance took it
		}
		s.log.Info("DRAIN_RESUMED", "drain_id", d.key, "status", st.Status)
		s.start(s.newRun(st, rev), true)
	}
}

// start runs a drain in the background.
func (s *Service) start(d *drainRun, resumed bool) {
	s.mu.Lock()
	s.running[d.id] = d
	s.mu.Unlock()
	s.wg.Add(1)
	go s.execute(d, resumed)
}

// validateStart checks what a drain.start request's own Validate cannot:
// the instance's concurrency ceiling and the dlq ids' domains.
func (s *Service) validateStart(req *api.DrainStartRequest) error {
	f := &req.Filter
	for i, id := range f.DLQIDs {
		dom, err := domainOfID(id)
		if err != nil {
			return api.BadField(fmt.Sprintf("filter.dlq_ids[%d]", i), "%v", err)
		}
		if f.Domain != "" && dom != f.Domain {
			return api.BadField(fmt.Sprintf("filter.dlq_ids[%d]", i), "not in filter.domain")
		}
	}
	if req.MaxConcurrency > s.cfg.MaxConcurrency {
		return api.BadField("max_concurrency", "must be 0..%d", s.cfg.MaxConcurrency)
	}
	return nil
}

// handleDrainStart starts a drain, or answers a dry run's plan.
func (s *Service) handleDrainStart(ctx context.Context, m endpoint.Meta, req api.DrainStartRequest) (api.DrainStartReply, error) {
	id, err := s.caller(m, req.Actor)
	if err != nil {
		return api.DrainStartReply{}, err
	}
	if err := s.validateStart(&req); err != nil {
		return api.DrainStartReply{}, err
	}
	if req.DryRun {
		plan, err := s.plan(ctx, req, true)
		if err != nil {
			return api.DrainStartReply{}, api.Wrap(api.ErrUnavailable, err, err.Error())
		}
		return api.DrainStartReply{Status: "dry_run", Plan: plan}, nil
	}
	// One start at a time on this instance: two overlapping drains
	// started together are not both let through (across instances the
	// redrive_requested CAS still replays each event once).
	s.startMu.Lock()
	defer s.startMu.Unlock()
	did := newDrainID(time.Now())
	if err := s.refuseOverlap(ctx, req, did); err != nil {
		return api.DrainStartReply{}, err
	}
	if err := s.drainApproval(ctx, id, m, req); err != nil {
		return api.DrainStartReply{}, err
	}
	// The drain and its records name the caller, never the request's
	// free-text actor.
	req.Actor = id.User
	did, err = s.launchDrain(ctx, req, id, did)
	if err != nil {
		return api.DrainStartReply{}, err
	}
	return api.DrainStartReply{DrainID: did, Status: api.DrainSelecting}, nil
}

// drainApproval asks whether drain req, asked for by who, needs approval
// (nil when not; APPROVAL_REQUIRED with the pending approval else). The
// selection is counted (a plan) only when the policy has a rule on it.
func (s *Service) drainApproval(ctx context.Context, who access.Identity, m endpoint.Meta, req api.DrainStartRequest) error {
	p, err := s.approvalDesk.Policy(ctx)
	if err != nil {
		return err
	}
	a := approval.Action{Kind: api.ActionDrain, IgnoreOrder: req.IgnoreOrder}
	if p.Policy.DrainMaxSelected > 0 || p.Policy.DrainValidation {
		plan, err := s.plan(ctx, req, false)
		if err != nil {
			return api.Wrap(api.ErrUnavailable, err, err.Error())
		}
		a.Selected, a.IncludesValidation = plan.Selected, plan.ByClass[string(record.ClassValidation)] > 0
	}
	return s.approvalDesk.Require(ctx, who, a, approval.Request{Domain: req.Filter.Domain, Body: m.Body, Reason: req.Reason})
}

// launchDrain stores drain req as drainID, started by who, and runs it. A
// drain already stored under drainID (an approved drain executed again) is
// not started twice: its id is returned.
func (s *Service) launchDrain(ctx context.Context, req api.DrainStartRequest, who access.Identity, drainID string) (string, error) {
	s.mu.Lock()
	n := len(s.running)
	s.mu.Unlock()
	if n >= s.cfg.MaxDrains {
		return "", api.Errorf(api.ErrTooManyDrains, "this instance already runs %d drains", n)
	}
	now := time.Now().UTC()
	// The guard in force is stored with the request: the default one
	// unless the request names its own or turns it off.
	req = req.WithDefaultGuard()
	st := api.DrainState{
		DrainID: drainID, Status: api.DrainSelecting, Request: req,
		Owner: s.cfg.InstanceID, Heartbeat: now, StartedAt: now, StartedBy: who.User,
	}
	b, _ := json.Marshal(st)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rev, err := s.drains.Create(cctx, st.DrainID, b)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return st.DrainID, nil
	}
	if err != nil {
		return "", api.Wrap(api.ErrUnavailable, err, "drain not stored: "+err.Error())
	}
	s.log.Info("DRAIN_STARTED", "drain_id", st.DrainID, "actor", who.User, "role", string(who.Role))
	s.start(s.newRun(st, rev), false)
	return st.DrainID, nil
}

// statusOf returns a drain's status: live when it runs here, else stored.
func (s *Service) statusOf(ctx context.Context, id string) (api.DrainState, uint64, error) {
	s.mu.Lock()
	d, ok := s.running[id]
	s.mu.Unlock()
	if ok {
		return d.snapshot(), 0, nil
	}
	e, err := s.drains.Get(ctx, id)
	if err != nil {
		return api.DrainState{}, 0, err
	}
	var st api.DrainState
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return api.DrainState{}, 0, err
	}
	st.Remaining = max(0, st.Selected-st.Done())
	return st.WithOutcome(), e.Revision(), nil
}

// checkDrainID refuses a drain id request without a well-formed id.
func checkDrainID(req api.DrainIDRequest) error {
	if !validDrainID(req.DrainID) {
		return api.BadField("drain_id", "is required: letters, digits, '-' and '_', at most 64")
	}
	return nil
}

// storeError classifies a DRAINS read error.
func storeError(err error) error {
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return api.Wrap(api.ErrNotFound, err, "no drain has this id")
	}
	return api.Wrap(api.ErrUnavailable, err, err.Error())
}

// handleDrainStatus answers a drain's status (any person role but a
// publisher).
func (s *Service) handleDrainStatus(ctx context.Context, m endpoint.Meta, req api.DrainIDRequest) (api.DrainState, error) {
	if err := checkDrainID(req); err != nil {
		return api.DrainState{}, err
	}
	if _, err := s.caller(m, ""); err != nil {
		return api.DrainState{}, err
	}
	st, _, err := s.statusOf(ctx, req.DrainID)
	if err != nil {
		return api.DrainState{}, storeError(err)
	}
	return st, nil
}

// handleDrainCancel cancels a drain: at once when it runs here, else by a
// CAS on its stored status that its owner sees at its next checkpoint.
func (s *Service) handleDrainCancel(ctx context.Context, m endpoint.Meta, req api.DrainIDRequest) (api.DrainState, error) {
	if err := checkDrainID(req); err != nil {
		return api.DrainState{}, err
	}
	who, err := s.caller(m, "")
	if err != nil {
		return api.DrainState{}, err
	}
	id := req.DrainID
	s.mu.Lock()
	d, local := s.running[id]
	s.mu.Unlock()
	if local {
		ev := personEvent(api.ActionCancelled, who, "")
		first := false
		d.setStatus(func(st *api.DrainState) {
			if st.CancelledBy == "" {
				st.CancelledBy, first = who.User, true
				st.Events = append(st.Events, ev)
			}
		})
		d.userCancel()
		select {
		case <-d.done:
		case <-ctx.Done():
		}
		snap := d.snapshot()
		if first && s.auditDrain(id, ev, len(snap.Events)) {
			outbox.ClearMark(&snap, ev, len(snap.Events))
		}
		return snap, nil
	}
	for range 3 {
		st, rev, err := s.statusOf(ctx, id)
		if err != nil {
			return api.DrainState{}, storeError(err)
		}
		switch st.Status {
		case api.DrainCancelled:
			return st, nil
		case api.DrainCompleted, api.DrainFailed:
			return api.DrainState{}, api.Errorf(api.ErrInvalidTransition, "the drain already finished: %s", st.Status)
		}
		ev := personEvent(api.ActionCancelled, who, "")
		st.Status, st.FinishedAt, st.CancelledBy = api.DrainCancelled, &ev.At, who.User
		st.Events = append(st.Events, ev)
		b, _ := json.Marshal(st)
		if _, err := s.drains.Update(ctx, id, b, rev); err == nil {
			s.log.Info("DRAIN_CANCELLED", "drain_id", id, "actor", who.User)
			if s.auditDrain(id, ev, len(st.Events)) {
				outbox.ClearMark(&st, ev, len(st.Events))
			}
			return st, nil
		}
	}
	return api.DrainState{}, api.Errorf(api.ErrConflict, "the drain's status kept changing; retry")
}

// handleDrainResume continues a paused drain: its stored status becomes
// running, owned by this instance, which runs it as a resumed drain (its
// counts are taken from the chains, each event replayed at most once by
// the drain); the resume is an event of the drain and an action in AUDIT.
// A drain that is not paused is refused (INVALID_TRANSITION).
func (s *Service) handleDrainResume(ctx context.Context, m endpoint.Meta, req api.DrainResumeRequest) (api.DrainState, error) {
	if err := checkDrainID(api.DrainIDRequest{DrainID: req.DrainID}); err != nil {
		return api.DrainState{}, err
	}
	who, err := s.caller(m, "")
	if err != nil {
		return api.DrainState{}, err
	}
	id := req.DrainID
	s.mu.Lock()
	d, local := s.running[id]
	s.mu.Unlock()
	if local {
		if !d.paused.Load() || d.userCancelled.Load() {
			return api.DrainState{}, api.Wrap(api.ErrInvalidTransition, errNotPaused, "the drain is not paused: "+d.snapshot().Status)
		}
		// Paused here: its replays in flight finish first.
		select {
		case <-d.done:
		case <-ctx.Done():
			return api.DrainState{}, api.Errorf(api.ErrUnavailable, "the drain is still pausing; retry")
		}
	}
	for range 3 {
		st, rev, err := s.statusOf(ctx, id)
		if err != nil {
			return api.DrainState{}, storeError(err)
		}
		if st.Status != api.DrainPaused {
			return api.DrainState{}, api.Wrap(api.ErrInvalidTransition, errNotPaused, "the drain is not paused: "+st.Status)
		}
		s.mu.Lock()
		n := len(s.running)
		s.mu.Unlock()
		if n >= s.cfg.MaxDrains {
			return api.DrainState{}, api.Errorf(api.ErrTooManyDrains, "this instance already runs %d drains", n)
		}
		ev := personEvent(api.ActionResumed, who, req.Reason)
		st.Status, st.Owner, st.Heartbeat = api.DrainRunning, s.cfg.InstanceID, ev.At
		st.Events = append(st.Events, ev)
		b, _ := json.Marshal(st)
		nrev, err := s.drains.Update(ctx, id, b, rev)
		if err != nil {
			continue
		}
		s.log.Info("DRAIN_RESUMED_BY", "drain_id", id, "actor", who.User, "role", string(who.Role))
		s.start(s.newRun(st, nrev), true)
		if s.auditDrain(id, ev, len(st.Events)) {
			outbox.ClearMark(&st, ev, len(st.Events))
		}
		return st, nil
	}
	return api.DrainState{}, api.Errorf(api.ErrConflict, "the drain's status kept changing; retry")
}

// drainListRequest is drain.list's request: none (an empty body or {}).
type drainListRequest struct{}

// handleDrainList lists the drains in DRAINS (any person role but a
// publisher).
func (s *Service) handleDrainList(ctx context.Context, m endpoint.Meta, _ drainListRequest) (api.DrainListReply, error) {
	if _, err := s.caller(m, ""); err != nil {
		return api.DrainListReply{}, err
	}
	out := api.DrainListReply{Drains: []api.DrainState{}}
	drains, err := s.listDrains(ctx)
	if err != nil {
		return api.DrainListReply{}, api.Wrap(api.ErrUnavailable, err, err.Error())
	}
	for _, d := range drains {
		s.mu.Lock()
		run, local := s.running[d.key]
		s.mu.Unlock()
		switch {
		case local:
			out.Drains = append(out.Drains, run.snapshot())
		case d.err == nil:
			st := d.state
			st.Remaining = max(0, st.Selected-st.Done())
			out.Drains = append(out.Drains, st.WithOutcome())
		}
	}
	sort.Slice(out.Drains, func(i, j int) bool { return out.Drains[i].StartedAt.Before(out.Drains[j].StartedAt) })
	return out, nil
}

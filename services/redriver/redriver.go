// Package redriver replays quarantined events back through the validation
// gate, deliberately and safely: drains (filtered, rate-limited, bounded in
// concurrency, ordered per business key, durable, resumable) and single
// redrives (optionally with a corrected payload), plus the release of
// poison events, as a NATS micro service (drain.start, drain.status,
// drain.cancel, drain.list, redrive, release).
//
// A replay re-publishes the event's effective payload to
// replay.<domain>.<type> (subjects.Replay: only the redriver may publish
// there, so only there does the validator honour the redrive headers) with
// the headers Deadletter-Dlq-Id and Deadletter-Redrive-Count and an
// unguessable Nats-Msg-Id (replayMsgID). The replay is stored in REPLAYS,
// which de-duplicates its retries by that id, and reaches EVENTS (which
// sources REPLAYS and honours no Nats-Msg-Id) with its subject and
// headers, so it passes the full validator and the idempotent commit
// again.
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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/record"
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
	notify   *notifier
	tr       telemetry.Tracer
	// replaySecret keys the replays' message ids (replayMsgID).
	replaySecret []byte

	// runCtx is the parent of every drain and background observation;
	// cancelled at shutdown.
	runCtx    context.Context
	runCancel context.CancelFunc
	wg        sync.WaitGroup

	mu      sync.Mutex
	running map[string]*drainRun
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
	checkers := map[string]gate.Checker{}
	for _, c := range gate.Checkers() {
		checkers[c.Domain()] = c
	}
	return &Service{
		tr:  telemetry.NewTracer(cfg.TracerProvider, cfg.Propagator),
		cfg: cfg, nc: nc, js: js, gate: g, checkers: checkers,
		log:     log.With("service", "redriver", "instance", cfg.InstanceID),
		metrics: newMetrics(cfg.Registerer),
		running: map[string]*drainRun{},
		notify:  newNotifier(nc), replaySecret: secret,
	}, nil
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
func (s *Service) Run(ctx context.Context) error {
	setup, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if s.cfg.Provision {
		if err := streams.EnsureCore(setup, s.js, s.cfg.Streams); err != nil {
			return err
		}
	}
	if _, err := s.js.Stream(setup, subjects.QuarantineStream); err != nil {
		return fmt.Errorf("redriver: %s must be provisioned by an administrator: %w", subjects.QuarantineStream, err)
	}
	s.chains = &chains{reader: chain.NewReader(s.js), nc: s.nc, tr: s.tr}
	var err error
	if s.idem, err = s.js.KeyValue(setup, subjects.IdempotencyBucket); err != nil {
		return fmt.Errorf("redriver: %w", err)
	}
	if s.drains, err = s.js.KeyValue(setup, subjects.DrainsBucket); err != nil {
		return fmt.Errorf("redriver: %w", err)
	}
	s.runCtx, s.runCancel = context.WithCancel(context.Background())
	defer s.runCancel()

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
	for _, e := range []struct {
		name, subject, desc string
		h                   micro.HandlerFunc
	}{
		{"drain-start", api.DrainStart, "start a drain (filter, rate_per_second, burst, max_concurrency, dry_run)", s.handleDrainStart},
		{"drain-status", api.DrainStatus, "a drain's progress", s.handleDrainStatus},
		{"drain-cancel", api.DrainCancel, "cancel a drain", s.handleDrainCancel},
		{"drain-list", api.DrainList, "list drains", s.handleDrainList},
		{"redrive", api.Redrive, "replay one event, optionally with a corrected payload", s.handleRedrive},
		{"release", api.Release, "release a poison event back to redrivable", s.handleRelease},
	} {
		if err := svc.AddEndpoint(e.name, s.guard(e.h), micro.WithEndpointSubject(e.subject),
			micro.WithEndpointMetadata(map[string]string{"description": e.desc})); err != nil {
			return fmt.Errorf("redriver: micro endpoint %s: %w", e.name, err)
		}
	}
	s.takeOver(setup)
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
		}
	}
	stopSvc()
	s.runCancel()
	s.wg.Wait()
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

// decodeStrict decodes exactly one JSON value into v, refusing unknown
// fields and trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

// badRequest answers a request that could not be decoded.
func badRequest(r micro.Request, err error) {
	_ = r.Error(api.ErrBadRequest, "bad request: "+err.Error(), nil)
}

// validateStart checks a drain.start request.
func (s *Service) validateStart(req *api.DrainStartRequest) error {
	f := &req.Filter
	if f.Domain != "" && !slices.Contains(s.gate.Domains(), f.Domain) && f.Domain != record.UnknownDomain {
		return fmt.Errorf("unknown domain %q", f.Domain)
	}
	for _, c := range f.Classes {
		switch record.Class(c) {
		case record.ClassExhausted, record.ClassValidation:
		case record.ClassPoison:
			return errors.New("poison events are never drained: release them first")
		default:
			return fmt.Errorf("unknown class %q (exhausted or validation)", c)
		}
	}
	if len(f.ErrorCodes) > 100 {
		return errors.New("at most 100 error codes")
	}
	if f.Since != nil && f.Until != nil && !f.Since.Before(*f.Until) {
		return errors.New("since must be before until")
	}
	if len(f.DLQIDs) > 10000 {
		return errors.New("at most 10000 dlq ids")
	}
	for _, id := range f.DLQIDs {
		dom, err := domainOfID(id)
		if err != nil {
			return fmt.Errorf("dlq id %.80q: %w", id, err)
		}
		if f.Domain != "" && dom != f.Domain {
			return fmt.Errorf("dlq id %.80q is not in domain %s", id, f.Domain)
		}
	}
	switch {
	case f.Limit < 0:
		return errors.New("limit must not be negative")
	case req.RatePerSecond != nil && *req.RatePerSecond < 0:
		return errors.New("rate_per_second must not be negative (0: no ceiling)")
	case req.RatePerSecond != nil && *req.RatePerSecond > 1e6:
		return errors.New("rate_per_second is at most 1000000 (0: no ceiling)")
	case req.Burst < 0 || req.Burst > 100000:
		return errors.New("burst must be 0..100000")
	case req.MaxConcurrency < 0 || req.MaxConcurrency > s.cfg.MaxConcurrency:
		return fmt.Errorf("max_concurrency must be 0..%d", s.cfg.MaxConcurrency)
	case len(req.Actor) > 256 || len(req.Reason) > 2048:
		return errors.New("actor or reason too long")
	}
	return nil
}

// handleDrainStart starts a drain, or answers a dry run's plan.
func (s *Service) handleDrainStart(r micro.Request) {
	var req api.DrainStartRequest
	if err := decodeStrict(r.Data(), &req); err != nil {
		badRequest(r, err)
		return
	}
	id, ok := s.caller(r, req.Actor, changeRoles)
	if !ok {
		return
	}
	if err := s.validateStart(&req); err != nil {
		badRequest(r, err)
		return
	}
	if req.DryRun {
		r := endpoint.Detach(s.nc, r) // answered after this handler returns
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ctx, cancel := context.WithTimeout(s.runCtx, 5*time.Minute)
			defer cancel()
			plan, err := s.plan(ctx, req.Filter)
			if err != nil {
				_ = r.Error(api.ErrUnavailable, err.Error(), nil)
				return
			}
			_ = r.RespondJSON(api.DrainStartReply{Status: "dry_run", Plan: plan})
		}()
		return
	}
	s.mu.Lock()
	n := len(s.running)
	s.mu.Unlock()
	if n >= s.cfg.MaxDrains {
		_ = r.Error(api.ErrTooManyDrains, fmt.Sprintf("this instance already runs %d drains", n), nil)
		return
	}
	// The drain and its records name the caller, never the request's
	// free-text actor.
	req.Actor = id.User
	now := time.Now().UTC()
	st := api.DrainState{
		DrainID: newDrainID(now), Status: api.DrainSelecting, Request: req,
		Owner: s.cfg.InstanceID, Heartbeat: now, StartedAt: now, StartedBy: id.User,
	}
	b, _ := json.Marshal(st)
	ctx, cancel := context.WithTimeout(s.runCtx, 5*time.Second)
	defer cancel()
	rev, err := s.drains.Create(ctx, st.DrainID, b)
	if err != nil {
		_ = r.Error(api.ErrUnavailable, "drain not stored: "+err.Error(), nil)
		return
	}
	s.log.Info("DRAIN_STARTED", "drain_id", st.DrainID, "actor", id.User, "role", string(id.Role))
	s.start(s.newRun(st, rev), false)
	_ = r.RespondJSON(api.DrainStartReply{DrainID: st.DrainID, Status: st.Status})
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
	return st, e.Revision(), nil
}

// drainIDOf decodes a drain id request.
func drainIDOf(r micro.Request) (string, bool) {
	var req api.DrainIDRequest
	if err := decodeStrict(r.Data(), &req); err != nil {
		badRequest(r, err)
		return "", false
	}
	if !validDrainID(req.DrainID) {
		_ = r.Error(api.ErrBadRequest, "drain_id is required: letters, digits, '-' and '_', at most 64", nil)
		return "", false
	}
	return req.DrainID, true
}

// replyStoreError answers a DRAINS read error.
func replyStoreError(r micro.Request, err error) {
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		_ = r.Error(api.ErrNotFound, "no drain has this id", nil)
		return
	}
	_ = r.Error(api.ErrUnavailable, err.Error(), nil)
}

// handleDrainStatus answers a drain's status (any person role but a
// publisher).
func (s *Service) handleDrainStatus(r micro.Request) {
	id, ok := drainIDOf(r)
	if !ok {
		return
	}
	if _, ok := s.caller(r, "", readRoles); !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, _, err := s.statusOf(ctx, id)
	if err != nil {
		replyStoreError(r, err)
		return
	}
	_ = r.RespondJSON(st)
}

// handleDrainCancel cancels a drain: at once when it runs here, else by a
// CAS on its stored status that its owner sees at its next checkpoint.
func (s *Service) handleDrainCancel(r micro.Request) {
	id, ok := drainIDOf(r)
	if !ok {
		return
	}
	who, ok := s.caller(r, "", changeRoles)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.mu.Lock()
	d, local := s.running[id]
	s.mu.Unlock()
	if local {
		d.setStatus(func(st *api.DrainState) {
			if st.CancelledBy == "" {
				st.CancelledBy = who.User
			}
		})
		d.userCancel()
		select {
		case <-d.done:
		case <-ctx.Done():
		}
		_ = r.RespondJSON(d.snapshot())
		return
	}
	for range 3 {
		st, rev, err := s.statusOf(ctx, id)
		if err != nil {
			replyStoreError(r, err)
			return
		}
		switch st.Status {
		case api.DrainCancelled:
			_ = r.RespondJSON(st)
			return
		case api.DrainCompleted, api.DrainFailed:
			_ = r.Error(api.ErrInvalidTransition, "the drain already finished: "+st.Status, nil)
			return
		}
		now := time.Now().UTC()
		st.Status, st.FinishedAt, st.CancelledBy = api.DrainCancelled, &now, who.User
		b, _ := json.Marshal(st)
		if _, err := s.drains.Update(ctx, id, b, rev); err == nil {
			s.log.Info("DRAIN_CANCELLED", "drain_id", id, "actor", who.User)
			_ = r.RespondJSON(st)
			return
		}
	}
	_ = r.Error(api.ErrConflict, "the drain's status kept changing; retry", nil)
}

// handleDrainList lists the drains in DRAINS (any person role but a
// publisher).
func (s *Service) handleDrainList(r micro.Request) {
	if len(bytes.TrimSpace(r.Data())) > 0 {
		var v struct{}
		if err := decodeStrict(r.Data(), &v); err != nil {
			badRequest(r, err)
			return
		}
	}
	if _, ok := s.caller(r, "", readRoles); !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := api.DrainListReply{Drains: []api.DrainState{}}
	drains, err := s.listDrains(ctx)
	if err != nil {
		_ = r.Error(api.ErrUnavailable, err.Error(), nil)
		return
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
			out.Drains = append(out.Drains, st)
		}
	}
	sort.Slice(out.Drains, func(i, j int) bool { return out.Drains[i].StartedAt.Before(out.Drains[j].StartedAt) })
	_ = r.RespondJSON(out)
}

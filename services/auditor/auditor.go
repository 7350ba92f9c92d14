// Package auditor answers an inspector's and an operator's questions about
// the quarantine as a NATS micro service (it writes nothing but its signed
// checkpoints, the access audit of payload reads and the legal holds'
// actions to AUDIT, the holds to HOLDS, their records through the
// quarantiner and the held chains' copies to LEGALHOLD):
//
//   - audit.verify: recompute every record's seal and every chain, find
//     gaps in QUARANTINE, and check the checkpoints in AUDIT;
//   - audit.reconcile: account for every event received on EVENTS in a
//     time range (committed, quarantined by class, poison, resolved,
//     duplicate; anything else past a grace period is unaccounted);
//   - audit.get, audit.list, audit.groups: one chain, filtered pages of
//     quarantined events, and the triage groups an operator opens first;
//   - audit.export: pages of an inspection export, each chain with the
//     inclusion proof of every record in a signed checkpoint's Merkle tree
//     (export.Verify checks the JSONL file offline);
//   - audit.access: the access audit, newest first. Every payload read
//     (audit.get include_payload, each export page) is recorded in AUDIT,
//     and acknowledged, before the reply leaves, or refused;
//   - audit.checkpoint: append a checkpoint (also done periodically, once
//     caught up at start-up and at shutdown, when there are records no
//     checkpoint covers);
//   - hold.place, hold.lift, hold.list, hold.get: legal holds (the
//     legal-hold part, package legalhold): a hold's record is sealed into every chain it
//     holds, dynamic holds (a party, a filter) also into the chains
//     quarantined later that match them, and when QUARANTINE has a MaxAge
//     every held chain is copied to LEGALHOLD before it could expire
//     (package legalhold). The auditor refuses to start on a QUARANTINE whose
//     MaxAge is below the longest retention of the domain registry.
//
// The auditor creates no consumer (a credential that may create one can
// aim its deliver_subject anywhere): it reads every stream with batched
// JetStream direct gets. A live view, reading QUARANTINE from the last
// record it applied whenever there is more, keeps a summary per unresolved
// chain and aggregates of the resolved ones per triage group (for lists,
// groups and the depth and age gauges) and the running checkpoint digest
// (the audit-log line of each record is the quarantiner's, written once as
// it stores the record). What it no longer
// holds (resolved chains) is read from QUARANTINE when asked for, with
// JetStream direct gets, so the auditor's memory does not grow with the
// number of records. The auditor never writes QUARANTINE (a hold's record
// is the quarantiner's to append, on quarantiner.hold, which appends
// nothing else).
//
// Each concern is a part of its own, a package with one type the Service
// wires and whose endpoints it registers (docs/adr/0018-auditor-parts.md):
// legal holds, the LEGALHOLD copy and the retention check (legalhold),
// checkpoints and the own anchor (anchor), reconciliation (reconcile) and
// verification (verify). The Service keeps the queries, the exports and
// the access audit.
package auditor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nkeys"

	"github.com/deadletter/deadletter/services/auditor/anchor"
	"github.com/deadletter/deadletter/services/auditor/legalhold"
	"github.com/deadletter/deadletter/services/auditor/reconcile"
	"github.com/deadletter/deadletter/services/auditor/verify"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/export"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/lifecycle"
	"github.com/deadletter/deadletter/shared/notify"
	"github.com/deadletter/deadletter/shared/retry"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Version is the auditor's service version (SemVer).
const Version = "0.1.0"

// reconcileTimeout bounds one reconciliation (a request's or the
// background one's).
const reconcileTimeout = 30 * time.Minute

// ErrNotProvisioned: a stream or bucket the auditor reads does not exist.
var ErrNotProvisioned = errors.New("auditor: stream not provisioned")

// Service is one auditor instance.
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
	index   *index
	now     func() time.Time

	quarantine jetstream.Stream
	chains     *chain.Reader
	audit      jetstream.Stream
	events     jetstream.Stream
	keys       jetstream.KeyValue
	// holds is the legal-hold part: holds, the LEGALHOLD copy and
	// QUARANTINE's retention (package legalhold).
	holds *legalhold.Holds
	// approvals: a hold lift the approval policy names waits for a
	// second person (package approval); also read by approved payload
	// reads (access.go).
	approvals *approval.Store
	// alerts publishes the notifications (a new failure group, a poison
	// record, a failed verify); set by Run, nil (publishing nothing)
	// before.
	alerts *notify.Publisher

	// verifier is the verification part (package verify).
	verifier *verify.Verifier
	// reconciler is the reconciliation part (package reconcile).
	reconciler *reconcile.Reconciler
	// checkpoints is the checkpoint part: signed checkpoints in AUDIT,
	// their export and the own anchor (package anchor).
	checkpoints *anchor.Checkpoints
	// docs are the EVENTS messages of documents without quarantined
	// events (keptDocument).
	docs documentCache

	trees  exportTrees   // the Merkle tree of the newest checkpoint exported
	signer nkeys.KeyPair // nil: checkpoints and export pages are unsigned

	exportBudget int    // bytes of an export page (tests make it small; 0: from the max payload)
	verifyBatch  int    // records linked together by verify (tests make it small; verify.Tuning)
	seenBits     uint32 // size of verify's filter of dlq ids seen
	seenFull     bool   // tests: verify's filter starts full (every id "maybe seen")
}

// New builds an auditor on an open connection; Run starts it.
func New(nc *nats.Conn, cfg Config, log *slog.Logger) (*Service, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.VerifyChainCache == 0 {
		cfg.VerifyChainCache = defaultVerifyChainCache
	}
	if cfg.AnchorBlocks == 0 {
		cfg.AnchorBlocks = defaultAnchorBlocks
	}
	var signer nkeys.KeyPair
	if cfg.SigningKeyFile != "" {
		kp, err := export.LoadSigningKey(cfg.SigningKeyFile)
		if err != nil {
			return nil, err
		}
		signer = kp
	}
	g, err := gate.New(0)
	if err != nil {
		return nil, err
	}
	base, err := lifecycle.New(nc, "auditor", cfg.Instance, log)
	if err != nil {
		return nil, err
	}
	js, log := base.JS, base.Log
	s := &Service{cfg: cfg, base: base, nc: nc, js: js, gate: g, log: log, now: time.Now, verifyBatch: verify.DefaultBatch,
		seenBits: verify.SeenFilterBits, signer: signer}
	m := newMetrics(cfg.Registerer, func() float64 { return s.checkpoints.Age() }, func() float64 { return s.checkpoints.Behind() })
	s.metrics = m
	s.index = newIndex(log, m, cfg.AnchorBlocks)
	s.chains = chain.NewReader(js)
	s.reconciler = reconcile.New(reconcile.Config{NC: nc, JS: js, Gate: g, View: view{s.index}, Reader: chainReader{s}, Log: log,
		Now: func() time.Time { return s.now() }, Grace: cfg.Grace, LookupConcurrency: cfg.LookupConcurrency,
		Unaccounted: m.unaccounted, Conflicts: m.conflicts, Unsourced: m.unsourced, LastRun: m.lastReconcile, Repaired: m.repaired})
	s.checkpoints = anchor.NewCheckpoints(anchor.Config{JS: js, View: view{s.index}, Log: log,
		Now: func() time.Time { return s.now() }, Instance: cfg.Instance, ExportFile: cfg.ExportFile, Signer: signer,
		Written: m.checkpoints.Inc, Failed: func(kind string) { m.verifyFailed.WithLabelValues(kind).Inc() }})
	s.holds = legalhold.New(legalhold.Config{NC: nc, JS: js, Chains: s.chains, View: view{s.index}, Log: log,
		Now: func() time.Time { return s.now() }, Caller: callerOf, AllowAnonymous: cfg.AllowAnonymous,
		PlacePerMinute: cfg.HoldPlacePerMinute, PlaceBurst: cfg.HoldPlaceBurst, Retention: cfg.Retention})
	s.index.onRecord = onHeldRecord(s.holds)
	// Verify reads the checkpoints and has the holds check LEGALHOLD.
	s.verifier = verify.New(verify.Config{JS: js, Reader: chainReader{s}, Checkpoints: s.checkpoints, Holds: s.holds, Log: log,
		Now: func() time.Time { return s.now() }, ChainCache: cfg.VerifyChainCache, ExportFile: cfg.ExportFile,
		Runs: m.verifyRuns, Failed: m.verifyFailed, DigestLine: digestLine,
		Alert: func(e notify.Event) { s.alerts.Publish(e) }})
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(newDepthCollector(s.index, func() time.Time { return s.now() }))
	}
	return s, nil
}

// Run follows QUARANTINE, serves the endpoints and writes periodic
// checkpoints until ctx is done, then stops its consumer and its micro
// service.
func (s *Service) Run(ctx context.Context) (err error) {
	// Stopped during start-up: a clean stop.
	defer lifecycle.Clean(&err)
	// Set-up waits for the cluster (a leader election, a server not up
	// yet, a stream not provisioned yet) until ctx ends: package retry.
	if s.quarantine, err = s.base.Stream(ctx, "QUARANTINE stream", subjects.QuarantineStream); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotProvisioned, subjects.QuarantineStream, err)
	}
	// Retention: a QUARANTINE that could expire records before the
	// longest retention a domain requires is refused; one with a MaxAge
	// needs LEGALHOLD, where held chains outlive it.
	if err := s.holds.CheckRetention(ctx, s.quarantine, ErrNotProvisioned); err != nil {
		return err
	}
	if s.audit, err = s.base.Stream(ctx, "AUDIT stream", subjects.AuditStream); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotProvisioned, subjects.AuditStream, err)
	}
	if s.events, err = s.base.Stream(ctx, "EVENTS stream", subjects.EventsStream); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotProvisioned, subjects.EventsStream, err)
	}
	if s.keys, err = s.base.Bucket(ctx, "idempotency bucket", subjects.IdempotencyBucket); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotProvisioned, subjects.IdempotencyBucket, err)
	}
	s.reconciler.Bind(s.events, s.keys)
	// HOLDS restored from AUDIT before the holds are loaded from it.
	if _, err := s.base.Bucket(ctx, "holds bucket", subjects.HoldsBucket); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotProvisioned, subjects.HoldsBucket, err)
	}
	s.restoreHolds(ctx)
	if _, err := retry.Value(ctx, s.log, "legal holds", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, s.holds.Reload(ctx)
	}); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotProvisioned, subjects.HoldsBucket, err)
	}
	s.approvals, err = retry.Value(ctx, s.log, "approvals bucket", func(ctx context.Context) (*approval.Store, error) {
		return approval.Open(ctx, s.js, approval.Config{Checker: approval.AuditRegistry{JS: s.js}, Logger: s.log, Now: s.now})
	})
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotProvisioned, subjects.ApprovalsBucket, err)
	}
	s.holds.Bind(s.approvals)
	setup, cancel := context.WithTimeout(ctx, retry.DefaultAttempt)
	defer cancel()
	// The store against the newest checkpoint exported, before any
	// checkpoint is written over it.
	s.checkpoints.Start(setup, s.quarantine, s.audit)
	s.verifier.Bind(s.quarantine)
	ncfg := s.cfg.Notify
	ncfg.OnOutcome = func(k notify.Kind, outcome string) { s.metrics.notifications.WithLabelValues(string(k), outcome).Inc() }
	if s.alerts, err = notify.New(s.nc, "auditor", ncfg, s.log); err != nil {
		return fmt.Errorf("auditor: %w", err)
	}
	defer s.alerts.Close()
	s.index.alert = s.alerts.Publish
	// The live view outlives ctx until Run returns: the shutdown
	// checkpoint covers what it applied.
	follow, err := s.index.follow(context.WithoutCancel(ctx), s.js, subjects.QuarantineStream)
	if err != nil {
		return fmt.Errorf("auditor: follow %s: %w", subjects.QuarantineStream, err)
	}
	defer follow.Stop()

	// Requests are served by the endpoint layer (strict decoding and
	// validation, bounded time and concurrency); Run waits for those in
	// flight when it stops.
	serving, err := s.base.Serve(micro.Config{
		Version:     Version,
		Description: "deadletter auditor: verification, reconciliation, triage groups, legal holds; writes checkpoints, the access audit, holds and LEGALHOLD",
	}, endpoint.Options{Context: ctx, MaxInFlight: s.cfg.MaxInFlight})
	if err != nil {
		return err
	}
	defer serving.Stop()
	srv, svc := serving.Server, serving.Service
	// Each endpoint is the endpoint table's row (access.Endpoints): its
	// name, subject and time limit come from there, and so do the roles
	// its checks allow.
	if err := serving.Add(
		endpoint.AddListed(srv, svc, api.AuditVerify, withCaller(s.Verify)),
		endpoint.AddListed(srv, svc, api.AuditReconcile, withCaller(s.Reconcile)),
		endpoint.AddListed(srv, svc, api.AuditGet, withCaller(s.Get)),
		endpoint.AddListed(srv, svc, api.AuditWhoami, withCaller(s.Whoami)),
		endpoint.AddListed(srv, svc, api.AuditList, withCaller(s.List)),
		endpoint.AddListed(srv, svc, api.AuditGroups,
			withCaller(func(_ context.Context, req api.GroupsRequest) (api.GroupsReply, error) { return s.Groups(req), nil })),
		endpoint.AddListed(srv, svc, api.AuditExport, withCaller(s.Export)),
		endpoint.AddListed(srv, svc, api.AuditAccess, withCaller(s.Access)),
		endpoint.AddListed(srv, svc, api.AuditCheckpoint,
			withCaller(func(ctx context.Context, _ api.CheckpointRequest) (api.CheckpointReply, error) {
				return s.Checkpoint(ctx)
			})),
		endpoint.AddListed(srv, svc, api.HoldPlace, withCaller(s.holds.Place)),
		endpoint.AddListed(srv, svc, api.HoldLift, withCaller(s.holds.Lift)),
		endpoint.AddListed(srv, svc, api.HoldList, withCaller(s.holds.List)),
		endpoint.AddListed(srv, svc, api.HoldGet, withCaller(s.holds.Get)),
		endpoint.AddListed(srv, svc, api.HoldLiftApproved, withCaller(s.holds.LiftApproved)),
	); err != nil {
		return err
	}
	s.log.Info("auditor started", "grace", s.cfg.Grace.String(), "checkpoint_interval", s.cfg.CheckpointInterval.String())

	var wg sync.WaitGroup
	if s.cfg.CheckpointInterval > 0 {
		// An auditor restarted more often than the interval still leaves
		// checkpoints: one once it has caught up with QUARANTINE (when
		// records arrived that no checkpoint covers), one when it stops.
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.startupCheckpoint(ctx)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.holds.Run(ctx)
	}()
	s.every(ctx, &wg, s.cfg.CheckpointInterval, func(ctx context.Context) {
		s.checkpoints.Auto(ctx, "periodic", true)
	})
	s.every(ctx, &wg, s.cfg.ReconcileInterval, func(ctx context.Context) {
		// Bounded like a request, so one stuck read never stops the next.
		ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
		defer cancel()
		now := s.now()
		req := api.ReconcileRequest{From: now.Add(-s.cfg.ReconcileWindow), To: now, Repair: s.cfg.Repair}
		if _, err := s.reconciler.Reconcile(ctx, req); err != nil {
			s.log.Error("reconciliation failed", "err", err)
		}
	})
	<-ctx.Done()
	wg.Wait()
	serving.Stop()
	if s.cfg.CheckpointInterval > 0 {
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), anchor.ShutdownTimeout)
		s.checkpoints.Auto(stop, "shutdown", false)
		cancel()
	}
	s.log.Info("auditor stopped")
	return nil
}

// Verify checks QUARANTINE, AUDIT's checkpoints, an anchor and LEGALHOLD
// (audit.verify: the verification part's, verify.Verifier.Verify).
func (s *Service) Verify(ctx context.Context, req api.VerifyRequest) (api.VerifyReply, error) {
	return s.verifier.Verify(ctx, req, verify.Tuning{Batch: s.verifyBatch, SeenBits: s.seenBits, SeenFull: s.seenFull})
}

// Reconcile accounts for every event EVENTS received in a time range and
// walks LEDGER back (audit.reconcile: the reconciliation part's,
// reconcile.Reconciler.Reconcile).
//
// A repair (req.Repair) is an operator's: it writes AUDIT and FAILURES on
// the operator's behalf, recorded as theirs.
func (s *Service) Reconcile(ctx context.Context, req api.ReconcileRequest) (api.ReconcileReply, error) {
	if !req.Repair {
		return s.reconciler.Reconcile(ctx, req)
	}
	id, err := callerOf(ctx)
	switch {
	case err != nil && s.cfg.AllowAnonymous:
		id = access.Identity{User: anonymous, Role: access.RoleOperator}
	case err != nil:
		return api.ReconcileReply{}, api.Wrap(api.ErrUnauthenticated, err, "a repair is asked by an authenticated operator")
	case id.Role != access.RoleOperator:
		s.log.Warn("repair refused", "user", id.User, "role", string(id.Role))
		return api.ReconcileReply{}, api.Errorf(api.ErrForbidden, "role %s may not repair: an operator gives unaccounted events an outcome", id.Role)
	}
	return s.reconciler.ReconcileBy(ctx, req, reconcile.Actor{User: id.User, Role: string(id.Role)})
}

// Checkpoint appends a checkpoint covering every record of QUARANTINE
// stored now, unless the last checkpoint already covers them (the
// checkpoint part's, anchor.Checkpoints.Checkpoint).
func (s *Service) Checkpoint(ctx context.Context) (api.CheckpointReply, error) {
	return s.checkpoints.Checkpoint(ctx)
}

// startupCheckpoint waits (until ctx is done) for the live view to apply
// every record QUARANTINE held when the auditor started, then writes a
// checkpoint unless the newest one already covers them.
func (s *Service) startupCheckpoint(ctx context.Context) {
	info, err := s.quarantine.Info(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("checkpoint failed", "when", "start", "err", err)
		}
		return
	}
	if err := s.index.waitFor(ctx, info.State.LastSeq); err != nil {
		return // stopped before catching up: the shutdown checkpoint covers what was applied
	}
	s.checkpoints.Auto(ctx, "start", false)
}

// every runs fn each interval until ctx is done (never when interval is 0).
func (s *Service) every(ctx context.Context, wg *sync.WaitGroup, interval time.Duration, fn func(context.Context)) {
	if interval <= 0 {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn(ctx)
			}
		}
	}()
}

// headersKey is the context key of a request's headers.
type headersKey struct{}

// callerOf returns the caller the server attached to the request of ctx.
func callerOf(ctx context.Context) (access.Identity, error) {
	h, _ := ctx.Value(headersKey{}).(nats.Header)
	return access.CallerOf(h)
}

// badRequest is a BAD_REQUEST with message msg.
func badRequest(msg string) error { return api.Errorf(api.ErrBadRequest, "%s", msg) }

// withCaller adapts fn to the endpoint layer: the request's headers (its
// caller, callerOf) travel in fn's context.
func withCaller[Req, Rep any](fn func(context.Context, Req) (Rep, error)) endpoint.Handler[Req, Rep] {
	return func(ctx context.Context, m endpoint.Meta, req Req) (Rep, error) {
		return fn(context.WithValue(ctx, headersKey{}, m.Headers), req)
	}
}

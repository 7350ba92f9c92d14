// Package auditor answers an inspector's and an operator's questions about
// the quarantine as a NATS micro service (it writes nothing but its signed
// checkpoints to AUDIT):
//
//   - audit.verify: recompute every record's seal and every chain, find
//     gaps in QUARANTINE, and check the checkpoints in AUDIT;
//   - audit.reconcile: account for every event received on EVENTS in a
//     time range (committed, quarantined by class, poison, resolved,
//     duplicate; anything else past a grace period is unaccounted);
//   - audit.get, audit.list, audit.groups: one chain, filtered pages of
//     quarantined events, and the triage groups an operator opens first;
//   - audit.checkpoint: append a checkpoint (also done periodically).
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
// number of records. The auditor never writes QUARANTINE; it appends only
// its own checkpoints to AUDIT.
package auditor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nkeys"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Version is the auditor's service version (SemVer).
const Version = "0.1.0"

// ErrNotProvisioned: a stream or bucket the auditor reads does not exist.
var ErrNotProvisioned = errors.New("auditor: stream not provisioned")

// Service is one auditor instance.
type Service struct {
	cfg     Config
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

	cpMu          sync.Mutex    // serializes checkpoint writes
	signer        nkeys.KeyPair // nil: checkpoints are unsigned
	exportPending bool          // the last checkpoint written is not exported yet (cpMu)

	verifyBatch int    // records linked together by verify (tests make it small)
	seenBits    uint32 // size of verify's filter of dlq ids seen
	seenFull    bool   // tests: verify's filter starts full (every id "maybe seen")
}

// New builds an auditor on an open connection; Run starts it.
func New(nc *nats.Conn, cfg Config, log *slog.Logger) (*Service, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.VerifyChainCache == 0 {
		cfg.VerifyChainCache = defaultVerifyChainCache
	}
	if cfg.AnchorBlocks == 0 {
		cfg.AnchorBlocks = defaultAnchorBlocks
	}
	var signer nkeys.KeyPair
	if cfg.SigningKeyFile != "" {
		kp, err := loadSigningKey(cfg.SigningKeyFile)
		if err != nil {
			return nil, err
		}
		signer = kp
	}
	g, err := gate.New(0)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("auditor: %w", err)
	}
	log = log.With("service", "auditor")
	m := newMetrics(cfg.Registerer)
	s := &Service{cfg: cfg, nc: nc, js: js, gate: g, log: log, metrics: m, now: time.Now, verifyBatch: defaultVerifyBatch,
		seenBits: seenFilterBits, signer: signer}
	s.index = newIndex(log, m, cfg.AnchorBlocks)
	s.chains = chain.NewReader(js)
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(newDepthCollector(s.index, func() time.Time { return s.now() }))
	}
	return s, nil
}

// Run follows QUARANTINE, serves the endpoints and writes periodic
// checkpoints until ctx is done, then stops its consumer and its micro
// service.
func (s *Service) Run(ctx context.Context) error {
	setup, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	if s.quarantine, err = s.js.Stream(setup, subjects.QuarantineStream); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotProvisioned, subjects.QuarantineStream, err)
	}
	if s.audit, err = s.js.Stream(setup, subjects.AuditStream); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotProvisioned, subjects.AuditStream, err)
	}
	if s.events, err = s.js.Stream(setup, subjects.EventsStream); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotProvisioned, subjects.EventsStream, err)
	}
	if s.keys, err = s.js.KeyValue(setup, subjects.IdempotencyBucket); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotProvisioned, subjects.IdempotencyBucket, err)
	}
	follow, err := s.index.follow(ctx, s.js, subjects.QuarantineStream)
	if err != nil {
		return fmt.Errorf("auditor: follow %s: %w", subjects.QuarantineStream, err)
	}
	defer follow.Stop()

	svc, err := micro.AddService(s.nc, micro.Config{
		Name:        "auditor",
		Version:     Version,
		Description: "deadletter auditor: verification, reconciliation, triage groups; writes only its signed checkpoints",
	})
	if err != nil {
		return fmt.Errorf("auditor: micro: %w", err)
	}
	defer func() { _ = svc.Stop() }()
	g := svc.AddGroup("audit")
	for _, ep := range []struct {
		name, desc string
		h          micro.HandlerFunc
	}{
		{"verify", "recompute every seal, chain and checkpoint", handler(30*time.Minute, s.Verify)},
		{"reconcile", "account for every event of EVENTS in a time range", handler(30*time.Minute, s.Reconcile)},
		{"get", "one chain: current state and records", handler(time.Minute, s.Get)},
		{"list", "quarantined events, filtered, newest first", handler(5*time.Minute, s.List)},
		{"groups", "triage groups by fingerprint", handler(time.Minute, func(_ context.Context, req api.GroupsRequest) (api.GroupsReply, error) {
			return s.Groups(req), nil
		})},
		{"checkpoint", "append a checkpoint to AUDIT now", handler(time.Minute, func(ctx context.Context, _ api.CheckpointRequest) (api.CheckpointReply, error) {
			return s.Checkpoint(ctx)
		})},
	} {
		if err := g.AddEndpoint(ep.name, endpoint.Guard(ep.h), micro.WithEndpointMetadata(map[string]string{"description": ep.desc})); err != nil {
			return fmt.Errorf("auditor: micro endpoint %s: %w", ep.name, err)
		}
	}
	s.log.Info("auditor started", "grace", s.cfg.Grace.String(), "checkpoint_interval", s.cfg.CheckpointInterval.String())

	var wg sync.WaitGroup
	s.every(ctx, &wg, s.cfg.CheckpointInterval, func(ctx context.Context) {
		if _, err := s.Checkpoint(ctx); err != nil {
			s.log.Error("checkpoint failed", "err", err)
		}
	})
	s.every(ctx, &wg, s.cfg.ReconcileInterval, func(ctx context.Context) {
		now := s.now()
		if _, err := s.Reconcile(ctx, api.ReconcileRequest{From: now.Add(-s.cfg.ReconcileWindow), To: now}); err != nil {
			s.log.Error("reconciliation failed", "err", err)
		}
	})
	<-ctx.Done()
	wg.Wait()
	s.log.Info("auditor stopped")
	return nil
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

// decode reads a JSON request body; an empty body is the zero request.
func decode(r micro.Request, dst any) bool {
	if len(r.Data()) == 0 {
		return true
	}
	if err := json.Unmarshal(r.Data(), dst); err != nil {
		_ = r.Error(api.ErrBadRequest, "request is not valid JSON for this endpoint", nil)
		return false
	}
	return true
}

// headersKey is the context key of a request's headers.
type headersKey struct{}

// callerOf returns the caller the server attached to the request of ctx.
func callerOf(ctx context.Context) (access.Identity, error) {
	h, _ := ctx.Value(headersKey{}).(nats.Header)
	return access.CallerOf(h)
}

// mayReadPayloads refuses a payload read unless the caller's role reads
// payloads (or, with AllowAnonymous, there is no caller), and logs every
// payload read it allows: who, in which role, which chain. Never a value.
func (s *Service) mayReadPayloads(ctx context.Context, dlqID string) error {
	id, err := callerOf(ctx)
	switch {
	case err != nil && s.cfg.AllowAnonymous:
		s.log.Info("payload read", "user", "anonymous", "dlq_id", dlqID)
		return nil
	case err != nil:
		return requestError{code: api.ErrUnauthenticated, msg: "payloads are read only by an authenticated inspector or operator", err: err}
	case !id.Role.ReadsPayloads():
		s.log.Warn("payload read refused", "user", id.User, "role", string(id.Role), "dlq_id", dlqID)
		return requestError{code: api.ErrForbidden, msg: "role " + string(id.Role) + " may not read payloads"}
	}
	s.log.Info("payload read", "user", id.User, "role", string(id.Role), "dlq_id", dlqID)
	return nil
}

// respond answers with rep, or with err's code.
func respond(r micro.Request, rep any, err error) {
	if err != nil {
		code := api.ErrUnavailable
		var re requestError
		if errors.As(err, &re) {
			code = re.code
		}
		_ = r.Error(code, err.Error(), nil)
		return
	}
	_ = r.RespondJSON(rep)
}

// requestError is an error with an endpoint error code (and the error it
// reports, when there is one).
type requestError struct {
	code, msg string
	err       error
}

func (e requestError) Error() string { return e.msg }

func (e requestError) Unwrap() error { return e.err }

// refused is a bad request reporting err.
func refused(err error) error {
	return requestError{code: api.ErrBadRequest, msg: err.Error(), err: err}
}

func badRequest(msg string) error { return requestError{code: api.ErrBadRequest, msg: msg} }

// handler answers an endpoint with fn: it decodes the request into a Req,
// calls fn within timeout and responds with its reply or error code.
func handler[Req, Rep any](timeout time.Duration, fn func(context.Context, Req) (Rep, error)) micro.HandlerFunc {
	return func(r micro.Request) {
		var req Req
		if !decode(r, &req) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		ctx = context.WithValue(ctx, headersKey{}, nats.Header(r.Headers()))
		rep, err := fn(ctx, req)
		respond(r, rep, err)
	}
}

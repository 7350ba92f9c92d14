// Package drains is the redriver's part for drains with their canary and
// automatic pause: a drain selects quarantined events by a filter
// (package selection), and replays them (package replay) rate-limited,
// bounded in concurrency, ordered per business key, durably (its status
// in DRAINS, checkpointed by compare-and-set) and resumably (taken over by
// another instance when its owner's heartbeat is older than DrainLease).
// Its canary replays a few events first and pauses the drain when too
// many fail again; its failure window pauses it later (package guard).
// Its governance events (pauses, cancels, resumes) are written to AUDIT
// never best effort (package outbox). Two unfinished drains never select
// one event (overlap.go); a held event is never replayed (holds.go).
//
// The Runner checks no caller: the redriver's handlers do, and pass the
// identity they serve the request as.
package drains

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/deadletter/deadletter/services/redriver/outbox"
	"github.com/deadletter/deadletter/services/redriver/replay"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/notify"
)

// Approvals is what a drain start needs of two-person approval
// (approvals.Desk): the policy in force, and the decision whether the
// drain needs a second person (nil when not, else APPROVAL_REQUIRED).
type Approvals interface {
	Policy(ctx context.Context) (api.PolicyReply, error)
	Require(ctx context.Context, who access.Identity, action approval.Action, req approval.Request) error
}

// Metrics are the collectors drains count in (the redriver's).
type Metrics struct {
	// Outcomes counts the replays' outcomes, Retries the retried ones,
	// InFlight the replays in flight.
	Outcomes *prometheus.CounterVec
	Retries  prometheus.Counter
	InFlight prometheus.Gauge
	// Drains counts the drains finished, by status; Pauses the automatic
	// pauses, by reason.
	Drains, Pauses *prometheus.CounterVec
	// Unrecorded is the drain events not in AUDIT yet.
	Unrecorded prometheus.Gauge
}

// Config configures a Runner.
type Config struct {
	// InstanceID names this instance, the owner of its drains.
	InstanceID string
	// DefaultRatePerSecond and DefaultConcurrency apply to a drain that
	// names none; MaxConcurrency bounds the one it names; MaxDrains bounds
	// the drains running here.
	DefaultRatePerSecond, DefaultConcurrency, MaxConcurrency, MaxDrains int
	// DrainLease is how old an owner's heartbeat may get before another
	// instance takes its drain over.
	DrainLease time.Duration
	// JS reads DRAINS, QUARANTINE and LEDGER and writes AUDIT.
	JS jetstream.JetStream
	// Log logs ids and codes only.
	Log *slog.Logger
	// Replayer replays the drains' events.
	Replayer *replay.Replayer
	// Approvals decides whether a drain needs a second person.
	Approvals Approvals
	// Alert publishes a notification (a paused drain).
	Alert func(notify.Event)
	// Metrics are the collectors counted in.
	Metrics Metrics
}

// Runner runs the drains of this instance and serves the drain endpoints'
// work. Open binds its stores before the first request.
type Runner struct {
	cfg Config
	// kv is DRAINS; plan counts selections (dry runs, overlaps).
	kv    jetstream.KeyValue
	holds *hold.Store
	plan  planner
	// ctx is the parent of every drain (cancelled at shutdown); wg counts
	// the drains and background work, waited for by the service.
	ctx context.Context
	wg  *sync.WaitGroup
	// outbox is the loop of drain events not in AUDIT yet.
	outbox *outbox.Loop

	mu      sync.Mutex
	running map[string]*drainRun
	// startMu serializes drain starts (their overlap check and launch).
	startMu sync.Mutex
}

// New returns a Runner whose drains and background work wg counts.
func New(cfg Config, wg *sync.WaitGroup) *Runner {
	return &Runner{cfg: cfg, wg: wg, outbox: outbox.NewLoop(), running: map[string]*drainRun{}}
}

// Open binds the stores (DRAINS, IDEMPOTENCY, the legal holds) and the
// context every drain runs under (cancelled at shutdown).
func (r *Runner) Open(ctx context.Context, drainsKV, idem jetstream.KeyValue, holds *hold.Store) {
	r.ctx, r.kv, r.holds = ctx, drainsKV, holds
	r.plan = planner{js: r.cfg.JS, idem: idem, holds: holds}
}

// StartDrain starts an approved drain as drainID, started by who, its
// overlap checked again (approvals.Executor): a drain already stored
// under drainID is not started twice.
func (r *Runner) StartDrain(ctx context.Context, req api.DrainStartRequest, who access.Identity, drainID string) (string, error) {
	r.startMu.Lock()
	defer r.startMu.Unlock()
	if err := r.plan.refuseOverlap(ctx, req, drainID); err != nil {
		return "", err
	}
	return r.launchDrain(ctx, req, who, drainID)
}

// RefuseOverlap refuses drain req, to be stored as drainID, with
// DRAIN_OVERLAP when an unfinished drain selects some of its events.
func (r *Runner) RefuseOverlap(ctx context.Context, req api.DrainStartRequest, drainID string) error {
	return r.plan.refuseOverlap(ctx, req, drainID)
}

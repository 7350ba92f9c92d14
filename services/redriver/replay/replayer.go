// Package replay is the redriver's replay engine, the part that drains
// and single redrives share: a Replayer replays one quarantined event back
// through the validation gate and observes its outcome (Replay), and
// gathers the replays of concurrent lanes into atomic batches on EVENTS
// (its batcher).
//
// A replay re-publishes the event's effective payload straight into EVENTS
// on redriven.<domain>.<type>.<dlq_id>.<n> (subjects.Redriven: only the
// redriver may publish there, so only there does the validator honour the
// redrive headers) with the headers Deadletter-Dlq-Id and
// Deadletter-Redrive-Count, an unguessable Nats-Msg-Id (MsgID) and the
// expectation that its subject, its own, is empty: a retry of a stored
// replay is refused and resolves to the stored copy (publishAlone), so a
// replay is stored once. Each lifecycle step is a conditional append
// through the quarantiner (redrive_requested before publishing — the CAS
// that keeps two redrivers from replaying one event at once —, replayed,
// skipped_duplicate). Outcomes are observed, never assumed.
package replay

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/deadletter/deadletter/services/redriver/chainio"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/failpoint"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// HoldsFunc returns the active legal holds.
type HoldsFunc func(ctx context.Context) ([]api.Hold, error)

// Metrics are the collectors a Replayer counts in (the redriver's).
type Metrics struct {
	// Published counts the replays published.
	Published prometheus.Counter
	// Batches, Batched and Unbatched count the atomic batches of replays
	// stored on EVENTS, the replays they carried, and the batches not
	// stored as a whole.
	Batches, Batched, Unbatched prometheus.Counter
	// Batching is 1 while atomic batches are measured cheaper than one
	// publish each.
	Batching prometheus.Gauge
}

// preferBatches sets Batching.
func (m *Metrics) preferBatches(on bool) {
	if on {
		m.Batching.Set(1)
	} else {
		m.Batching.Set(0)
	}
}

// Config configures a Replayer.
type Config struct {
	// JS publishes replays and reads IDEMPOTENCY and LEDGER; NC watches
	// the replays' keys and chains.
	JS jetstream.JetStream
	NC *nats.Conn
	// Log logs ids and codes only.
	Log *slog.Logger
	// Gate derives a corrected payload's idempotency key; Tracer starts
	// the replays' spans.
	Gate   *gate.Gate
	Tracer telemetry.Tracer
	// Secret keys the replays' message ids (MsgID).
	Secret []byte
	// OutcomeTimeout bounds an outcome's observation; PollMin and PollMax
	// bound the waits between looks.
	OutcomeTimeout, PollMin, PollMax time.Duration
	// Failpoint is the test hook (nil in production).
	Failpoint *failpoint.Armed
	// Batch is the most replays per atomic batch, Linger how long a
	// smaller batch waits for more; Streams says how the stores fsync.
	Batch   int
	Linger  time.Duration
	Streams streams.Options
	// Metrics are the collectors counted in.
	Metrics *Metrics
}

// Replayer replays quarantined events. Chains, Idem and Holds are set
// (once the stores are open) before the first Replay.
type Replayer struct {
	cfg      Config
	checkers map[string]gate.Checker
	notify   *notifier
	batcher  *replayBatcher

	// Chains reads the chains and asks for their appends.
	Chains chainio.Chains
	// Idem is the IDEMPOTENCY bucket.
	Idem jetstream.KeyValue
	// Holds returns the active legal holds (when Opts.Holds is nil).
	Holds HoldsFunc
}

// New returns a Replayer; Run starts its batcher.
func New(cfg Config) *Replayer {
	checkers := map[string]gate.Checker{}
	for _, c := range gate.Checkers() {
		checkers[c.Domain()] = c
	}
	return &Replayer{cfg: cfg, checkers: checkers, notify: newNotifier(cfg.NC),
		batcher: newReplayBatcher(cfg.JS, cfg.Log, cfg.Metrics, cfg.Batch, cfg.Linger, cfg.Streams)}
}

// Run starts the batcher's flushers until ctx ends; the returned func
// waits for them. Replays published while it does not run are written
// alone.
func (r *Replayer) Run(ctx context.Context) (wait func()) { return r.batcher.run(ctx) }

// heldBy returns the hold holding st (and its case), one of them when
// several do; "" when none does.
func heldBy(st record.State, holds []api.Hold) (holdID, caseID string) {
	ids := hold.Holding(st, hold.FromState(st), holds)
	if len(ids) == 0 {
		return "", ""
	}
	holdID = ids[0]
	for _, h := range st.Holds {
		if h.HoldID == holdID {
			return holdID, h.CaseID
		}
	}
	for _, h := range holds {
		if h.ID == holdID {
			return holdID, h.CaseID
		}
	}
	return holdID, ""
}

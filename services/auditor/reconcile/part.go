// Package reconcile is the auditor's reconciliation part (audit.reconcile,
// and the periodic run): it accounts for every event EVENTS received in a
// time range (committed, quarantined by class, poison, resolved,
// duplicate, conflict, a replay; anything else past a grace period is
// unaccounted), and walks LEDGER the other way (every entry names the
// EVENTS message it was committed from). It only reads: EVENTS, LEDGER,
// IDEMPOTENCY, QUARANTINE (through the auditor's readers) and DOCUMENTS;
// a repair (api.ReconcileRequest.Repair) writes its AUDIT action for each
// unaccounted event it gives an outcome, and asks the quarantiner to seal
// its record (quarantiner.repair).
package reconcile

import (
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/deadletter/deadletter/services/auditor/internal/read"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/record"
)

// maxBytes bounds the bytes of one direct-get reply (the server stops
// sending past it and says how many are pending).
const maxBytes = 8 << 20

// Chain is what reconciliation needs of a chain the live view holds: its
// status and class, and where its original (record 0's source) is.
type Chain struct {
	Status       record.Status
	Class        string
	SourceStream string
	SourceSeq    uint64
}

// View is the auditor's live view of QUARANTINE as the part reads it.
type View interface {
	// Chains calls fn, under the view's read lock, with a lookup of the
	// unresolved chains it holds by dlq id (fn must not block).
	Chains(fn func(get func(dlqID string) (Chain, bool)))
}

// Config is what the part needs from the auditor.
type Config struct {
	// NC asks the quarantiner for a repair's record (quarantiner.repair).
	NC     *nats.Conn
	JS     jetstream.JetStream
	Gate   *gate.Gate
	View   View
	Reader read.ChainReader
	Log    *slog.Logger
	// Now is the clock (read on every use: tests set the auditor's).
	Now func() time.Time
	// Grace is how long an event may be neither committed nor
	// quarantined before it is unaccounted (a request may name another).
	Grace time.Duration
	// LookupConcurrency bounds the reads in flight.
	LookupConcurrency int
	// The gauges a reconciliation of every domain sets.
	Unaccounted, Conflicts, Unsourced, LastRun prometheus.Gauge
	// Repaired counts the events a repair gave an outcome (optional).
	Repaired prometheus.Counter
}

// Reconciler is the reconciliation part.
type Reconciler struct {
	cfg Config

	// Set by Bind before any request is served.
	events jetstream.Stream
	keys   jetstream.KeyValue
}

// New returns the part; Bind gives it the streams.
func New(cfg Config) *Reconciler { return &Reconciler{cfg: cfg} }

// Bind gives the part EVENTS and the idempotency bucket Run opened.
func (p *Reconciler) Bind(events jetstream.Stream, keys jetstream.KeyValue) {
	p.events, p.keys = events, keys
}

// Package verify is the auditor's verification part (audit.verify): it
// recomputes every record's seal and every chain of QUARANTINE in stream
// order with bounded memory, reports sequences that hold no record,
// recomputes the running digest and Merkle tree and compares them with
// every checkpoint of AUDIT and with an anchor (the caller's, or the
// auditor's own), has the legal-hold part check LEGALHOLD, compares HOLDS
// with AUDIT's hold actions (holds.go), and reads every EPCIS document
// kept in DOCUMENTS whole (and checks that each document a record names
// is there): a wrong document or hold is a problem, never a failed
// verification. It only reads.
package verify

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/deadletter/deadletter/services/auditor/anchor"
	"github.com/deadletter/deadletter/services/auditor/internal/read"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/notify"
)

// LegalHolds checks the held chains' LEGALHOLD copies
// (legalhold.Holds.Verify).
type LegalHolds interface {
	Verify(ctx context.Context, problem func(api.VerifyProblem)) (*api.VerifyLegalHold, error)
}

// Config is what the part needs from the auditor.
type Config struct {
	JS     jetstream.JetStream
	Reader read.ChainReader
	// Checkpoints reads AUDIT's checkpoints and the own anchor.
	Checkpoints *anchor.Checkpoints
	Holds       LegalHolds
	Log         *slog.Logger
	// Now is the clock (read on every use: tests set the auditor's).
	Now func() time.Time
	// ChainCache is how many chains' tails are kept (Config.VerifyChainCache).
	ChainCache int
	// ExportFile names the own anchor in logs.
	ExportFile string
	// Runs counts verifications by outcome, Failed problems by kind.
	Runs, Failed *prometheus.CounterVec
	// DigestLine appends the checkpoint digest line of one record (the
	// live view's format, which the checkpoints' digest is over).
	DigestLine func(dst []byte, seq uint64, auditHash string) []byte
	// Alert publishes a failed verification's notification.
	Alert func(notify.Event)
}

// Tuning sizes one verification (tests make it small; zero: defaults).
type Tuning struct {
	// Batch is how many records are linked together (DefaultBatch).
	Batch int
	// SeenBits is the size of the filter of dlq ids seen (SeenFilterBits).
	SeenBits uint32
	// SeenFull starts that filter full (every id "maybe seen").
	SeenFull bool
}

// Verifier is the verification part.
type Verifier struct {
	cfg        Config
	quarantine jetstream.Stream // set by Bind before any request is served
}

// New returns the part; Bind gives it QUARANTINE.
func New(cfg Config) *Verifier { return &Verifier{cfg: cfg} }

// Bind gives the part QUARANTINE, which Run opened.
func (p *Verifier) Bind(quarantine jetstream.Stream) { p.quarantine = quarantine }

package quarantiner

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// writer gathers the records that are ready at the same time, for distinct
// chains, into one atomic batch to QUARANTINE: one proposal and, under
// sync_interval: always, one fsync for all of them instead of one each.
// It is a batch.Writer of record messages: what is the quarantiner's own
// is only what a record message is (its chain's subject, its Nats-Msg-Id
// and its chain's expected last subject sequence, set by chains.append)
// and what its outcome means (chains.append: a conflict, a duplicate).
//
// Each message keeps its expectation, so a batch either stores every
// record on the chains' tails its writers read, or nothing; a refused
// batch (or one whose outcome is unknown) is written again record by
// record, and the conditional write of the one at fault says so. No two
// messages of one batch write the same chain: a second record for a chain
// is written by itself after the batch.
type writer struct {
	w       *batch.Writer[*nats.Msg]
	stopped chan struct{}
	// chooser says whether a group is written as one atomic batch or one
	// record at a time (batch.Chooser: with SyncAlways a batch from
	// SyncMinBatch records, else measured).
	chooser batch.Chooser
}

// written is the outcome of a record's write: its stream sequence and the
// size of the batch that stored it, or (alone) the outcome of the
// writer's own publish of it, ack and err for the caller to read as its
// own, or an error.
type written struct {
	seq   uint64
	batch int
	err   error
	alone bool
	ack   *jetstream.PubAck
}

// newWriter returns a writer of batches of at most maxMsgs records on the
// stores o describes (its fsync setting and replicas decide how groups are
// written: batch.Chooser); run starts it.
func newWriter(js jetstream.JetStream, log *slog.Logger, m *metrics, hooks *testHooks, maxMsgs int, o streams.Options, timeout time.Duration) *writer {
	w := &writer{stopped: make(chan struct{})}
	w.chooser.SyncAlways, w.chooser.Replicas = o.SyncAlways, o.Replicas
	cfg := batch.Config[*nats.Msg]{
		JS: js, Stream: subjects.QuarantineStream, Log: log,
		Msg:      func(m *nats.Msg) *nats.Msg { return m },
		Chooser:  &w.chooser,
		Max:      maxMsgs,
		MaxBytes: maxBatchBytes,
		Timeout:  timeout,
		OnBatch: func(n int) {
			m.batches.Inc()
			m.batched.Add(float64(n))
		},
		OnNotStored: func(_ int, err error) {
			if errors.Is(err, batch.ErrRefused) || errors.Is(err, batch.ErrTooLarge) {
				m.refusedBatches.Inc()
			}
		},
		OnPrefer: m.preferBatches,
	}
	if hooks != nil && hooks.chooser != nil {
		hooks.chooser(&w.chooser)
	}
	if hooks != nil && hooks.beforeGather != nil {
		cfg.BeforeGather = func(first *nats.Msg) { hooks.beforeGather(w, first) }
	}
	if hooks != nil && hooks.afterBatch != nil {
		cfg.AfterBatch = func(msgs []*nats.Msg, _ []uint64) []error {
			hooks.afterBatch(msgs)
			return nil
		}
	}
	w.w = batch.NewWriter(cfg)
	return w
}

// maxBatchBytes bounds the bytes of one batch (a first record carries its
// payload, up to the gate's limit).
const maxBatchBytes = 8 << 20

// write stores m with the next group and returns its stream sequence and
// the batch's size, or (alone) the outcome of the writer's own publish of
// it. A batch that ends in a transport error (a timeout) leaves the
// outcome unknown: the writer writes its records again by themselves, each
// conditional, so a record the batch stored is refused then (a conflict,
// which chains.append decides again).
func (w *writer) write(ctx context.Context, m *nats.Msg) written {
	r := w.w.Write(ctx, m)
	return written{seq: r.Seq, batch: r.Batch, err: r.Err, alone: r.Alone, ack: r.Ack}
}

// queued returns how many records wait for the next group (tests).
func (w *writer) queued() int { return w.w.Queued() }

// run writes batches until close.
func (w *writer) run() {
	defer close(w.stopped)
	w.w.Start(context.Background())()
}

// close stops run after the groups queued; it is called once every caller
// of write has returned.
func (w *writer) close() {
	w.w.Stop()
	<-w.stopped
}

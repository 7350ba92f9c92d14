package quarantiner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/streams"
)

// errAlone tells a record's writer to store it by itself, conditional as
// every write: its batch was refused as a whole (the per-message write
// then names the record at fault), or QUARANTINE does not allow atomic
// publish.
var errAlone = errors.New("quarantiner: write the record by itself")

// errWriterStopped: the instance is stopping; the record was not written.
var errWriterStopped = errors.New("quarantiner: the record writer has stopped")

// writer gathers the records that are ready at the same time, for distinct
// chains, into one atomic batch to QUARANTINE: one proposal and, under
// sync_interval: always, one fsync for all of them instead of one each.
//
// Batching is natural: a batch takes what is queued when the writer is
// free, up to maxMsgs messages and maxBytes bytes, and never waits for
// more; what arrives while a write is in flight (a batch, or a record
// alone) goes in the next one. Each message keeps its Nats-Msg-Id and its
// chain's expected last subject sequence, so a batch either stores every
// record on the chains' tails its writers read, or nothing. No two messages of one batch write the
// same chain (the server refuses that, 10164): a second record for a chain
// waits for the next batch.
//
// A group is written as one batch only when the writer's batch.Chooser
// plans it so (always where the servers fsync every write; measured
// otherwise, and on one server without fsync one-record writes are
// cheaper); otherwise the writer writes the group's records itself, one
// by one and concurrently, exactly as their callers would, so that it can
// time the group for the chooser. A refused batch is written again record
// by record by the callers (errAlone), as before, and is not measured.
type writer struct {
	js       jetstream.JetStream
	log      *slog.Logger
	jobs     chan *job
	stop     chan struct{}
	stopped  chan struct{}
	maxMsgs  int
	maxBytes int
	timeout  time.Duration
	metrics  *metrics
	hooks    *testHooks
	// chooser says whether a group is written as one atomic batch or one
	// record at a time (batch.Chooser: with SyncAlways a batch from
	// SyncMinBatch records, else measured).
	chooser batch.Chooser
	// disabled: QUARANTINE refused atomic publish (provisioned without
	// allow_atomic); every record is then written by itself until the
	// instance restarts. Read and written by run only.
	disabled bool
}

// job is one record waiting for a batch; done receives its outcome once.
type job struct {
	m    *nats.Msg
	done chan written
}

// written is the outcome of a job: the record's stream sequence and the
// size of the batch that stored it, or an error (errAlone: write it by
// itself). When alone is set the writer wrote the record by itself, as
// its caller would have (one of a group written one by one): ack and err
// are that publish's, for the caller to read as its own.
type written struct {
	seq   uint64
	batch int
	err   error
	alone bool
	ack   *jetstream.PubAck
}

// maxBatchBytes bounds the bytes of one batch (a first record carries its
// payload, up to the gate's limit).
const maxBatchBytes = 8 << 20

// newWriter returns a writer of batches of at most maxMsgs records on the
// stores o describes (its fsync setting and replicas decide how groups are
// written: batch.Chooser); run starts it.
func newWriter(js jetstream.JetStream, log *slog.Logger, m *metrics, hooks *testHooks, maxMsgs int, o streams.Options, timeout time.Duration) *writer {
	w := &writer{
		js: js, log: log, metrics: m, hooks: hooks,
		jobs:    make(chan *job, maxMsgs),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		maxMsgs: maxMsgs, maxBytes: maxBatchBytes, timeout: timeout,
	}
	w.chooser.SyncAlways, w.chooser.Replicas = o.SyncAlways, o.Replicas
	if hooks != nil && hooks.chooser != nil {
		hooks.chooser(&w.chooser)
	}
	m.preferBatches(w.chooser.PrefersBatches()) // 1 from the start with SyncAlways
	return w
}

// write stores m with the next group and returns its stream sequence and
// the batch's size, or errAlone when the caller must write it by itself,
// or (alone) the outcome of the writer's own publish of it.
// A batch that ends in a transport error (a timeout) leaves the outcome
// unknown, as a single publish would: the caller retries through its
// conditional, deduplicated path.
func (w *writer) write(ctx context.Context, m *nats.Msg) written {
	j := &job{m: m, done: make(chan written, 1)}
	select {
	case w.jobs <- j:
	case <-w.stopped:
		return written{err: errWriterStopped}
	case <-ctx.Done():
		return written{err: ctx.Err()}
	}
	select {
	case r := <-j.done:
		return r
	case <-ctx.Done():
		return written{err: ctx.Err()}
	}
}

// close stops run after the batch in flight; it is called once every
// caller of write has returned.
func (w *writer) close() {
	close(w.stop)
	<-w.stopped
}

// run writes batches until close.
func (w *writer) run() {
	defer close(w.stopped)
	var next []*job // records of chains already in the batch being built
	for {
		pending := next
		next = nil
		var jobs []*job
		chains := make(map[string]bool, len(pending))
		size := 0
		add := func(j *job) {
			if chains[j.m.Subject] || len(jobs) >= w.maxMsgs || size+len(j.m.Data) > w.maxBytes && len(jobs) > 0 {
				next = append(next, j)
				return
			}
			chains[j.m.Subject] = true
			size += len(j.m.Data)
			jobs = append(jobs, j)
		}
		for _, j := range pending {
			add(j)
		}
		if len(jobs) == 0 {
			select {
			case j := <-w.jobs:
				add(j)
			case <-w.stop:
				return
			}
		}
		if w.hooks != nil && w.hooks.beforeGather != nil {
			w.hooks.beforeGather(w, jobs[0].m)
		}
	gather:
		for len(jobs) < w.maxMsgs && len(next) < w.maxMsgs {
			select {
			case j := <-w.jobs:
				add(j)
			default:
				break gather
			}
		}
		w.flush(jobs)
	}
}

// flush writes jobs as one atomic batch, or one by one when the chooser
// measured that cheaper (or tries that way on some of them: Plan), and
// answers each of them.
func (w *writer) flush(jobs []*job) {
	if w.disabled {
		// Batches disabled: a plain publish by each caller, concurrent
		// with the next group.
		for _, j := range jobs {
			j.done <- written{err: errAlone}
		}
		return
	}
	// A lone record is a plain publish (its ack tells a duplicate
	// Nats-Msg-Id, which a one-message batch would hide), by the writer.
	w.chooser.Write(len(jobs), func(lo, hi int) { w.each(jobs[lo:hi]) }, func(lo, hi int) bool { return w.batch(jobs[lo:hi]) })
	w.metrics.preferBatches(w.chooser.PrefersBatches())
}

// batch writes jobs as one atomic batch and answers each of them; it
// reports whether the batch was stored.
func (w *writer) batch(jobs []*job) bool {
	msgs := make([]*nats.Msg, len(jobs))
	for i, j := range jobs {
		msgs[i] = j.m
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	seqs, err := batch.Publish(ctx, w.js, msgs)
	cancel()
	switch {
	case err == nil:
		w.metrics.batches.Inc()
		w.metrics.batched.Add(float64(len(jobs)))
		if w.hooks != nil && w.hooks.afterBatch != nil {
			w.hooks.afterBatch(msgs)
		}
		for i, j := range jobs {
			j.done <- written{seq: seqs[i], batch: len(jobs)}
		}
		return true
	case errors.Is(err, batch.ErrDisabled):
		w.disabled = true
		w.log.Warn("QUARANTINE does not allow atomic publish: every record is written by itself (one fsync each)", "err", err)
		err = errAlone
	case errors.Is(err, batch.ErrRefused), errors.Is(err, batch.ErrTooLarge):
		// Nothing stored: each record is written by itself, and the
		// conditional write of the one at fault says so.
		w.metrics.refusedBatches.Inc()
		w.log.Info("batch refused; writing its records one by one", "records", len(jobs), "err", err)
		err = errAlone
	default:
		err = fmt.Errorf("quarantiner: write a batch of %d records: %w", len(jobs), err)
	}
	for _, j := range jobs {
		j.done <- written{err: err}
	}
	return false
}

// each writes jobs one by one, concurrently, as their callers would (each
// message carries its chain's expected last subject sequence and its
// Nats-Msg-Id), answers each with its publish's outcome, and returns once
// all are answered: the group's wall time is then comparable with a
// batch's, which the writer waits for too. The jobs are of distinct
// chains, so no two of these writes expect the same tail.
func (w *writer) each(jobs []*job) {
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
			ack, err := w.js.PublishMsg(ctx, j.m)
			cancel()
			j.done <- written{alone: true, ack: ack, err: err}
		})
	}
	wg.Wait()
}

package validator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// batchTimeout bounds one batch's write; a batch that times out (its
// outcome unknown) is written again one event at a time, each write
// conditional, so that nothing is committed twice.
const batchTimeout = 10 * time.Second

// lookupMaxBytes bounds one reply of the LEDGER look-up before a batch.
const lookupMaxBytes = 8 << 20

// pendingCommit is one event handed to the batcher for its commit.
type pendingCommit struct {
	env       envelope.Envelope
	data      []byte
	hash      string // idempotency.ContentHash of data
	sourceSeq uint64
	dlqID     string
	// ctx is the delivery's: the per-event path, the POST and the mark
	// run in it.
	ctx context.Context
	// msg is its LEDGER message, built once (batcher.msg).
	msg *nats.Msg
	// claim is set once the group's claims batch took the event's key
	// (with a downstream): its per-event path then goes on from there.
	claim *claim
}

// batcher commits the events of a validator in atomic batches: the LEDGER
// messages of the events ready at the same time in one write, then their
// IDEMPOTENCY marks in another. Under sync_interval: always each write
// costs one fsync, so a batch of n events costs two instead of 2n (where
// the servers fsync every write, for groups of batch.SyncMinBatch or more;
// else when batches are measured the cheaper way: see batch.Chooser).
// Nothing waits to fill a batch: a batch holds what the workers handed
// over while the previous one was being written (natural batching), so an
// idle validator commits one event with the latency of one write.
//
// It is a batch.Writer of events whose message is the event's LEDGER
// message and whose write alone is the per-event protocol (committer); the
// batcher keeps what is the validator's own: the look-up before a batch
// (prepare), the IDEMPOTENCY marks after it (afterBatch) and, with a
// downstream, the claims and POSTs before the LEDGER batch.
//
// The guarantees are the per-event protocol's: each LEDGER message is
// conditional on its key's subject being empty and carries the key as
// Nats-Msg-Id, so a batch stores all its events or none. The keys LEDGER
// holds already (an earlier copy of the event, or a validator that died
// after its LEDGER write) are looked up first and take the per-event path,
// which adopts an existing LEDGER message or reports the duplicate (same
// content) or the IDEMPOTENCY_CONFLICT (other content). A batch refused all
// the same (LEDGER refuses a second message on a subject, 10077, and the
// expectation fails, 10071; either refuses the whole batch), or whose
// outcome is unknown, is written one event at a time on the same path. A
// key twice in a group (two copies of one event) is committed once in the
// batch, its other copies on the per-event path after it. A missing mark
// (the marks' batch failed, or the validator died before it) only costs a
// LEDGER lookup: every reader treats LEDGER as the truth, and the
// per-event path marks it.
type batcher struct {
	c   *committer
	log *slog.Logger
	m   *metrics
	w   *batch.Writer[*pendingCommit]
	// batches, fallbacks count written batches and events that took the
	// per-event path (tests and metrics).
	batches, fallbacks atomic.Uint64

	// chooser says whether a group is written as batches or one event
	// at a time (batches with SyncAlways, else measured: batch.Chooser).
	chooser batch.Chooser
}

// newBatcher returns a batcher of groups of at most maxBatch events on
// the stores o describes (its fsync setting and replicas decide how groups
// are written: batch.Chooser).
func newBatcher(c *committer, maxBatch int, o streams.Options, log *slog.Logger, m *metrics) *batcher {
	b := &batcher{c: c, log: log, m: m}
	b.chooser.SyncAlways, b.chooser.Replicas = o.SyncAlways, o.Replicas
	b.w = batch.NewWriter(batch.Config[*pendingCommit]{
		JS: c.js, Stream: subjects.LedgerStream, Log: log,
		Msg:        b.msg,
		Chooser:    &b.chooser,
		Max:        maxBatch,
		InFlight:   inFlight,
		Timeout:    batchTimeout,
		Alone:      b.alone,
		Prepare:    b.prepare,
		AfterBatch: b.afterBatch,
		OnBatch: func(n int) {
			b.batches.Add(1)
			m.batch(n)
		},
		OnAlone: func(n int) {
			b.fallbacks.Add(uint64(n))
			m.fallback(n)
		},
		OnPrefer: m.preferBatches, // 1 from the start with SyncAlways
	})
	return b
}

// msg returns p's LEDGER message.
func (b *batcher) msg(p *pendingCommit) *nats.Msg {
	if p.msg == nil {
		p.msg = b.c.ledgerMsg(p.env, p.data, p.hash, p.sourceSeq, p.dlqID)
	}
	return p.msg
}

// alone commits p on the per-event path, from its claim when the group's
// claims batch took it.
func (b *batcher) alone(ctx context.Context, p *pendingCommit) batch.Result {
	var seq uint64
	var err error
	if p.claim != nil {
		seq, err = b.c.finish(ctx, p.env, p.data, p.hash, p.sourceSeq, p.dlqID, *p.claim)
	} else {
		seq, err = b.c.commitOne(ctx, p.env, p.data, p.hash, p.sourceSeq, p.dlqID)
	}
	return batch.Result{Seq: seq, Err: err}
}

// submit hands an event to the batcher and returns at once: then
// receives the outcome on a goroutine of its own once the event's group
// is written. So the events in flight are bounded by the consumer's
// MaxAckPending, not by the workers, who would otherwise each wait out a
// group's writes.
func (b *batcher) submit(ctx context.Context, env envelope.Envelope, data []byte, hash string, sourceSeq uint64, dlqID string, then func(uint64, error)) {
	p := &pendingCommit{env: env, data: data, hash: hash, sourceSeq: sourceSeq, dlqID: dlqID, ctx: ctx}
	b.w.Submit(ctx, p, func(r batch.Result) { then(r.Seq, r.Err) })
}

// commit hands an event to the batcher and waits for its commit, or for
// ctx (the batch may still commit it: the redelivery finds the LEDGER
// message and adopts it).
func (b *batcher) commit(ctx context.Context, env envelope.Envelope, data []byte, hash string, sourceSeq uint64, dlqID string) (uint64, error) {
	p := &pendingCommit{env: env, data: data, hash: hash, sourceSeq: sourceSeq, dlqID: dlqID, ctx: ctx}
	r := b.w.Write(ctx, p)
	return r.Seq, r.Err
}

// inFlight is how many groups are written at once: while one group's
// batches wait for the server, the next one gathers and is written too.
// Two groups rarely share a key (a copy of an event in each): the second's
// batch is then refused and its events take the per-event path.
const inFlight = 2

// run writes groups until close, and returns once the last one is written
// and every outcome submit handed out has been handled.
func (b *batcher) run() { b.w.Start(context.Background())() }

// close stops the batcher once no event is handed over any more: the
// groups queued are written first; run then returns.
func (b *batcher) close() {
	b.w.Stop()
}

// prepare looks up, before a group's batch, the keys held already: without
// a downstream the LEDGER subjects (a multi_last direct get), which then
// take the per-event path (it adopts or reports them); with one, the
// IDEMPOTENCY keys, and then claims and posts the others (claims). A
// refused batch costs as much as a written one, and one copy of an event
// makes the server refuse the whole batch: a read is far cheaper. A failed
// look-up sends the whole group the per-event way.
func (b *batcher) prepare(ps []*pendingCommit) []batch.Verdict {
	if b.c.down != nil {
		return b.claims(ps)
	}
	v := make([]batch.Verdict, len(ps))
	msgs := make([]*nats.Msg, len(ps))
	for i, p := range ps {
		msgs[i] = b.msg(p)
	}
	held, err := b.present(subjects.LedgerStream, msgs)
	if err != nil {
		b.log.Debug("LEDGER look-up before a batch failed", "events", len(ps), "err", err)
	}
	var keys []string
	for i, p := range ps {
		v[i].Alone = err != nil || held[msgs[i].Subject]
		if !v[i].Alone {
			keys = append(keys, p.env.IdempotencyKey)
		}
	}
	if len(keys) >= 2 && b.c.hooks != nil && b.c.hooks.beforeLedgerBatch != nil {
		b.c.hooks.beforeLedgerBatch(keys)
	}
	return v
}

// claims takes the claims of ps (with a downstream) as one atomic batch of
// creates, each conditional on its key being absent, then posts the
// claimed events concurrently; the events the downstream accepted stay in
// the LEDGER batch. Keys IDEMPOTENCY holds already (committed, claimed by
// another validator, released) are found first with one read and take the
// per-event path, which knows what each state means; so does the group
// when the claims batch is refused or fails. A failed POST ends its event
// (released when transient, as on the per-event path).
func (b *batcher) claims(ps []*pendingCommit) []batch.Verdict {
	v := make([]batch.Verdict, len(ps))
	keys := make([]*nats.Msg, len(ps))
	for i, p := range ps {
		st, _ := json.Marshal(b.c.claimState(p.env, p.hash, p.sourceSeq, p.dlqID))
		keys[i] = keyWrite(p.env.IdempotencyKey, st, 0)
	}
	held, err := b.present(subjects.BucketStream(subjects.IdempotencyBucket), keys)
	var todo []int
	for i := range ps {
		if v[i].Alone = err != nil || held[keys[i].Subject]; !v[i].Alone {
			todo = append(todo, i)
		}
	}
	if len(todo) < 2 {
		for _, i := range todo {
			v[i].Alone = true
		}
		return v
	}
	todoKeys := make([]*nats.Msg, len(todo))
	for j, i := range todo {
		todoKeys[j] = keys[i]
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	revs, err := batch.Publish(ctx, b.c.js, todoKeys)
	cancel()
	if err != nil {
		b.log.Debug("claims batch not written", "events", len(todo), "err", err)
		for _, i := range todo {
			v[i].Alone = true
		}
		return v
	}
	b.batches.Add(1)
	var wg sync.WaitGroup
	for j, i := range todo {
		p := ps[i]
		var st KeyState
		_ = json.Unmarshal(todoKeys[j].Data, &st)
		p.claim = &claim{rev: revs[j], state: st}
		if b.c.hooks != nil && b.c.hooks.afterClaim != nil {
			b.c.hooks.afterClaim(p.env.IdempotencyKey)
		}
		wg.Go(func() {
			if err := b.c.post(p.ctx, p.env, p.data, *p.claim); err != nil {
				v[i].End = &batch.Result{Err: err}
			}
		})
	}
	wg.Wait()
	return v
}

// afterBatch runs once a group's LEDGER batch is stored (at seqs): it
// writes the committed marks of ps as one atomic batch, each conditional
// on its key being absent (or, with a downstream, on its claim's
// revision); when that fails, each key is marked on its own, as the
// per-event path does it (a claim taken over meanwhile, its lease run
// out, refuses the batch).
func (b *batcher) afterBatch(ps []*pendingCommit, seqs []uint64) []error {
	msgs := make([]*nats.Msg, len(ps))
	for i, p := range ps {
		if b.c.hooks != nil && b.c.hooks.afterLedger != nil {
			b.c.hooks.afterLedger(p.env.IdempotencyKey)
		}
		if p.claim != nil {
			msgs[i] = keyWrite(p.env.IdempotencyKey, b.c.doneState(*p.claim, seqs[i]), p.claim.rev)
		} else {
			msgs[i] = keyWrite(p.env.IdempotencyKey, b.c.committedState(p.env, p.hash, p.sourceSeq, seqs[i], p.dlqID), 0)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	_, err := batch.Publish(ctx, b.c.js, msgs)
	cancel()
	errs := make([]error, len(ps))
	if err == nil {
		return errs
	}
	if errors.Is(err, batch.ErrDisabled) {
		b.w.Disable(fmt.Errorf("the IDEMPOTENCY bucket: %w", err))
	}
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			if p.claim != nil {
				errs[i] = b.c.markClaimed(p.ctx, p.env.IdempotencyKey, *p.claim, seqs[i])
			} else {
				errs[i] = b.c.mark(p.ctx, p.env, p.hash, p.sourceSeq, seqs[i], p.dlqID)
			}
		})
	}
	wg.Wait()
	return errs
}

// present returns the subjects of msgs that stream holds a message on.
func (b *batcher) present(stream string, msgs []*nats.Msg) (map[string]bool, error) {
	subs := make([]string, len(msgs))
	for i, m := range msgs {
		subs[i] = m.Subject
	}
	found := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	for len(subs) > 0 {
		chunk := subs[:min(len(subs), streams.MaxMultiLast)]
		subs = subs[len(chunk):]
		n := 0
		pending, err := streams.DirectGet(ctx, b.c.js, stream, streams.DirectRequest{MultiLast: chunk, MaxBytes: lookupMaxBytes},
			func(m *jetstream.RawStreamMsg) error {
				found[m.Subject] = true
				n++
				return nil
			})
		if err != nil {
			return nil, err
		}
		if pending > 0 { // the reply was cut: ask again for the rest of the chunk
			for _, s := range chunk {
				if !found[s] {
					subs = append(subs, s)
				}
			}
			if n == 0 {
				return nil, fmt.Errorf("validator: a multi_last reply holds nothing but %d are pending", pending)
			}
		}
	}
	return found, nil
}

// keyWrite is a write of an IDEMPOTENCY key's state as a batch carries
// it: conditional on the key's last revision being rev (0: the key is
// absent), as kv.Create and kv.Update make it.
func keyWrite(key string, state []byte, rev uint64) *nats.Msg {
	m := nats.NewMsg(subjects.BucketKey(subjects.IdempotencyBucket, key))
	m.Data = state
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rev, 10))
	return m
}

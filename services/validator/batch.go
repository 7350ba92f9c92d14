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

// pendingCommit is one event waiting in the batcher for its commit.
type pendingCommit struct {
	env       envelope.Envelope
	data      []byte
	hash      string // idempotency.ContentHash of data
	sourceSeq uint64
	dlqID     string
	// ctx is the delivery's: the per-event fallback runs in it.
	ctx  context.Context
	done chan commitResult // buffered: the batcher never waits on it
	// then, when set, receives the outcome instead of done, on a
	// goroutine of its own (submit): the worker that handed the event over
	// is already handling the next one.
	then func(ledgerSeq uint64, err error)
	cbs  *sync.WaitGroup
}

// finish delivers the event's outcome, once.
func (p *pendingCommit) finish(r commitResult) {
	if p.then == nil {
		p.done <- r
		return
	}
	p.cbs.Go(func() { p.then(r.ledgerSeq, r.err) })
}

type commitResult struct {
	ledgerSeq uint64
	err       error
}

// batcher commits the events of a validator without a downstream in
// atomic batches: the LEDGER messages of the events ready at the same time
// in one write, then their IDEMPOTENCY marks in another. Under
// sync_interval: always each write costs one fsync, so a batch of n events
// costs two instead of 2n (where the servers fsync every write, for
// groups of batch.SyncMinBatch or more; else when batches are measured the
// cheaper way: see batch.Chooser).
// Nothing waits to fill a batch: a batch holds
// what the workers handed over while the previous one was being written
// (natural batching), so an idle validator commits one event with the
// latency of one write.
//
// The guarantees are the per-event protocol's (committer): each LEDGER
// message is conditional on its key's subject being empty and carries the
// key as Nats-Msg-Id, so a batch stores all its events or none. A batch the
// server refuses (a key committed before, by an earlier copy of the event
// or a validator that died after its LEDGER write) is split in halves until
// the refused event is alone; that one takes the per-event path, which
// adopts an existing LEDGER message or reports the duplicate (same
// content) or the IDEMPOTENCY_CONFLICT (other content). LEDGER keeps one
// message per subject (the server refuses a second one, 10077, and a batch
// holding one as a whole): a batch refused for it falls back the same
// way, one event at a time. A missing
// mark (the marks' batch failed, or the validator died before it) only
// costs a LEDGER lookup: every reader treats LEDGER as the truth, and the
// per-event path marks it.
type batcher struct {
	c   *committer
	max int
	log *slog.Logger
	in  chan *pendingCommit
	// off is set when LEDGER or the IDEMPOTENCY bucket does not allow
	// atomic publish (provisioned by an earlier version): every event then
	// takes the per-event path until the validator restarts.
	off atomic.Bool
	// batches, fallbacks count written batches and events that took the
	// per-event path (tests and metrics).
	batches, fallbacks atomic.Uint64
	m                  *metrics
	// cbs counts the outcomes of submit being handled.
	cbs sync.WaitGroup

	// chooser says whether a group is written as batches or one event
	// at a time (batches with SyncAlways, else measured: batch.Chooser).
	chooser batch.Chooser
}

// newBatcher returns a batcher of groups of at most maxBatch events on
// the stores o describes (its fsync setting and replicas decide how groups
// are written: batch.Chooser).
func newBatcher(c *committer, maxBatch int, o streams.Options, log *slog.Logger, m *metrics) *batcher {
	b := &batcher{c: c, max: min(maxBatch, batch.MaxMessages), log: log, in: make(chan *pendingCommit, maxBatch), m: m}
	b.chooser.SyncAlways, b.chooser.Replicas = o.SyncAlways, o.Replicas
	m.preferBatches(b.chooser.PrefersBatches()) // 1 from the start with SyncAlways
	return b
}

// submit hands an event to the batcher and returns at once (it waits only
// while the batcher's queue is full): then receives the outcome on a
// goroutine of its own once the event's group is written. So the events in
// flight are bounded by the consumer's MaxAckPending and the queue, not by
// the workers, who would otherwise each wait out a group's writes.
func (b *batcher) submit(ctx context.Context, env envelope.Envelope, data []byte, hash string, sourceSeq uint64, dlqID string, then func(uint64, error)) {
	if b.off.Load() {
		b.cbs.Go(func() { then(b.c.commitOne(ctx, env, data, hash, sourceSeq, dlqID)) })
		return
	}
	p := &pendingCommit{env: env, data: data, hash: hash, sourceSeq: sourceSeq, dlqID: dlqID, ctx: ctx, then: then, cbs: &b.cbs}
	select {
	case b.in <- p:
	case <-ctx.Done():
		b.cbs.Go(func() { then(0, ctx.Err()) })
	}
}

// wait returns once every outcome submit handed out has been handled.
func (b *batcher) wait() { b.cbs.Wait() }

// commit hands an event to the batcher and waits for its commit, or for
// ctx.
func (b *batcher) commit(ctx context.Context, env envelope.Envelope, data []byte, hash string, sourceSeq uint64, dlqID string) (uint64, error) {
	if b.off.Load() {
		return b.c.commitOne(ctx, env, data, hash, sourceSeq, dlqID)
	}
	p := &pendingCommit{env: env, data: data, hash: hash, sourceSeq: sourceSeq, dlqID: dlqID, ctx: ctx, done: make(chan commitResult, 1)}
	select {
	case b.in <- p:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case r := <-p.done:
		return r.ledgerSeq, r.err
	case <-ctx.Done():
		// The batch may still commit it: the redelivery finds the LEDGER
		// message and adopts it.
		return 0, ctx.Err()
	}
}

// inFlight is how many groups are written at once: while one group's
// batches wait for the server, the next one gathers and is written too.
// Two groups rarely share a key (a copy of an event in each): the second's
// batch is then refused and its events take the per-event path.
const inFlight = 2

// run writes groups until in is closed, with up to inFlight at once, and
// returns when the last one is written. A group written one event at a
// time where that is the preferred way (batch.Chooser) gives its slot back
// as soon as it starts: nothing gathers behind it that a batch would save,
// and the events that arrive meanwhile would only wait.
func (b *batcher) run() {
	slots := make(chan struct{}, inFlight)
	var groups sync.WaitGroup
	for {
		slots <- struct{}{} // a free slot first: the group gathers meanwhile
		p, ok := <-b.in
		if !ok {
			break
		}
		group := make([]*pendingCommit, 1, b.max)
		group[0] = p
	fill:
		for len(group) < b.max {
			select {
			case q, ok := <-b.in:
				if !ok {
					break fill
				}
				group = append(group, q)
			default:
				break fill
			}
		}
		groups.Go(func() {
			var once sync.Once
			release := func() { once.Do(func() { <-slots }) }
			defer release()
			b.write(group, release)
		})
	}
	groups.Wait()
}

// write commits one group: a key twice in the group (two copies of one
// event) is committed once in the batch, and its other copies take the
// per-event path after it, which acknowledges them as duplicates. release
// gives the group's slot back early (run).
func (b *batcher) write(group []*pendingCommit, release func()) {
	seen := make(map[string]bool, len(group))
	first := make([]*pendingCommit, 0, len(group))
	var again []*pendingCommit
	for _, p := range group {
		if seen[p.env.IdempotencyKey] {
			again = append(again, p)
			continue
		}
		seen[p.env.IdempotencyKey] = true
		first = append(first, p)
	}
	// The batcher's batch.Chooser plans and measures the group (Write):
	// its events one at a time, or in batches, or (a probe) a few one at a
	// time and the rest in batches. Groups of fewer than batch.MinGroup
	// events follow the preferred way and are not measured (a batch's fixed
	// cost would weigh too much). The events ledger and downstream write
	// one at a time after all (a key LEDGER holds, a refused batch) are
	// timed with their batch.
	b.chooser.Write(len(first), func(lo, hi int) {
		if hi-lo == len(first) && !b.chooser.PrefersBatches() {
			release()
		}
		b.oneByOne(first[lo:hi])
	}, func(lo, hi int) bool {
		if b.c.down != nil {
			b.downstream(first[lo:hi])
		} else {
			b.ledger(first[lo:hi])
		}
		return true
	})
	b.m.preferBatches(b.chooser.PrefersBatches())
	b.oneByOne(again)
}

// ledger commits ps: the keys LEDGER holds already (an earlier copy of
// the event, or a validator that died after its LEDGER write) are found
// first with one read (a multi_last direct get), and take the per-event
// path, which adopts or reports them; the others are written as one
// atomic batch, then marked. A refused batch costs as much as a written
// one, and one copy of an event makes the server refuse the whole batch:
// a read is far cheaper. A batch refused all the same (another instance
// wrote one of its keys meanwhile) is written one event at a time.
func (b *batcher) ledger(ps []*pendingCommit) {
	if len(ps) < 2 || b.off.Load() {
		// One event: the per-event path is one plain conditional write,
		// cheaper than a batch.
		b.oneByOne(ps)
		return
	}
	msgs := make([]*nats.Msg, len(ps))
	for i, p := range ps {
		msgs[i] = b.c.ledgerMsg(p.env, p.data, p.hash, p.sourceSeq, p.dlqID)
	}
	written, err := b.present(subjects.LedgerStream, msgs)
	if err != nil {
		b.log.Debug("LEDGER look-up before a batch failed", "events", len(ps), "err", err)
		b.oneByOne(ps)
		return
	}
	ps, msgs, later := split(ps, msgs, written)
	defer b.oneByOne(later)
	if len(ps) < 2 {
		b.oneByOne(ps)
		return
	}
	if b.c.hooks != nil && b.c.hooks.beforeLedgerBatch != nil {
		keys := make([]string, len(ps))
		for i, p := range ps {
			keys[i] = p.env.IdempotencyKey
		}
		b.c.hooks.beforeLedgerBatch(keys)
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	seqs, err := batch.Publish(ctx, b.c.js, msgs)
	cancel()
	if err != nil {
		if errors.Is(err, batch.ErrDisabled) && !b.off.Swap(true) {
			b.log.Warn("LEDGER does not allow atomic publish: committing one event at a time; provision again to turn it on", "err", err)
		}
		// Refused (a key written meanwhile, by anyone: LEDGER refuses a
		// second message on a subject, 10077, and the expectation fails,
		// 10071; either refuses the whole batch) or an unknown outcome:
		// the per-event path's conditional write says which, and takes
		// the written key to the content comparison (duplicate or
		// IDEMPOTENCY_CONFLICT).
		b.log.Debug("LEDGER batch not written", "events", len(ps), "err", err)
		b.oneByOne(ps)
		return
	}
	b.batches.Add(1)
	b.m.batch(len(ps))
	if b.c.hooks != nil && b.c.hooks.afterLedger != nil {
		for _, p := range ps {
			b.c.hooks.afterLedger(p.env.IdempotencyKey)
		}
	}
	b.marks(ps, seqs)
}

// downstream commits ps with a downstream system of record, the
// per-event protocol (claim, POST, LEDGER, mark) with each store step of
// the group in one atomic batch: the claims (creates, each conditional on
// its key being absent), the POSTs concurrently, the LEDGER messages of the
// events the downstream accepted, their marks (each conditional on its
// claim's revision). Keys IDEMPOTENCY holds already (committed, claimed by
// another validator, released) are found first with one read and take the
// per-event path, which knows what each state means; so does the group
// when a batch is refused or fails, from the step it reached.
func (b *batcher) downstream(ps []*pendingCommit) {
	keys := make([]*nats.Msg, len(ps))
	for i, p := range ps {
		st, _ := json.Marshal(b.c.claimState(p.env, p.hash, p.sourceSeq, p.dlqID))
		keys[i] = keyWrite(p.env.IdempotencyKey, st, 0)
	}
	held, err := b.present(subjects.BucketStream(subjects.IdempotencyBucket), keys)
	if err != nil {
		b.oneByOne(ps)
		return
	}
	todo, todoKeys, later := split(ps, keys, held)
	defer b.oneByOne(later)
	if len(todo) < 2 {
		b.oneByOne(todo)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	revs, err := batch.Publish(ctx, b.c.js, todoKeys)
	cancel()
	if err != nil {
		b.log.Debug("claims batch not written", "events", len(todo), "err", err)
		b.oneByOne(todo)
		return
	}
	b.batches.Add(1)
	claims := make([]claim, len(todo))
	for i, p := range todo {
		var st KeyState
		_ = json.Unmarshal(todoKeys[i].Data, &st)
		claims[i] = claim{rev: revs[i], state: st}
		if b.c.hooks != nil && b.c.hooks.afterClaim != nil {
			b.c.hooks.afterClaim(p.env.IdempotencyKey)
		}
	}
	// The POSTs, concurrently; a failed one ends its event (released when
	// transient, as on the per-event path).
	accepted := make([]bool, len(todo))
	var wg sync.WaitGroup
	for i, p := range todo {
		wg.Go(func() {
			if err := b.c.post(p.ctx, p.env, p.data, claims[i]); err != nil {
				p.finish(commitResult{err: err})
				return
			}
			accepted[i] = true
		})
	}
	wg.Wait()
	var ok []*pendingCommit
	var okClaims []claim
	var ledgerMsgs []*nats.Msg
	for i, p := range todo {
		if accepted[i] {
			ok, okClaims = append(ok, p), append(okClaims, claims[i])
			ledgerMsgs = append(ledgerMsgs, b.c.ledgerMsg(p.env, p.data, p.hash, p.sourceSeq, p.dlqID))
		}
	}
	if len(ok) == 0 {
		return
	}
	ctx, cancel = context.WithTimeout(context.Background(), batchTimeout)
	seqs, err := batch.Publish(ctx, b.c.js, ledgerMsgs)
	cancel()
	if err != nil {
		// Refused (a key LEDGER holds from a validator without a
		// downstream) or unknown: each event's own conditional write.
		b.log.Debug("LEDGER batch not written", "events", len(ok), "err", err)
		for i, p := range ok {
			wg.Go(func() {
				seq, err := b.c.finish(p.ctx, p.env, p.data, p.hash, p.sourceSeq, p.dlqID, okClaims[i])
				p.finish(commitResult{ledgerSeq: seq, err: err})
			})
		}
		wg.Wait()
		return
	}
	b.batches.Add(1)
	b.m.batch(len(ok))
	marks := make([]*nats.Msg, len(ok))
	for i, p := range ok {
		if b.c.hooks != nil && b.c.hooks.afterLedger != nil {
			b.c.hooks.afterLedger(p.env.IdempotencyKey)
		}
		marks[i] = keyWrite(p.env.IdempotencyKey, b.c.doneState(okClaims[i], seqs[i]), okClaims[i].rev)
	}
	ctx, cancel = context.WithTimeout(context.Background(), batchTimeout)
	_, err = batch.Publish(ctx, b.c.js, marks)
	cancel()
	for i, p := range ok {
		if err == nil {
			p.finish(commitResult{ledgerSeq: seqs[i]})
			continue
		}
		// A claim taken over meanwhile (its lease ran out) refuses the
		// batch: each mark on its own, as the per-event path does it.
		wg.Go(func() {
			p.finish(commitResult{ledgerSeq: seqs[i], err: b.c.markClaimed(p.ctx, p.env.IdempotencyKey, okClaims[i], seqs[i])})
		})
	}
	wg.Wait()
}

// split separates the events of ps whose message (msgs[i]) writes a
// subject the stream holds already (present) from the others, keeping
// each message with its event.
func split(ps []*pendingCommit, msgs []*nats.Msg, present map[string]bool) (todo []*pendingCommit, todoMsgs []*nats.Msg, later []*pendingCommit) {
	for i, p := range ps {
		if present[msgs[i].Subject] {
			later = append(later, p)
		} else {
			todo, todoMsgs = append(todo, p), append(todoMsgs, msgs[i])
		}
	}
	return todo, todoMsgs, later
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

// marks writes the committed states of ps (committed in LEDGER at seqs) as
// one atomic batch of creates; when that fails, each key is marked on its
// own (a key with a claim on it is overwritten, as the per-event path
// does).
func (b *batcher) marks(ps []*pendingCommit, seqs []uint64) {
	msgs := make([]*nats.Msg, len(ps))
	for i, p := range ps {
		msgs[i] = keyWrite(p.env.IdempotencyKey, b.c.committedState(p.env, p.hash, p.sourceSeq, seqs[i], p.dlqID), 0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	_, err := batch.Publish(ctx, b.c.js, msgs)
	cancel()
	if err == nil {
		for i, p := range ps {
			p.finish(commitResult{ledgerSeq: seqs[i]})
		}
		return
	}
	if errors.Is(err, batch.ErrDisabled) && !b.off.Swap(true) {
		b.log.Warn("the IDEMPOTENCY bucket does not allow atomic publish: committing one event at a time; provision again to turn it on", "err", err)
	}
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			p.finish(commitResult{ledgerSeq: seqs[i], err: b.c.mark(p.ctx, p.env, p.hash, p.sourceSeq, seqs[i], p.dlqID)})
		})
	}
	wg.Wait()
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

// oneByOne commits each of ps on the per-event path, concurrently, and
// waits for them.
func (b *batcher) oneByOne(ps []*pendingCommit) {
	if len(ps) == 0 {
		return
	}
	b.fallbacks.Add(uint64(len(ps)))
	b.m.fallback(len(ps))
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() {
			seq, err := b.c.commitOne(p.ctx, p.env, p.data, p.hash, p.sourceSeq, p.dlqID)
			p.finish(commitResult{ledgerSeq: seq, err: err})
		})
	}
	wg.Wait()
}

package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// replayFlushers is how many atomic batches of replays may be in flight
// on EVENTS at once: while one waits for its acknowledgement, the next
// one gathers the replays published meanwhile.
const replayFlushers = 2

// replayBatchBytes bounds the payload bytes of one batch (a corrected
// payload may be up to MaxPayload).
const replayBatchBytes = 4 << 20

// publishTimeout bounds one replay publish, batched or not.
const publishTimeout = 10 * time.Second

// errUnbatched tells a replay's publisher to write its message alone: the
// batch it was in was refused as a whole (a replay already stored on its
// subject: a resumed replay), failed (its outcome unknown: the message
// expects its subject empty, so a second write is refused and resolves to
// the stored copy, publishAlone), or the batcher stopped.
var errUnbatched = errors.New("redriver: replay not batched")

// replayBatcher gathers the replays that a drain's lanes publish at about
// the same moment into atomic batches on EVENTS (package batch): one
// proposal, and under sync_interval: always one fsync, for up to
// batch.MaxMessages replays, where one publish each costs one each. Each
// replay keeps its own subject, its expectation that the subject is empty
// (see publishAlone) and its HMAC Nats-Msg-Id, and its lane waits for its
// own acknowledgement, so what happens between claim and replay and between
// replay and outcome is unchanged: a lane's next event is replayed only
// after the previous one's outcome, whatever batch carried it. A batch
// that is not stored as a whole is written again message by message, by
// each lane (the path of an unbatched publish).
//
// A group of replays is written as one batch only when the batcher's
// batch.Chooser plans it so (always where the servers fsync every write;
// measured otherwise, and on one server without fsync one publish each is
// cheaper); otherwise the flusher publishes the group's replays itself,
// concurrently, each exactly as its lane would (publishAlone), answers
// each lane with its own acknowledgement, and times the group for the
// chooser. ReplayLinger applies before the choice, as before.
type replayBatcher struct {
	js  jetstream.JetStream
	log *slog.Logger
	// max is the most replays per batch (at most batch.MaxMessages).
	max int
	// linger is how long a batch smaller than max waits for more.
	linger time.Duration

	mu    sync.Mutex
	queue []*pubReq
	// closed: no flusher runs (before run, after stop); replays are
	// then written alone.
	closed bool
	wake   chan struct{}

	// disabled is set when EVENTS does not allow atomic publish (a store
	// provisioned before it did): every replay is then written alone.
	disabled atomic.Bool
	metrics  *Metrics
	// chooser says whether a group is written as one atomic batch or one
	// publish per replay (batches with SyncAlways, else measured; shared
	// by the flushers).
	chooser batch.Chooser
}

// pubReq is one replay waiting for its batch.
type pubReq struct {
	msg  *nats.Msg
	done chan pubResult
}

type pubResult struct {
	ack *jetstream.PubAck
	err error
}

// newReplayBatcher returns a batcher of up to maxMsgs replays a batch, on
// the stores o describes (its fsync setting and replicas decide how groups
// are written: batch.Chooser).
func newReplayBatcher(js jetstream.JetStream, log *slog.Logger, m *Metrics, maxMsgs int, linger time.Duration, o streams.Options) *replayBatcher {
	b := &replayBatcher{js: js, log: log, metrics: m, max: min(maxMsgs, batch.MaxMessages), linger: linger, wake: make(chan struct{}, 1), closed: true}
	b.chooser.SyncAlways, b.chooser.Replicas = o.SyncAlways, o.Replicas
	m.preferBatches(b.chooser.PrefersBatches()) // 1 from the start with SyncAlways
	return b
}

// run starts the flushers. When ctx ends they stop, and every replay still
// queued, or published later, is written alone by its lane; the returned
// func waits for them.
func (b *replayBatcher) run(ctx context.Context) (wait func()) {
	b.mu.Lock()
	b.closed = false
	b.mu.Unlock()
	var wg sync.WaitGroup
	for range replayFlushers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.flusher(ctx)
		}()
	}
	return wg.Wait
}

// close stops the batching: the replays queued are answered errUnbatched.
func (b *replayBatcher) close() {
	b.mu.Lock()
	b.closed = true
	q := b.queue
	b.queue = nil
	b.mu.Unlock()
	for _, r := range q {
		r.done <- pubResult{err: errUnbatched}
	}
}

// publish writes replay m (its subject its own, expected empty: see
// publishAlone) to EVENTS and returns its acknowledgement, or the stored
// copy's when the replay was stored before: in a batch when the batcher
// runs, else alone.
func (b *replayBatcher) publish(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	if b.max < 2 || b.disabled.Load() {
		return publishAlone(ctx, b.js, m)
	}
	r := &pubReq{msg: m, done: make(chan pubResult, 1)}
	if !b.submit(r) {
		return publishAlone(ctx, b.js, m)
	}
	select {
	case res := <-r.done:
		if errors.Is(res.err, errUnbatched) {
			return publishAlone(ctx, b.js, m)
		}
		return res.ack, res.err
	case <-ctx.Done():
		// The batch may still be stored: the chain stays redriving and
		// its resume publishes the same replay, on the same subject.
		return nil, ctx.Err()
	}
}

// publishAlone writes one replay by itself into EVENTS. The replay is on a
// subject of its own (subjects.Redriven: one per chain and replay number)
// and expects that subject to be empty (Nats-Expected-Last-Subject-Sequence
// 0, set by the caller), so the server stores it at most once: a retry (a
// re-publish after a lost acknowledgement, the resume of a chain left
// redriving, by this or another instance) is refused with a wrong last
// sequence, and the replay already stored is then read back (a direct get
// of the subject's last message) and returned as if this publish had been
// acknowledged with its sequence (Duplicate set). Unlike a Nats-Msg-Id
// window (REPLAYS' two minutes) this holds for as long as EVENTS keeps the
// replay, at any time after its first publish: only once EVENTS no longer
// holds it (its max age, 7 days by default) could a retry be stored again.
func publishAlone(ctx context.Context, js jetstream.JetStream, m *nats.Msg) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	ack, err := js.PublishMsg(ctx, m)
	if err == nil || !storedBefore(err) {
		return ack, err
	}
	return stored(ctx, js, m.Subject)
}

// errNotStored: a replay's publish was refused as already stored, yet its
// subject holds nothing (a replicated stream's write still in flight): the
// outcome is unknown, and the chain stays redriving for a later resume.
var errNotStored = errors.New("redriver: replay refused as stored, but its subject is empty")

// storedBefore reports whether err is the refusal of a publish whose
// subject already holds a message (its expectation of an empty subject
// failed).
func storedBefore(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// stored returns, as an acknowledgement (Duplicate set), the location of
// the replay stored on subject in EVENTS.
func stored(ctx context.Context, js jetstream.JetStream, subject string) (*jetstream.PubAck, error) {
	st, err := js.Stream(ctx, subjects.EventsStream)
	if err != nil {
		return nil, fmt.Errorf("redriver: read the stored replay: %w", err)
	}
	raw, err := st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, errNotStored
	}
	if err != nil {
		return nil, fmt.Errorf("redriver: read the stored replay: %w", err)
	}
	return &jetstream.PubAck{Stream: subjects.EventsStream, Sequence: raw.Sequence, Duplicate: true}, nil
}

// submit queues r; false when the batcher stopped.
func (b *replayBatcher) submit(r *pubReq) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.queue = append(b.queue, r)
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return true
}

// take removes the next batch from the queue: up to max replays and
// replayBatchBytes of payload (at least one).
func (b *replayBatcher) take() []*pubReq {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, size := 0, 0
	for n < len(b.queue) && n < b.max {
		size += len(b.queue[n].msg.Data)
		if n > 0 && size > replayBatchBytes {
			break
		}
		n++
	}
	out := make([]*pubReq, n)
	copy(out, b.queue)
	clear(b.queue[:n])
	b.queue = b.queue[n:]
	if len(b.queue) > 0 {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
	return out
}

// queued returns how many replays wait for a batch.
func (b *replayBatcher) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// flusher writes the queued replays, a batch at a time, until ctx ends.
func (b *replayBatcher) flusher(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			b.close()
			return
		case <-b.wake:
		}
		if b.linger > 0 && b.queued() < b.max {
			t := time.NewTimer(b.linger)
			select {
			case <-ctx.Done():
				t.Stop()
				b.close()
				return
			case <-t.C:
			}
		}
		if reqs := b.take(); len(reqs) > 0 {
			b.flush(reqs)
		}
	}
}

// flush writes reqs as one atomic batch, or one by one when the chooser
// measured that cheaper (or tries that way on some of them: Plan), and
// answers each (errUnbatched when the batch was
// not stored as a whole).
func (b *replayBatcher) flush(reqs []*pubReq) {
	// A lone replay is published as its lane would (publishAlone), by the
	// flusher.
	b.chooser.Write(len(reqs), func(lo, hi int) { b.each(reqs[lo:hi]) }, func(lo, hi int) bool { return b.batch(reqs[lo:hi]) })
	b.metrics.preferBatches(b.chooser.PrefersBatches())
}

// batch writes reqs as one atomic batch and answers each (errUnbatched when
// the batch was not stored as a whole); it reports whether it was stored.
func (b *replayBatcher) batch(reqs []*pubReq) bool {
	msgs := make([]*nats.Msg, len(reqs))
	for i, r := range reqs {
		msgs[i] = r.msg
	}
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	seqs, err := batch.Publish(ctx, b.js, msgs)
	cancel()
	if err != nil {
		b.metrics.Unbatched.Inc()
		if errors.Is(err, batch.ErrDisabled) && !b.disabled.Swap(true) {
			b.log.Warn("EVENTS does not allow atomic publish: replays are written one by one", "stream", subjects.EventsStream)
		} else {
			b.log.Debug("replay batch not stored as a whole: written one by one", "replays", len(reqs), "err", err)
		}
		for _, r := range reqs {
			r.done <- pubResult{err: errUnbatched}
		}
		return false
	}
	b.metrics.Batches.Inc()
	b.metrics.Batched.Add(float64(len(reqs)))
	for i, r := range reqs {
		r.done <- pubResult{ack: &jetstream.PubAck{Stream: subjects.EventsStream, Sequence: seqs[i]}}
	}
	return true
}

// each publishes reqs one by one, concurrently, as their lanes would
// (publishAlone: each on its own subject, expected empty), answers each with its own outcome, and
// returns once all are answered, so that the group's wall time compares
// with a batch's.
func (b *replayBatcher) each(reqs []*pubReq) {
	var wg sync.WaitGroup
	for _, r := range reqs {
		wg.Go(func() {
			ack, err := publishAlone(context.Background(), b.js, r.msg)
			r.done <- pubResult{ack: ack, err: err}
		})
	}
	wg.Wait()
}

package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// replayBatcher gathers the replays that a drain's lanes publish at about
// the same moment into atomic batches on EVENTS: one proposal, and under
// sync_interval: always one fsync, for up to batch.MaxMessages replays,
// where one publish each costs one each. It is a batch.Writer of replay
// messages; what is the replay's own is what a replay message is (its own
// subject, expected empty, and its HMAC Nats-Msg-Id) and how it is
// written alone (publishAlone: a replay stored before resolves to the
// stored copy). Each lane waits for its own replay's outcome, so what
// happens between claim and replay and between replay and outcome is
// unchanged: a lane's next event is replayed only after the previous
// one's outcome, whatever batch carried it. A batch that is not stored as
// a whole (refused: a resumed replay already stored; or its outcome
// unknown) is written again replay by replay (publishAlone).
//
// A group of replays is written as one batch only when the batcher's
// batch.Chooser plans it so (always where the servers fsync every write;
// measured otherwise, and on one server without fsync one publish each is
// cheaper); otherwise each replay of the group is published alone,
// concurrently. ReplayLinger applies before the choice. Before Run and
// after its context ends, replays are written alone.
type replayBatcher struct {
	w  *batch.Writer[*nats.Msg]
	js jetstream.JetStream
	// max is the most replays per batch (at most batch.MaxMessages).
	max int
	// chooser says whether a group is written as one atomic batch or one
	// publish per replay (batches with SyncAlways, else measured; shared
	// by the flushers).
	chooser batch.Chooser
	// beforeGather, when set, runs when a group's first replay is taken
	// (tests).
	beforeGather func()
}

// newReplayBatcher returns a batcher of up to maxMsgs replays a batch, on
// the stores o describes (its fsync setting and replicas decide how groups
// are written: batch.Chooser).
func newReplayBatcher(js jetstream.JetStream, log *slog.Logger, m *Metrics, maxMsgs int, linger time.Duration, o streams.Options) *replayBatcher {
	b := &replayBatcher{js: js, max: min(maxMsgs, batch.MaxMessages)}
	b.chooser.SyncAlways, b.chooser.Replicas = o.SyncAlways, o.Replicas
	b.w = batch.NewWriter(batch.Config[*nats.Msg]{
		JS: js, Stream: subjects.EventsStream, Log: log,
		Msg:      func(m *nats.Msg) *nats.Msg { return m },
		Chooser:  &b.chooser,
		Max:      b.max,
		MaxBytes: replayBatchBytes,
		Linger:   linger,
		InFlight: replayFlushers,
		Timeout:  publishTimeout,
		Alone: func(ctx context.Context, m *nats.Msg) batch.Result {
			ack, err := publishAlone(ctx, js, m)
			return batch.Result{Ack: ack, Err: err}
		},
		BeforeGather: func(*nats.Msg) {
			if b.beforeGather != nil {
				b.beforeGather()
			}
		},
		OnBatch: func(n int) {
			m.Batches.Inc()
			m.Batched.Add(float64(n))
		},
		OnNotStored: func(int, error) { m.Unbatched.Inc() },
		OnPrefer:    m.preferBatches,
	})
	return b
}

// run starts the batching until ctx ends; then every replay still queued
// is written, and every one published later is written alone. The
// returned func waits for the replays queued.
func (b *replayBatcher) run(ctx context.Context) (wait func()) { return b.w.Start(ctx) }

// queued returns how many replays wait for a batch (besides a group's
// first, taken already).
func (b *replayBatcher) queued() int { return b.w.Queued() }

// publish writes replay m (its subject its own, expected empty: see
// publishAlone) to EVENTS and returns its acknowledgement, or the stored
// copy's when the replay was stored before: in a batch when the batcher
// runs, else alone.
func (b *replayBatcher) publish(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	if b.max < 2 {
		return publishAlone(ctx, b.js, m)
	}
	r := b.w.Write(ctx, m)
	if r.Alone || r.Err != nil {
		// Written alone (publishAlone), or ctx ended: the batch may still
		// be stored; the chain stays redriving and its resume publishes
		// the same replay, on the same subject.
		return r.Ack, r.Err
	}
	return &jetstream.PubAck{Stream: subjects.EventsStream, Sequence: r.Seq}, nil
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

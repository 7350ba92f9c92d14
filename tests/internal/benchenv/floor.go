package benchenv

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/subjects"
)

// FloorCommit configures the committing side of a store-bound floor: what
// the validator's commit without a downstream stores per event (a LEDGER
// write conditional on the key's subject, with a Nats-Msg-Id; a create of
// the key's commit state; an ack), with none of its checks.
type FloorCommit struct {
	// URL is the server; the committer has its own connection, as the
	// validator has.
	URL string
	// Stream and Consumer name the durable consumer to consume (made with
	// ValidatorConsumer).
	Stream, Consumer string
	// Bucket is the key-value bucket of commit states (it must exist).
	Bucket string
	// Ledger returns a key's LEDGER subject.
	Ledger func(key string) string
	// Workers is how many messages are committed at once.
	Workers int
	// Key returns a message's idempotency key, or an error that fails the
	// message (whatever check the floor charges, if any).
	Key func(m jetstream.Msg) (string, error)
	// Done, when set, is called after each message with its error (nil
	// when committed).
	Done func(error)
	// Batch, when above 0, commits the best way this design knows instead
	// of one event at a time: the messages ready together (up to Batch,
	// nothing waits to fill a group) go to LEDGER as one atomic batch and
	// their states to the bucket as another (or each message as its own
	// pipelined publish: Writes), each message still conditional on its
	// subject, then each is acked. Groups is how many
	// are written at once (default 2, as the validator's batcher).
	Batch, Groups int
	// Writes is what a batched commit writes (default both).
	Writes FloorWrites
}

// FloorWrites is what a batched floor writes per event: the floors
// below the design's bound it, to find the part each write costs.
type FloorWrites int

// What a batched floor writes.
const (
	// FloorLedgerAndState writes LEDGER and the bucket (the design).
	FloorLedgerAndState FloorWrites = iota
	// FloorLedgerOnly writes LEDGER only.
	FloorLedgerOnly
	// FloorAckOnly writes nothing: consume and ack, the ceiling of any
	// design that consumes EVENTS.
	FloorAckOnly
	// FloorPipelined writes LEDGER and the bucket like
	// FloorLedgerAndState, but each message of a group as its own
	// asynchronous publish, all in flight at once, instead of an atomic
	// batch: on a replicated stream the leader packs pipelined writes
	// into its append entries without a batch's staging.
	FloorPipelined
	// FloorLedgerPipelined is FloorPipelined writing LEDGER only.
	FloorLedgerPipelined
)

// floorState is a commit state as the validator stores it.
var floorState = []byte(`{"state":"committed","domain":"pharmacy","event_type":"dispense","source_seq":1,"ledger_seq":1,"committed_at":"2026-11-30T00:00:00Z"}`)

// FloorCommitter is a running FloorCommit.
type FloorCommitter struct {
	nc   *nats.Conn
	cc   jetstream.ConsumeContext
	work chan jetstream.Msg
	wg   sync.WaitGroup

	mu    sync.Mutex
	first error
}

// StartFloorCommitter starts committing what c's consumer delivers.
func StartFloorCommitter(ctx context.Context, c FloorCommit) (*FloorCommitter, error) {
	nc, err := nats.Connect(c.URL, nats.Name("floor-committer"))
	if err != nil {
		return nil, err
	}
	f := &FloorCommitter{nc: nc, work: make(chan jetstream.Msg, c.Workers)}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	kv, err := js.KeyValue(ctx, c.Bucket)
	if err != nil {
		nc.Close()
		return nil, err
	}
	cons, err := js.Consumer(ctx, c.Stream, c.Consumer)
	if err != nil {
		nc.Close()
		return nil, err
	}
	if c.Batch > 0 {
		f.startBatched(js, c)
	}
	for range perEventWorkers(c) {
		f.wg.Go(func() {
			for m := range f.work {
				key, err := c.Key(m)
				if err == nil {
					lm := nats.NewMsg(c.Ledger(key))
					lm.Data = m.Data()
					_, err = js.PublishMsg(ctx, lm, jetstream.WithMsgID(key), jetstream.WithExpectLastSequencePerSubject(0))
				}
				if err == nil {
					_, err = kv.Create(ctx, key, floorState)
				}
				if err == nil {
					err = m.Ack()
				}
				if err != nil {
					f.mu.Lock()
					if f.first == nil {
						f.first = err
					}
					f.mu.Unlock()
				}
				if c.Done != nil {
					c.Done(err)
				}
			}
		})
	}
	if f.cc, err = cons.Consume(func(m jetstream.Msg) { f.work <- m }, jetstream.PullMaxMessages(2*c.Workers)); err != nil {
		close(f.work)
		f.wg.Wait()
		nc.Close()
		return nil, err
	}
	return f, nil
}

// perEventWorkers is how many one-event-at-a-time workers c runs (none
// when it commits in batches).
func perEventWorkers(c FloorCommit) int {
	if c.Batch > 0 {
		return 0
	}
	return c.Workers
}

// startBatched starts c.Groups writers that each take the messages ready
// (at least one, up to c.Batch) and commit them as two atomic batches.
func (f *FloorCommitter) startBatched(js jetstream.JetStream, c FloorCommit) {
	groups := c.Groups
	if groups <= 0 {
		groups = 2
	}
	for range groups {
		f.wg.Go(func() {
			for m := range f.work {
				group := Gather(m, f.work, c.Batch)
				err := f.commitGroup(js, c, group)
				for _, m := range group {
					e := err
					if e == nil {
						e = m.Ack()
					}
					f.fail(e)
					if c.Done != nil {
						c.Done(e)
					}
				}
			}
		})
	}
}

// commitGroup writes a group's LEDGER messages, then its bucket states
// (as c.Writes says: each as an atomic batch or pipelined, or LEDGER only,
// or nothing).
func (f *FloorCommitter) commitGroup(js jetstream.JetStream, c FloorCommit, group []jetstream.Msg) error {
	ledger := make([]*nats.Msg, 0, len(group))
	states := make([]*nats.Msg, 0, len(group))
	for _, m := range group {
		key, err := c.Key(m)
		if err != nil {
			return err
		}
		lm := nats.NewMsg(c.Ledger(key))
		lm.Data = m.Data()
		lm.Header.Set(jetstream.MsgIDHeader, key)
		lm.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		ledger = append(ledger, lm)
		km := nats.NewMsg(subjects.BucketKey(c.Bucket, key))
		km.Data = floorState
		km.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		states = append(states, km)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c.Writes == FloorAckOnly {
		return nil
	}
	write := func(msgs []*nats.Msg) error {
		_, err := batch.Publish(ctx, js, msgs)
		return err
	}
	if c.Writes == FloorPipelined || c.Writes == FloorLedgerPipelined {
		write = func(msgs []*nats.Msg) error { return publishPipelined(ctx, js, msgs) }
	}
	if err := write(ledger); err != nil || c.Writes == FloorLedgerOnly || c.Writes == FloorLedgerPipelined {
		return err
	}
	return write(states)
}

// publishPipelined publishes msgs asynchronously, all in flight at once,
// and waits for every acknowledgement; it returns the first error.
func publishPipelined(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg) error {
	acks := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, m := range msgs {
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			return err
		}
		acks = append(acks, f)
	}
	return AwaitAcks(ctx, acks)
}

// AwaitAcks waits for every acknowledgement of futs and returns the first
// error.
func AwaitAcks(ctx context.Context, futs []jetstream.PubAckFuture) error {
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (f *FloorCommitter) fail(err error) {
	if err == nil {
		return
	}
	f.mu.Lock()
	if f.first == nil {
		f.first = err
	}
	f.mu.Unlock()
}

// Err returns the first error a message met, if any.
func (f *FloorCommitter) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}

// Stop drains the consumer, waits for the messages in hand and closes the
// connection.
func (f *FloorCommitter) Stop() {
	f.cc.Drain()
	<-f.cc.Closed()
	close(f.work)
	f.wg.Wait()
	f.nc.Close()
}

// Gather returns first and what else ch holds ready, up to max in all,
// without waiting for more: natural batching, as deadletter's batchers do
// (what arrived while the previous group was written).
func Gather[T any](first T, ch <-chan T, max int) []T {
	group := []T{first}
	for len(group) < max {
		select {
		case v, ok := <-ch:
			if !ok {
				return group
			}
			group = append(group, v)
		default:
			return group
		}
	}
	return group
}

package benchenv

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
}

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
	for range c.Workers {
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

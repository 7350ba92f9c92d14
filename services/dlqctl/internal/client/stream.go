package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/subjects"
)

// Message is one event to publish.
type Message struct {
	Subject string
	Data    []byte
	// MsgID, when set, is sent as Nats-Msg-Id (JetStream de-duplication).
	MsgID string
}

// Ack is JetStream's acknowledgement of one publish, or its error.
type Ack struct {
	Stream    string
	Seq       uint64
	Duplicate bool
	Err       error
}

// publishWindow is how many publishes are in flight at once.
const publishWindow = 256

// Publish publishes msgs to JetStream with up to publishWindow in flight
// and calls done for each, in the order of msgs.
func (c *Client) Publish(ctx context.Context, msgs []Message, done func(i int, a Ack)) {
	type pending struct {
		i   int
		f   jetstream.PubAckFuture
		err error
	}
	queue := make([]pending, 0, publishWindow)
	wait := func(p pending) {
		if p.err != nil {
			done(p.i, Ack{Err: p.err})
			return
		}
		t := time.NewTimer(c.timeout)
		defer t.Stop()
		select {
		case a := <-p.f.Ok():
			done(p.i, Ack{Stream: a.Stream, Seq: a.Sequence, Duplicate: a.Duplicate})
		case err := <-p.f.Err():
			done(p.i, Ack{Err: publishError(err)})
		case <-t.C:
			done(p.i, Ack{Err: fmt.Errorf("%w: no acknowledgement from JetStream after %s", ErrTimeout, c.timeout)})
		case <-ctx.Done():
			done(p.i, Ack{Err: ctx.Err()})
		}
	}
	for i, m := range msgs {
		if len(queue) == publishWindow {
			wait(queue[0])
			queue = queue[1:]
		}
		var opts []jetstream.PublishOpt
		if m.MsgID != "" {
			opts = append(opts, jetstream.WithMsgID(m.MsgID))
		}
		f, err := c.js.PublishMsgAsync(&nats.Msg{Subject: m.Subject, Data: m.Data}, opts...)
		queue = append(queue, pending{i: i, f: f, err: publishError(err)})
	}
	for _, p := range queue {
		wait(p)
	}
}

// publishError explains the usual publish failures.
func publishError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("%w: no stream stores this subject: %v", ErrNoResponders, err)
	}
	return err
}

// TailOptions selects the records of Tail.
type TailOptions struct {
	// Since starts at the first record written at or after it; zero: only
	// new records. All starts at the first record of the stream.
	Since time.Time
	All   bool
	// Domain restricts to one domain, DLQID to one chain (both optional).
	Domain string
	DLQID  string
}

// Tail reads QUARANTINE with an ordered consumer (no durable state, no
// acknowledgements, readable by the client user) and calls fn for each
// record until ctx is done or fn returns false. ready, when not nil, is
// called once the consumer exists.
func (c *Client) Tail(ctx context.Context, o TailOptions, ready func(), fn func(seq uint64, data []byte) bool) error {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy, InactiveThreshold: time.Minute}
	switch {
	case o.All:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	case !o.Since.IsZero():
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		since := o.Since
		cfg.OptStartTime = &since
	}
	filter := subjects.QuarantineAll
	switch {
	case o.DLQID != "" && o.Domain != "":
		filter = subjects.Quarantine(o.Domain, o.DLQID)
	case o.DLQID != "":
		filter = "quarantine.*." + o.DLQID
	case o.Domain != "":
		filter = "quarantine." + o.Domain + ".>"
	}
	cfg.FilterSubjects = []string{filter}
	sctx, cancel := context.WithTimeout(ctx, c.timeout)
	cons, err := c.js.OrderedConsumer(sctx, subjects.QuarantineStream, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("tail %s: %w", subjects.QuarantineStream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("tail %s: %w", subjects.QuarantineStream, err)
	}
	defer it.Stop()
	if ready != nil {
		ready()
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("tail %s: %w", subjects.QuarantineStream, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("tail %s: %w", subjects.QuarantineStream, err)
		}
		if !fn(md.Sequence.Stream, m.Data()) {
			return nil
		}
	}
}

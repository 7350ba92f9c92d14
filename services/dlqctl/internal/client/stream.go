package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/batch"
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

// Publish publishes msgs to JetStream and calls done for each, in the
// order of msgs: in atomic batches of up to batchSize events (under
// sync_interval: always, one fsync per batch instead of one per event),
// or, with batchSize 1, one event per publish with up to publishWindow in
// flight. A batch the stream refuses (a duplicate Nats-Msg-Id refuses the
// whole batch) or whose outcome is unknown is published again one event at
// a time, which reports each event's own outcome: an event stored by the
// batch whose acknowledgement was lost is stored again, as any publisher's
// retry is, and the validator commits its business key once.
func (c *Client) Publish(ctx context.Context, msgs []Message, batchSize int, done func(i int, a Ack)) {
	if batchSize <= 1 {
		c.publishEach(ctx, msgs, 0, done)
		return
	}
	for start := 0; start < len(msgs); start += batchSize {
		chunk := msgs[start:min(len(msgs), start+batchSize)]
		nm := make([]*nats.Msg, len(chunk))
		for i, m := range chunk {
			nm[i] = &nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header{}}
			if m.MsgID != "" {
				nm[i].Header.Set(jetstream.MsgIDHeader, m.MsgID)
			}
		}
		bctx, cancel := context.WithTimeout(ctx, c.timeout)
		seqs, err := batch.Publish(bctx, c.js, nm)
		cancel()
		if err != nil {
			c.publishEach(ctx, chunk, start, done)
			continue
		}
		for i, seq := range seqs {
			done(start+i, Ack{Stream: subjects.EventsStream, Seq: seq})
		}
	}
}

// publishEach publishes msgs one per publish, with up to publishWindow in
// flight, and calls done with each index plus offset.
func (c *Client) publishEach(ctx context.Context, msgs []Message, offset int, done func(i int, a Ack)) {
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
		queue = append(queue, pending{i: offset + i, f: f, err: publishError(err)})
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
	// Interval is how often the auditor is asked for new records once
	// caught up (default one second).
	Interval time.Duration
}

// tailPage is how many records one poll of Tail asks for.
const tailPage = 500

// endOfStream asks a records list to start at the stream's end.
const endOfStream = math.MaxUint64

// Tail follows QUARANTINE through the auditor (audit.list with records:
// true and an after_seq cursor; people have no JetStream API), each record
// summarized without payload, headers, details or attempts, and calls fn
// for each until ctx is done or fn returns false. It asks again at once
// while pages are full, and every o.Interval once caught up. ready, when
// not nil, is called once the starting position is known.
func (c *Client) Tail(ctx context.Context, o TailOptions, ready func(), fn func(api.RecordSummary) bool) error {
	interval := o.Interval
	if interval <= 0 {
		interval = time.Second
	}
	req := api.ListRequest{Records: true, Domain: o.Domain, DLQID: o.DLQID, Limit: tailPage}
	switch {
	case o.All:
	case !o.Since.IsZero():
		req.From = o.Since
	default:
		req.AfterSeq = endOfStream
	}
	first := true
	for {
		var rep api.ListReply
		if err := c.Request(ctx, api.AuditList, req, &rep); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("tail %s: %w", subjects.QuarantineStream, err)
		}
		if first {
			first = false
			req.From = time.Time{}
			if ready != nil {
				ready()
			}
		}
		for _, r := range rep.Records {
			if !fn(r) {
				return nil
			}
		}
		req.AfterSeq = rep.NextAfterSeq
		if len(rep.Records) == tailPage {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

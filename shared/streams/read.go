package streams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readBatch is how many messages one direct-get batch request asks for.
const readBatch = 256

// errBadReply is a direct-get reply that is neither a message nor a status.
var errBadReply = errors.New("unexpected direct get reply")

// ReadSubject calls fn with every message stored on subject in stream, in
// sequence order, reading them with JetStream direct-get batch requests
// ({"seq", "next_by_subj", "batch"}: one request per 256 messages, so a
// quarantine chain costs one round trip; the stream must allow direct
// gets). It stops at fn's first error and returns it. A subject with no
// message is not an error: fn is never called.
//
// The replies arrive on an inbox subscription with a channel sized for one
// batch: orbit.go's jetstreamext.GetBatch subscribes with nats.go's default
// 64 Ki-entry channel, a 512 KiB allocation per request that dominated the
// quarantiner's profile.
func ReadSubject(ctx context.Context, js jetstream.JetStream, stream, subject string, fn func(*jetstream.RawStreamMsg) error) error {
	nc := js.Conn()
	prefix := js.Options().APIPrefix
	if prefix == "" {
		prefix = jetstream.DefaultAPIPrefix
	}
	api := prefix + "DIRECT.GET." + stream
	for next := uint64(1); ; {
		n, last, err := readBatchFrom(ctx, nc, api, subject, next, fn)
		if err != nil {
			return fmt.Errorf("streams: read %s: %w", stream, err)
		}
		if n < readBatch {
			return nil
		}
		next = last + 1
	}
}

// readBatchFrom reads up to readBatch messages on subject from sequence
// next; it returns how many it read and the sequence of the last.
func readBatchFrom(ctx context.Context, nc *nats.Conn, api, subject string, next uint64, fn func(*jetstream.RawStreamMsg) error) (int, uint64, error) {
	req, err := json.Marshal(struct {
		Seq     uint64 `json:"seq"`
		NextFor string `json:"next_by_subj"`
		Batch   int    `json:"batch"`
	}{next, subject, readBatch})
	if err != nil {
		return 0, 0, err
	}
	inbox := nc.NewInbox()
	replies := make(chan *nats.Msg, readBatch+1) // the batch and its end
	sub, err := nc.ChanSubscribe(inbox, replies)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(api, inbox, req); err != nil {
		return 0, 0, err
	}
	n, last := 0, uint64(0)
	for {
		var m *nats.Msg
		select {
		case m = <-replies:
		case <-ctx.Done():
			return n, last, ctx.Err()
		}
		if len(m.Data) == 0 && m.Header.Get(jetstream.SequenceHeader) == "" {
			switch status := m.Header.Get("Status"); status {
			case "204": // end of batch
				return n, last, nil
			case "404": // no message at or after next
				return n, last, nil
			default:
				return n, last, fmt.Errorf("%w: status %q %q", errBadReply, status, m.Header.Get("Description"))
			}
		}
		raw, err := rawMsg(m)
		if err != nil {
			return n, last, err
		}
		n, last = n+1, raw.Sequence
		if err := fn(raw); err != nil {
			return n, last, err
		}
	}
}

// rawMsg converts a direct-get reply into the stored message.
func rawMsg(m *nats.Msg) (*jetstream.RawStreamMsg, error) {
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: sequence header: %v", errBadReply, err)
	}
	subj := m.Header.Get(jetstream.SubjectHeader)
	if subj == "" {
		return nil, fmt.Errorf("%w: no subject header", errBadReply)
	}
	raw := &jetstream.RawStreamMsg{Subject: subj, Sequence: seq, Header: m.Header, Data: m.Data}
	if ts := m.Header.Get(jetstream.TimeStampHeaer); ts != "" {
		if raw.Time, err = time.Parse(time.RFC3339Nano, ts); err != nil {
			return nil, fmt.Errorf("%w: time stamp header: %v", errBadReply, err)
		}
	}
	return raw, nil
}

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

// DirectRequest is a JetStream direct-get request (nats-server's
// JSApiMsgGetRequest): a single get (Seq, NextFor from Seq, or the last
// message on LastFor), a batch
// (Batch messages on NextFor from Seq), or the last message of each of
// MultiLast's subjects (at most 1024) at or below UpToSeq. MaxBytes bounds
// the bytes of one reply.
type DirectRequest struct {
	Seq       uint64   `json:"seq,omitempty"`
	NextFor   string   `json:"next_by_subj,omitempty"`
	LastFor   string   `json:"last_by_subj,omitempty"`
	Batch     int      `json:"batch,omitempty"`
	MaxBytes  int      `json:"max_bytes,omitempty"`
	MultiLast []string `json:"multi_last,omitempty"`
	UpToSeq   uint64   `json:"up_to_seq,omitempty"`
}

// DirectMaxBytes is the reply bytes a direct get asks at most when its
// request says none: the server's default (its max_pending, 64 MiB).
const DirectMaxBytes = 64 << 20

// MaxMultiLast is the most subjects one multi_last request may name.
const MaxMultiLast = 1024

// ErrDirectGet is a direct get answered with an unexpected reply.
var ErrDirectGet = errors.New("streams: direct get")

// directTimeout bounds one direct-get request without a deadline of its own.
const directTimeout = 30 * time.Second

// DirectGet sends req to the direct-get API of stream (which must allow
// direct gets) and hands each message of the reply to fn, in order, until
// fn fails. It returns how many matching messages the server left unsent
// (batch or max_bytes reached). A reply of "no results" hands nothing.
//
// The replies arrive on an inbox subscription with a channel sized for the
// request: nats.go's SubscribeSync (and orbit.go's jetstreamext.GetBatch,
// which uses it) allocates a 64 Ki-entry channel per request, 512 KiB that
// dominated the profile of a service reading chains.
func DirectGet(ctx context.Context, js jetstream.JetStream, stream string, req DirectRequest, fn func(*jetstream.RawStreamMsg) error) (pending uint64, err error) {
	if req.MaxBytes == 0 {
		// The server's own default, said: without it the server reads
		// its options unlocked (nats-server 2.15.3, stream.go
		// getDirectRequest), a data race with a configuration reload
		// (deadletter reloads on every people change).
		req.MaxBytes = DirectMaxBytes
	}
	body, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, directTimeout)
		defer cancel()
	}
	nc := js.Conn()
	prefix := js.Options().APIPrefix
	if prefix == "" {
		prefix = jetstream.DefaultAPIPrefix
	}
	single := req.Batch == 0 && len(req.MultiLast) == 0
	// Room for every message the server may send and the end of batch: a
	// message that finds the channel full would be dropped.
	size := req.Batch
	if len(req.MultiLast) > 0 {
		size = max(size, MaxMultiLast) // wildcard filters may match more subjects than named
	}
	replies := make(chan *nats.Msg, size+1)
	inbox := nc.NewInbox()
	sub, err := nc.ChanSubscribe(inbox, replies)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrDirectGet, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(prefix+"DIRECT.GET."+stream, inbox, body); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrDirectGet, err)
	}
	for {
		var m *nats.Msg
		select {
		case m = <-replies:
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: %s: %w", ErrDirectGet, stream, ctx.Err())
		}
		switch status := m.Header.Get("Status"); status {
		case "":
			raw, err := rawMsg(m)
			if err != nil {
				return 0, err
			}
			if err := fn(raw); err != nil {
				return 0, err
			}
			if single {
				return 0, nil // a single get: no end-of-batch follows
			}
		case "204": // end of batch
			n, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			return n, nil
		case "404": // no results
			return 0, nil
		case "503": // no responders: no such stream, or no direct get
			return 0, fmt.Errorf("%w: %s: %w", ErrDirectGet, stream, nats.ErrNoResponders)
		default:
			return 0, fmt.Errorf("%w: %s: status %s %s", ErrDirectGet, stream, status, m.Header.Get("Description"))
		}
	}
}

// DirectGetAll sends req, then asks again from the sequence after the last
// message each reply held, until a reply holds nothing or the server says
// nothing is pending: every message req selects reaches fn, in order,
// however many replies that takes (a batch, a max_bytes cut, a multi-last
// get of many subjects). It stops at fn's first error.
func DirectGetAll(ctx context.Context, js jetstream.JetStream, stream string, req DirectRequest, fn func(*jetstream.RawStreamMsg) error) error {
	for {
		n := 0
		pending, err := DirectGet(ctx, js, stream, req, func(m *jetstream.RawStreamMsg) error {
			n++
			req.Seq = m.Sequence + 1
			return fn(m)
		})
		if err != nil {
			return err
		}
		if n == 0 || pending == 0 {
			return nil
		}
	}
}

// readBatch is how many messages one ReadSubject request asks for.
const readBatch = 256

// ReadSubject calls fn with every message stored on subject in stream, in
// sequence order, reading them with direct-get batch requests (one per 256
// messages, so a quarantine chain costs one round trip). It stops at fn's
// first error and returns it. A subject with no message is not an error.
func ReadSubject(ctx context.Context, js jetstream.JetStream, stream, subject string, fn func(*jetstream.RawStreamMsg) error) error {
	for next := uint64(1); ; {
		n := 0
		_, err := DirectGet(ctx, js, stream, DirectRequest{Seq: next, NextFor: subject, Batch: readBatch}, func(m *jetstream.RawStreamMsg) error {
			n++
			next = m.Sequence + 1
			return fn(m)
		})
		if err != nil {
			return fmt.Errorf("streams: read %s: %w", stream, err)
		}
		if n < readBatch {
			return nil
		}
	}
}

// rawMsg converts a direct-get reply into the stored message.
func rawMsg(m *nats.Msg) (*jetstream.RawStreamMsg, error) {
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: a reply without a sequence", ErrDirectGet)
	}
	raw := &jetstream.RawStreamMsg{Subject: m.Header.Get(jetstream.SubjectHeader), Sequence: seq, Header: m.Header, Data: m.Data}
	if ts := m.Header.Get(jetstream.TimeStampHeaer); ts != "" {
		if raw.Time, err = time.Parse(time.RFC3339Nano, ts); err != nil {
			return nil, fmt.Errorf("%w: time stamp header: %v", ErrDirectGet, err)
		}
	}
	return raw, nil
}

// Package batch writes many messages to one stream as one atomic batch
// (nats-server 2.12+, a stream with allow_atomic): the server stores all of
// them or none, as one proposal and, with sync_interval: always, one fsync,
// where unbatched writes pay one each. It is the write path's lever under
// the durability a compliance store runs with.
//
// The client is synadia-io/orbit.go's jetstreamext (PublishMsgBatch, with
// no acknowledged first message: one round trip per batch). What this
// package adds is what every caller needs around it: the sequences of the
// messages, and the classification of a refusal. The server refuses a batch
// as a whole without naming the message that failed (a failed expectation,
// a duplicate Nats-Msg-Id, one subject written twice): ErrRefused tells the
// caller to fall back to writing its messages one by one, each with its own
// expectation, which then says which one failed (on a stream that keeps
// one message per subject, LEDGER, a subject it holds already refuses the
// whole batch too). ErrDisabled says the
// stream was provisioned without allow_atomic. Chooser says, group by
// group, whether a batch is the cheaper way at all (on one server without
// fsync it is not). Writer, the project's one batch writer, puts them
// together: it gathers its callers' messages into groups, asks a Chooser,
// publishes, falls back one message at a time and reports per message.
package batch

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// MaxMessages is the server's default limit of messages per atomic batch.
const MaxMessages = 1000

// Errors a batch can end with besides a transport error (a timeout leaves
// the outcome unknown: the caller's per-message fallback must be
// conditional, as every write of this project is).
var (
	// ErrRefused: the server refused the batch as a whole and stored none
	// of it; write the messages one by one.
	ErrRefused = errors.New("batch: refused as a whole")
	// ErrDisabled: the stream does not allow atomic publish.
	ErrDisabled = errors.New("batch: the stream does not allow atomic publish")
	// ErrTooLarge: more than MaxMessages messages (or the server's limit).
	ErrTooLarge = errors.New("batch: too many messages")
)

// Server error codes of atomic batch publish (nats-server
// jetstream_errors_generated.go).
const (
	codeDisabled       = 10174
	codeTooLarge       = 10199
	codeDuplicateMsgID = 10201
	codeUnsupportedHdr = 10177
	// codeMaxMsgsPerSubject: a message on a subject the stream holds its
	// one message of already (one per subject, discard new per subject:
	// LEDGER).
	codeMaxMsgsPerSubject = 10077
)

// refusals are the error codes after which the server stored nothing and a
// per-message write will say which message was at fault.
var refusals = map[jetstream.ErrorCode]bool{
	jetstream.JSErrCodeStreamWrongLastSequence:         true, // 10071: an expectation failed
	jetstream.JSErrCodeStreamWrongLastSequenceConstant: true, // 10164: a subject written twice, or in flight
	codeDuplicateMsgID:    true,
	codeUnsupportedHdr:    true,
	codeMaxMsgsPerSubject: true,
}

// Publish writes msgs to one stream as one atomic batch and returns the
// stream sequence of each message, in order.
// Publish adds the batch headers and removes them again before it returns. With one message it is a plain publish (no batch needed).
func Publish(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg) ([]uint64, error) {
	switch {
	case len(msgs) == 0:
		return nil, nil
	case len(msgs) > MaxMessages:
		return nil, fmt.Errorf("%w: %d, at most %d", ErrTooLarge, len(msgs), MaxMessages)
	case len(msgs) == 1:
		ack, err := js.PublishMsg(ctx, msgs[0])
		if err != nil {
			return nil, classify(err)
		}
		return []uint64{ack.Sequence}, nil
	}
	for _, m := range msgs {
		if m.Header == nil {
			m.Header = nats.Header{}
		}
	}
	ack, err := jetstreamext.PublishMsgBatch(ctx, js, msgs, jetstreamext.BatchFlowControl{AckFirst: false})
	for _, m := range msgs { // the messages may be written again one by one
		m.Header.Del(jetstreamext.BatchIDHeader)
		m.Header.Del(jetstreamext.BatchSeqHeader)
		m.Header.Del(jetstreamext.BatchCommitHeader)
	}
	if err != nil {
		return nil, classify(err)
	}
	// An atomic batch is stored contiguously: its last sequence is acked.
	seqs := make([]uint64, len(msgs))
	first := ack.Sequence - uint64(len(msgs)) + 1
	for i := range seqs {
		seqs[i] = first + uint64(i)
	}
	return seqs, nil
}

// classify wraps err with the sentinel its server error code stands for.
func classify(err error) error {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return err
	}
	switch {
	case apiErr.ErrorCode == codeDisabled:
		return fmt.Errorf("%w: %w", ErrDisabled, err)
	case apiErr.ErrorCode == codeTooLarge:
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	case refusals[apiErr.ErrorCode]:
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return err
}

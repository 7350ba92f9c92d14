// Package read holds the auditor's readers of a stream that every part
// uses: a scan in sequence order with batched direct gets (no consumer),
// the search of the first sequence stored at a time, the check that a
// string is one subject token, and an event's bytes from a document kept
// in DOCUMENTS.
package read

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/streams"
)

// maxBytes bounds the bytes of one direct-get reply (the server stops
// sending past it and says how many are pending).
const maxBytes = 8 << 20

// ValidToken reports whether s can be one subject token.
func ValidToken(s string) bool {
	return s != "" && !strings.ContainsAny(s, ".*> \t\r\n")
}

// scanBatch is how many messages one scan request asks for (the server
// also stops at maxBytes).
const scanBatch = 1024

// errStopScan ends a scan early (internal).
var errStopScan = errors.New("auditor: scan stopped")

// Scan reads stream in sequence order from sequence from on, the
// messages on filter ("" or ">" for every subject), with batched direct
// gets (no consumer), and hands each to fn until fn returns false, the
// message at or past upTo (0: no bound) has been handed, or the server
// says nothing more is pending. It returns the sequence to read next and
// whether it stopped because nothing was pending (caught up). fn may keep
// the message: each reply is a message of its own.
func Scan(ctx context.Context, js jetstream.JetStream, stream, filter string, from, upTo uint64,
	fn func(*jetstream.RawStreamMsg) bool) (next uint64, caughtUp bool, err error) {
	next = max(from, 1)
	if filter == ">" {
		filter = ""
	}
	for {
		n := 0
		pending, err := streams.DirectGet(ctx, js, stream,
			streams.DirectRequest{Seq: next, NextFor: filter, Batch: scanBatch, MaxBytes: maxBytes},
			func(m *jetstream.RawStreamMsg) error {
				if upTo > 0 && m.Sequence > upTo {
					return errStopScan
				}
				n++
				next = m.Sequence + 1
				if !fn(m) || (upTo > 0 && m.Sequence >= upTo) {
					return errStopScan
				}
				return nil
			})
		switch {
		case errors.Is(err, errStopScan):
			return next, false, nil
		case err != nil:
			return next, false, err
		case n == 0 || pending == 0:
			return next, true, nil
		}
	}
}

// SeqAtTime returns the sequence of the first message of stream on filter
// stored at or after t (found false when there is none), with one direct
// get by start time.
func SeqAtTime(ctx context.Context, js jetstream.JetStream, stream, filter string, t time.Time) (seq uint64, found bool, err error) {
	req := struct {
		StartTime time.Time `json:"start_time"`
		NextFor   string    `json:"next_by_subj,omitempty"`
	}{t.UTC(), filter}
	body, err := json.Marshal(req)
	if err != nil {
		return 0, false, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	prefix := js.Options().APIPrefix
	if prefix == "" {
		prefix = jetstream.DefaultAPIPrefix
	}
	m, err := js.Conn().RequestWithContext(ctx, prefix+"DIRECT.GET."+stream, body)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %s: %w", streams.ErrDirectGet, stream, err)
	}
	switch status := m.Header.Get("Status"); status {
	case "":
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%w: %s: a reply without a sequence", streams.ErrDirectGet, stream)
		}
		return seq, true, nil
	case "404":
		return 0, false, nil
	default:
		return 0, false, fmt.Errorf("%w: %s: status %s %s", streams.ErrDirectGet, stream, status, m.Header.Get("Description"))
	}
}

// LastToken returns the last token of a subject (a quarantine subject's
// dlq id).
func LastToken(subject string) string {
	return subject[strings.LastIndexByte(subject, '.')+1:]
}

// maxDocumentEvent bounds the original bytes of one document event that
// audit.get returns (an event passes the gate only under its payload
// limit).
const maxDocumentEvent = 8 << 20

// DocumentBytes reads an event's exact original bytes from the document
// kept in DOCUMENTS: bytes d.Offset to d.Offset+d.Length (from the chunk
// holding d.Offset, one chunk in memory at a time: streams.OpenDocumentAt).
func DocumentBytes(ctx context.Context, js jetstream.JetStream, d envelope.Document) ([]byte, error) {
	if d.Offset < 0 || d.Length <= 0 || d.Length > maxDocumentEvent {
		return nil, fmt.Errorf("auditor: document range %d+%d out of bounds", d.Offset, d.Length)
	}
	r, err := streams.OpenDocumentAt(ctx, js, d.SHA256, int64(d.Offset))
	if err != nil {
		return nil, err
	}
	b := make([]byte, d.Length)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("auditor: document %s: %w", d.SHA256, err)
	}
	return b, nil
}

// ChainFilter is the subject filter that matches the chain of dlqID in
// every domain ("" when dlqID is not a single subject token).
func ChainFilter(dlqID string) string {
	if !ValidToken(dlqID) {
		return ""
	}
	return "quarantine.*." + dlqID
}

// Msg is one QUARANTINE message a ChainReader hands out.
type Msg struct {
	Seq     uint64
	Subject string
	Data    []byte
}

// ChainReader reads QUARANTINE's chains with direct gets (the auditor's
// live reader, shared by its parts).
type ChainReader interface {
	// EachLastRecord hands fn the last record at or below upTo (0: the
	// whole stream) of the chain of each dlq id that has one; fn must
	// copy what it keeps.
	EachLastRecord(ctx context.Context, ids []string, upTo uint64, fn func(id string, m Msg)) error
	// FirstRecord returns the first record on subject.
	FirstRecord(ctx context.Context, subject string) (m Msg, found bool, err error)
}

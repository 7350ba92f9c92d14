// Package chain is the one reader of quarantine chains: the sealed records
// of one quarantined event (one dlq id) on its subject
// quarantine.<domain>.<dlq_id> of the QUARANTINE stream. It reads a chain
// with batched JetStream direct gets, seals verified, and folds it
// (Reader.Read); reads a chain's stored bytes for an inspector who wants
// every problem reported rather than a refusal (Reader.Stored); and
// decodes the Head of a stored record, the fields a list, a drain's
// selection or the auditor's live view need from a chain's last record,
// without its payload. It also owns the vocabulary of the audit log: one
// line per stored record, its event named by the record's kind
// (record.Kind.Event), its attributes named here (LogAttrs).
//
// The record format, the seals, the lifecycle (record.Kind and its table,
// record.StatusAfter, record.Fold) live in package record, which holds no
// connection: chain is its reader over NATS.
package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Errors of reading a chain.
var (
	// ErrNotFound: no record is stored on the chain's subject.
	ErrNotFound = errors.New("chain: no quarantine chain has this dlq id")
	// ErrUnreadable: a stored record does not parse or fails its seal.
	ErrUnreadable = errors.New("chain: unreadable quarantine record")
)

// Head is the part of a stored record that summarizes its chain when it is
// the chain's last record (the first record for FirstSeen and
// QuarantinedAt of the event): everything but the payload, headers,
// attempts and links. DecodeHead reads it without checking the seal.
type Head struct {
	DLQID          string       `json:"dlq_id"`
	Index          int          `json:"index"`
	Kind           record.Kind  `json:"kind"`
	Domain         string       `json:"domain"`
	Class          record.Class `json:"class"`
	ErrorCode      codes.Code   `json:"error_code"`
	SourceStream   string       `json:"source_stream"`
	SourceSeq      uint64       `json:"source_seq"`
	IdempotencyKey string       `json:"idempotency_key"`
	OrderingKey    string       `json:"ordering_key"`
	PartyID        string       `json:"party_id"`
	Publisher      string       `json:"publisher"`
	EventTime      *time.Time   `json:"event_time"`
	RedriveCount   int          `json:"redrive_count"`
	FirstSeen      time.Time    `json:"first_seen"`
	QuarantinedAt  time.Time    `json:"quarantined_at"`
	AuditHash      string       `json:"audit_hash"`
	// DrainID is the drain that caused the record, if any.
	DrainID string `json:"drain_id"`
	// Hold is the legal hold a hold record places or lifts (nil on other
	// records); its Status is the status the record keeps.
	Hold *record.HoldMark `json:"hold"`
	// SourceSubject is where the record's message was (the original's
	// subject on the first record, which names its event type).
	SourceSubject string `json:"source_subject"`
	// Identifiers are the first record's listed business identifiers
	// (record.ListedIdentifiers; nil on other records and older ones).
	Identifiers map[string]string `json:"identifiers"`
	// Document is the first record's document provenance, when the
	// event was read from an EPCIS document.
	Document *envelope.Document `json:"document"`
}

// errNoDLQID: a stored record names no chain.
var errNoDLQID = errors.New("no dlq_id")

// DecodeHead decodes the head of the stored record raw. It does not check
// the seal (Parse does, and verification reports seal problems); it fails
// when raw is not a record naming its chain.
func DecodeHead(raw []byte) (Head, error) {
	var h Head
	if err := jsonv2.Unmarshal(raw, &h); err != nil {
		return Head{}, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	if h.DLQID == "" {
		return Head{}, fmt.Errorf("%w: %w", ErrUnreadable, errNoDLQID)
	}
	return h, nil
}

// HeadOf returns the head of r.
func HeadOf(r record.Record) Head {
	return Head{DLQID: r.DLQID, Index: r.Index, Kind: r.Kind, Domain: r.Domain, Class: r.Class, ErrorCode: r.ErrorCode,
		SourceStream: r.SourceStream, SourceSeq: r.SourceSeq, IdempotencyKey: r.IdempotencyKey, OrderingKey: r.OrderingKey,
		PartyID: r.PartyID, Publisher: r.Publisher, EventTime: r.EventTime, RedriveCount: r.RedriveCount, FirstSeen: r.FirstSeen,
		QuarantinedAt: r.QuarantinedAt, AuditHash: r.AuditHash, DrainID: r.DrainID, Hold: r.Hold}
}

// Status returns the status of a chain whose last record is h, as
// record.Fold would fold a valid chain: a correction keeps the status it
// found (poison when the class is, else open); a hold record states the
// status it keeps (a hold on a resolved event leaves it resolved).
func (h Head) Status() record.Status {
	if h.Hold != nil && h.Hold.Status != "" {
		return h.Hold.Status
	}
	prev := record.StatusOpen
	if h.Class == record.ClassPoison {
		prev = record.StatusPoison
	}
	return record.StatusAfter(prev, h.Kind)
}

// Audit-log attribute names: the one vocabulary of the log line of a
// record, whichever service writes it.
const (
	AttrDLQID        = "dlq_id"
	AttrDomain       = "domain"
	AttrClass        = "class"
	AttrCode         = "code"
	AttrRedriveCount = "redrive_count"
	AttrIndex        = "index"
	AttrKind         = "kind"
	AttrSeq          = "seq"
	AttrAuditHash    = "audit_hash"
)

// LogAttrs returns the attributes of the audit-log line of the record h
// stored at QUARANTINE sequence seq: ids, class, code, counts and hash,
// never a payload value.
func (h Head) LogAttrs(seq uint64) []slog.Attr {
	return []slog.Attr{
		slog.String(AttrDLQID, h.DLQID), slog.String(AttrDomain, h.Domain), slog.String(AttrClass, string(h.Class)),
		slog.String(AttrCode, string(h.ErrorCode)), slog.Int(AttrRedriveCount, h.RedriveCount),
		slog.Int(AttrIndex, h.Index), slog.String(AttrKind, string(h.Kind)), slog.Uint64(AttrSeq, seq),
		slog.String(AttrAuditHash, h.AuditHash),
	}
}

// Log writes the audit-log line of the record h stored at seq: its event
// (record.Kind.Event) with LogAttrs.
func Log(ctx context.Context, log *slog.Logger, h Head, seq uint64) {
	log.LogAttrs(ctx, slog.LevelInfo, h.Kind.Event(), h.LogAttrs(seq)...)
}

// Stored is one record as stored: its QUARANTINE sequence and bytes.
type Stored struct {
	Seq  uint64
	Data []byte
}

// Chain is a chain as read by Reader.Read: its records in order, seals
// verified, and their fold.
type Chain struct {
	Domain, DLQID string
	// Records are the chain's records; LastSeq the sequence of the last.
	Records []record.Record
	LastSeq uint64
	// State is the fold of Records; FoldErr is set when the chain breaks a
	// link or lifecycle rule (State.Status is then record.StatusInvalid).
	State   record.State
	FoldErr error
}

// Reader reads quarantine chains from QUARANTINE with JetStream direct
// gets (the stream allows them; no consumer is created). It is safe for
// concurrent use.
type Reader struct {
	js jetstream.JetStream
}

// NewReader returns a reader of QUARANTINE over js.
func NewReader(js jetstream.JetStream) *Reader { return &Reader{js: js} }

// batch is how many records one read of a chain asks for.
const batch = 256

// maxBytes bounds one reply (a first record carries its payload).
const maxBytes = 8 << 20

// errEnough stops a read at the chain's last record as first read.
var errEnough = errors.New("enough")

// Last returns the last stored record of the chain of dlqID in domain
// (ErrNotFound when there is none).
func (rd *Reader) Last(ctx context.Context, domain, dlqID string) (Stored, error) {
	var last Stored
	_, err := streams.DirectGet(ctx, rd.js, subjects.QuarantineStream,
		streams.DirectRequest{LastFor: subjects.Quarantine(domain, dlqID)}, func(m *jetstream.RawStreamMsg) error {
			last = Stored{Seq: m.Sequence, Data: m.Data}
			return nil
		})
	if err != nil {
		return Stored{}, fmt.Errorf("chain: read the last record: %w", err)
	}
	if last.Seq == 0 {
		return Stored{}, ErrNotFound
	}
	return last, nil
}

// LastRecord returns the last record of a chain, seal verified, and its
// sequence.
func (rd *Reader) LastRecord(ctx context.Context, domain, dlqID string) (record.Record, uint64, error) {
	m, err := rd.Last(ctx, domain, dlqID)
	if err != nil {
		return record.Record{}, 0, err
	}
	r, err := parse(m)
	return r, m.Seq, err
}

// Stored returns every stored record of a chain, in order, as stored
// (nothing is checked): the last record is read first, then the chain
// from its start up to it, so the result is a consistent snapshot. A
// chain whose last record is a first record (index 0) costs one request.
func (rd *Reader) Stored(ctx context.Context, domain, dlqID string) ([]Stored, error) {
	last, err := rd.Last(ctx, domain, dlqID)
	if err != nil {
		return nil, err
	}
	if h, err := DecodeHead(last.Data); err == nil && h.Index == 0 {
		return []Stored{last}, nil
	}
	return rd.upTo(ctx, domain, dlqID, last)
}

// upTo returns the records of a chain from its start up to last, its last
// record as first read.
func (rd *Reader) upTo(ctx context.Context, domain, dlqID string, last Stored) ([]Stored, error) {
	var out []Stored
	err := streams.DirectGetAll(ctx, rd.js, subjects.QuarantineStream,
		streams.DirectRequest{Seq: 1, NextFor: subjects.Quarantine(domain, dlqID), Batch: batch, MaxBytes: maxBytes},
		func(m *jetstream.RawStreamMsg) error {
			if m.Sequence > last.Seq {
				return errEnough
			}
			out = append(out, Stored{Seq: m.Sequence, Data: m.Data})
			if m.Sequence == last.Seq {
				return errEnough
			}
			return nil
		})
	if err != nil && !errors.Is(err, errEnough) {
		return nil, fmt.Errorf("chain: read: %w", err)
	}
	return out, nil
}

// Read returns a chain, every seal verified (ErrUnreadable names the
// sequence of the first record that fails), folded. The last record is
// read first and parsed once: a chain of one record (the common case: an
// event quarantined once) costs one request and one parse.
func (rd *Reader) Read(ctx context.Context, domain, dlqID string) (Chain, error) {
	last, err := rd.Last(ctx, domain, dlqID)
	if err != nil {
		return Chain{}, err
	}
	ch := Chain{Domain: domain, DLQID: dlqID}
	lr, lerr := parse(last)
	var stored []Stored
	if lerr == nil && lr.Index == 0 {
		stored = []Stored{last}
	} else if stored, err = rd.upTo(ctx, domain, dlqID, last); err != nil {
		return Chain{}, err
	}
	ch.Records = make([]record.Record, 0, len(stored))
	for _, m := range stored {
		r := lr
		if m.Seq != last.Seq || lerr != nil {
			if r, err = parse(m); err != nil {
				return Chain{}, err
			}
		}
		ch.Records = append(ch.Records, r)
		ch.LastSeq = m.Seq
	}
	ch.State, ch.FoldErr = record.Fold(ch.Records)
	return ch, nil
}

// parse parses a stored record, checking its seal.
func parse(m Stored) (record.Record, error) {
	r, err := record.Parse(m.Data)
	if err != nil {
		return record.Record{}, fmt.Errorf("%w: seq %d: %w", ErrUnreadable, m.Seq, err)
	}
	return r, nil
}

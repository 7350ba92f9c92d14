package quarantiner

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"

	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// errConflict reports that another writer appended to the chain first; the
// caller re-reads the chain and decides again.
var errConflict = errors.New("quarantiner: chain changed concurrently")

// chains reads and appends quarantine chains. A chain is the sequence of
// records on one subject quarantine.<domain>.<dlq_id>; appends are
// conditional on the subject's last sequence, so two writers can never fork
// a chain.
type chains struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	tr     telemetry.Tracer
	// tails caches the tails of chains read or written lately (nil: no
	// cache). An entry may be stale (another instance appended since):
	// the conditional write then fails and the chain is read again.
	tails *lru.Cache[string, tail]
}

// newChains returns chains caching up to cacheSize tails.
func newChains(js jetstream.JetStream, stream jetstream.Stream, tr telemetry.Tracer, cacheSize int) (*chains, error) {
	c := &chains{js: js, stream: stream, tr: tr}
	if cacheSize > 0 {
		var err error
		if c.tails, err = lru.New[string, tail](cacheSize); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// chain is a chain as read: its records and the stream sequence of the last.
type chain struct {
	records []record.Record
	lastSeq uint64
}

// tail is what an append to a chain needs: how many records it has, the
// stream sequence and the record of the last one, and the chain's fold.
type tail struct {
	n       int
	lastSeq uint64
	last    record.Record
	state   record.State
	foldErr error // the chain breaks a link or lifecycle rule
}

// tailOf returns the tail of ch.
func tailOf(ch chain) tail {
	t := tail{n: len(ch.records), lastSeq: ch.lastSeq}
	if t.n > 0 {
		t.last = ch.records[t.n-1]
		t.state, t.foldErr = record.Fold(ch.records)
	}
	return t
}

// read returns every record of a chain in order (empty when none). It
// reads the last record first (one direct get): a chain of one record, the
// common case of a first append, needs nothing more; a longer one is read
// whole with direct-get batch requests (one per 256 records).
func (c *chains) read(ctx context.Context, domain, dlqID string) (chain, error) {
	subj := subjects.Quarantine(domain, dlqID)
	last, err := c.stream.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return chain{}, nil
	}
	if err != nil {
		return chain{}, fmt.Errorf("quarantiner: read chain: %w", err)
	}
	r, err := decodeRecord(last.Sequence, last.Data)
	if err != nil {
		return chain{}, err
	}
	if r.Index == 0 {
		return chain{records: []record.Record{r}, lastSeq: last.Sequence}, nil
	}
	var out chain
	err = streams.ReadSubject(ctx, c.js, subjects.QuarantineStream, subj, func(m *jetstream.RawStreamMsg) error {
		r, err := decodeRecord(m.Sequence, m.Data)
		if err != nil {
			return err
		}
		out.records = append(out.records, r)
		out.lastSeq = m.Sequence
		return nil
	})
	if err != nil {
		return chain{}, fmt.Errorf("quarantiner: read chain: %w", err)
	}
	return out, nil
}

// decodeRecord decodes the stored record at seq.
func decodeRecord(seq uint64, data []byte) (record.Record, error) {
	var r record.Record
	if err := record.Unmarshal(data, &r); err != nil {
		return record.Record{}, fmt.Errorf("quarantiner: record at %d unreadable: %w", seq, err)
	}
	return r, nil
}

// tail returns the tail of a chain, from the cache when it holds one
// (cached true), else read from the stream (and cached).
func (c *chains) tail(ctx context.Context, domain, dlqID string) (t tail, cached bool, err error) {
	key := subjects.Quarantine(domain, dlqID)
	if c.tails != nil {
		if t, ok := c.tails.Get(key); ok {
			return t, true, nil
		}
	}
	ch, err := c.read(ctx, domain, dlqID)
	if err != nil {
		return tail{}, false, err
	}
	t = tailOf(ch)
	if t.n > 0 {
		c.remember(domain, dlqID, t)
	}
	return t, false, nil
}

// remember caches t as the tail of a chain.
func (c *chains) remember(domain, dlqID string, t tail) {
	if c.tails != nil {
		c.tails.Add(subjects.Quarantine(domain, dlqID), t)
	}
}

// forget drops a chain's cached tail (it proved stale, or changed).
func (c *chains) forget(domain, dlqID string) {
	if c.tails != nil {
		c.tails.Remove(subjects.Quarantine(domain, dlqID))
	}
}

// append seals r as the next record of a chain of n records whose last is
// at stream sequence lastSeq with audit_hash prevHash, and stores it. It
// returns errConflict when another writer appended first.
func (c *chains) append(ctx context.Context, n int, prevHash string, lastSeq uint64, r *record.Record) (uint64, error) {
	r.SchemaVersion = record.SchemaVersion
	r.Index = n
	r.PrevHash = ""
	if n > 0 {
		r.PrevHash = prevHash
	}
	b, err := record.SealMarshal(r)
	if err != nil {
		return 0, err
	}
	m := nats.NewMsg(subjects.Quarantine(r.Domain, r.DLQID))
	m.Data = b
	m.Header.Set("Deadletter-Record-Kind", r.Kind)
	m.Header.Set("Deadletter-Audit-Hash", r.AuditHash)
	msgID := r.DLQID + "-" + strconv.Itoa(r.Index)
	ctx, span := c.tr.StartPublish(ctx, m, telemetry.DestinationTemplate("quarantine.{domain}.{dlq_id}"),
		telemetry.MessageID(msgID), telemetry.Attributes(telemetry.DLQIDKey.String(r.DLQID),
			telemetry.DomainKey.String(r.Domain), attribute.String("deadletter.record_kind", r.Kind)))
	defer span.End()
	ack, err := c.js.PublishMsg(ctx, m,
		jetstream.WithMsgID(msgID),
		jetstream.WithExpectLastSequencePerSubject(lastSeq))
	telemetry.RecordAck(span, ack)
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			span.SetAttributes(telemetry.OutcomeKey.String("conflict"))
			return 0, errConflict
		}
		telemetry.Error(span, "record not written")
		return 0, fmt.Errorf("quarantiner: write record: %w", err)
	}
	if ack.Duplicate {
		span.SetAttributes(telemetry.OutcomeKey.String("conflict"))
		// The same (dlq id, index) was written within the duplicate window by
		// another writer: ours may differ, so decide again.
		return 0, errConflict
	}
	return ack.Sequence, nil
}

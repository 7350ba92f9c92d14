package quarantiner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"

	"github.com/deadletter/deadletter/shared/record"
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
}

// chain is a chain as read: its records and the stream sequence of the last.
type chain struct {
	records []record.Record
	lastSeq uint64
}

// read returns every record of a chain in order (empty when none).
func (c *chains) read(ctx context.Context, domain, dlqID string) (chain, error) {
	subj := subjects.Quarantine(domain, dlqID)
	var out chain
	next := uint64(1)
	for {
		m, err := c.stream.GetMsg(ctx, next, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil
		}
		if err != nil {
			return chain{}, fmt.Errorf("quarantiner: read chain: %w", err)
		}
		var r record.Record
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return chain{}, fmt.Errorf("quarantiner: record at %d unreadable: %w", m.Sequence, err)
		}
		out.records = append(out.records, r)
		out.lastSeq = m.Sequence
		next = m.Sequence + 1
	}
}

// append seals r as the next record of ch and stores it. It returns
// errConflict when another writer appended first.
func (c *chains) append(ctx context.Context, ch chain, r *record.Record) (uint64, error) {
	r.SchemaVersion = record.SchemaVersion
	r.Index = len(ch.records)
	r.PrevHash = ""
	if n := len(ch.records); n > 0 {
		r.PrevHash = ch.records[n-1].AuditHash
	}
	if err := record.Seal(r); err != nil {
		return 0, err
	}
	b, err := record.Marshal(*r)
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
		jetstream.WithExpectLastSequencePerSubject(ch.lastSeq))
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

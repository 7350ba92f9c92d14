package quarantiner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// outcome is what ingest did with a failure.
type outcome struct {
	written   *record.Record // nil when the failure was already quarantined
	seq       uint64         // QUARANTINE sequence of written
	duplicate string         // why nothing was written
}

// ingest turns one failure into exactly one record, whichever way and however
// often it arrives:
//
//   - no chain for its dlq id: the first record (quarantined);
//   - a replay of a quarantined event failed (redrive headers): replay_failed,
//     or poisoned at the redrive cap, unless that replay's failure is
//     already in the chain;
//   - a replay of a whole EPCIS document ended (f.Replayed: its events
//     committed or quarantined on their own chains): replayed, naming the
//     counts, unless the chain holds it already or is not redriving;
//   - otherwise the event is already quarantined (the same source message
//     by the other path or a repeated advisory, or another copy of the same
//     event): nothing is written.
func (s *Service) ingest(ctx context.Context, f record.Failure) (outcome, error) {
	dlqID := record.DLQIDFor(f)
	dup := ""
	t, written, err := s.chains.update(ctx, f.Domain, dlqID, true, func(v view) (*record.Record, error) {
		var r *record.Record
		r, dup = s.decide(*v.chain, f, dlqID)
		if r != nil && r.TraceID == "" {
			// The original carried no trace context (an untraced
			// publisher): name the trace this record is written in.
			r.TraceID, r.SpanID = telemetry.IDs(ctx)
		}
		return r, nil
	})
	switch {
	case errors.Is(err, errKeptChanging):
		return outcome{}, fmt.Errorf("quarantiner: chain %s %w", dlqID, err)
	case err != nil:
		return outcome{}, err
	case !written:
		s.metrics.duplicates.WithLabelValues(dup).Inc()
		return outcome{duplicate: dup}, nil
	}
	return outcome{written: &t.last, seq: t.lastSeq}, nil
}

// decide returns the record to append for f, or nil and the reason it is a
// duplicate.
func (s *Service) decide(ch chain.Chain, f record.Failure, dlqID string) (*record.Record, string) {
	now := s.now().UTC()
	if len(ch.Records) == 0 {
		r := record.FromFailure(f, now)
		r.DLQID = dlqID
		return &r, ""
	}
	for _, r := range ch.Records {
		if r.SourceStream == f.Stream && r.SourceSeq == f.Seq {
			return nil, "same_source"
		}
	}
	if f.DLQID == "" || f.RedriveCount == 0 {
		// Another copy of an event already quarantined under this key.
		return nil, "same_event"
	}
	st := ch.State
	if ch.FoldErr != nil && st.Status == "" {
		return nil, "unreadable_chain"
	}
	if f.RedriveCount <= st.RedriveCount {
		return nil, "same_replay"
	}
	if f.Replayed != nil {
		return documentReplayed(st, f, dlqID, now)
	}
	r := record.Record{
		DLQID:         dlqID,
		Kind:          record.KindReplayFailed,
		Domain:        st.Domain,
		Class:         st.Class,
		ErrorCode:     f.Code,
		ErrorDetail:   f.Detail,
		SourceSubject: f.Subject,
		SourceStream:  f.Stream,
		SourceSeq:     f.Seq,
		Attempts:      f.Attempts,
		DeliveryCount: f.Deliveries,
		RedriveCount:  f.RedriveCount,
		FirstSeen:     st.FirstSeen,
		QuarantinedAt: now,
	}
	fr := record.FromFailure(f, now)
	r.TraceID, r.SpanID, r.Conflict = fr.TraceID, fr.SpanID, fr.Conflict
	r.IdempotencyKey, r.OrderingKey, r.PartyID, r.EventTime = st.IdempotencyKey, st.OrderingKey, st.PartyID, st.EventTime
	r.Publisher = st.Publisher
	// The replay's own failure decides its class: a corrected event whose
	// replay failed at the downstream is exhausted (a default drain takes
	// it again), one the gate refused again is validation.
	if f.Class == record.ClassExhausted || f.Class == record.ClassValidation {
		r.Class = f.Class
	}
	if f.RedriveCount >= s.cfg.RedriveCap {
		r.Kind = record.KindPoisoned
		r.Class = record.ClassPoison
	}
	return &r, ""
}

// documentReplayed is the replayed record of a whole-document chain (state
// st) whose replay f reports ended: located on the replay's message, its
// reason the counts of the document's events. A chain that is not
// redriving (its outcome recorded another way, or none requested) gets
// nothing.
func documentReplayed(st record.State, f record.Failure, dlqID string, now time.Time) (*record.Record, string) {
	if st.Status != record.StatusRedriving {
		return nil, "not_redriving"
	}
	return &record.Record{
		DLQID: dlqID, Kind: record.KindReplayed, Domain: st.Domain, Class: st.Class, ErrorCode: st.ErrorCode, ErrorDetail: st.ErrorDetail,
		SourceSubject: st.SourceSubject, SourceStream: f.Stream, SourceSeq: f.Seq, IdempotencyKey: st.IdempotencyKey,
		OrderingKey: st.OrderingKey, PartyID: st.PartyID, Publisher: st.Publisher, EventTime: st.EventTime,
		RedriveCount: st.RedriveCount, FirstSeen: st.FirstSeen, QuarantinedAt: now, Reason: f.Replayed.Reason(),
	}, ""
}

// since returns the seconds elapsed since t, for the write-latency metric.
func since(t time.Time) float64 { return time.Since(t).Seconds() }

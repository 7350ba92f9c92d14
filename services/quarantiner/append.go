package quarantiner

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/attribute"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// handleAppend appends a lifecycle record requested by another service or an
// operator tool. The transition is checked with record.Fold, so a chain can
// only move the ways the lifecycle allows.
//
// The request's trace context (the redriver's, an operator tool's) is
// continued by an "append" server span, and the record names that trace in
// its trace_id and span_id, so every trace of an event is found from its
// chain.
func (s *Service) handleAppend(r micro.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx, span := s.tr.StartRequest(ctx, r.Subject(), nats.Header(r.Headers()), telemetry.Operation("append"))
	defer span.End()
	var req api.AppendRequest
	if err := json.Unmarshal(r.Data(), &req); err != nil {
		telemetry.Error(span, api.ErrBadRequest)
		_ = r.Error(api.ErrBadRequest, "request is not valid JSON", nil)
		return
	}
	span.SetAttributes(telemetry.DLQIDKey.String(req.DLQID), telemetry.DomainKey.String(req.Domain),
		attribute.String("deadletter.record_kind", req.Kind))
	if req.DLQID == "" || req.Domain == "" || req.Kind == "" || req.Kind == record.KindQuarantined {
		telemetry.Error(span, api.ErrBadRequest)
		_ = r.Error(api.ErrBadRequest, "dlq_id, domain and a lifecycle kind are required", nil)
		return
	}
	rep, code, err := s.appendLifecycle(ctx, req)
	if err != nil {
		telemetry.Error(span, code)
		_ = r.Error(code, err.Error(), nil)
		return
	}
	span.SetAttributes(attribute.Int("deadletter.record_index", rep.Index), attribute.String("deadletter.audit_hash", rep.AuditHash))
	_ = r.RespondJSON(rep)
}

type appendError struct{ msg string }

func (e appendError) Error() string { return e.msg }

func (s *Service) appendLifecycle(ctx context.Context, req api.AppendRequest) (api.AppendReply, string, error) {
	for attempt := 0; attempt < 5; attempt++ {
		ch, err := s.chains.read(ctx, req.Domain, req.DLQID)
		if err != nil {
			return api.AppendReply{}, api.ErrUnavailable, err
		}
		if len(ch.records) == 0 {
			return api.AppendReply{}, api.ErrNotFound, appendError{"no quarantine record has this dlq id"}
		}
		if req.ExpectedIndex != nil {
			if i := *req.ExpectedIndex; i < len(ch.records) && sameRequest(ch.records[i], req) {
				st, _ := record.Fold(ch.records[:i+1])
				return reply(ch.records[i], st), "", nil
			}
			if *req.ExpectedIndex != len(ch.records) {
				return api.AppendReply{}, api.ErrConflict, appendError{"the chain changed since it was read"}
			}
		}
		prev, err := record.Fold(ch.records)
		if err != nil {
			return api.AppendReply{}, api.ErrInvalidTransition, appendError{"the chain is not in a valid state: " + err.Error()}
		}
		rec := s.lifecycleRecord(req, prev)
		rec.TraceID, rec.SpanID = telemetry.IDs(ctx)
		next, err := record.Fold(append(append([]record.Record(nil), ch.records...), linked(rec, ch)))
		if err != nil {
			return api.AppendReply{}, api.ErrInvalidTransition, appendError{err.Error()}
		}
		if _, err := s.chains.append(ctx, ch, &rec); err != nil {
			if errors.Is(err, errConflict) {
				if req.ExpectedIndex != nil {
					continue // re-read: the same request may have landed
				}
				continue
			}
			return api.AppendReply{}, api.ErrUnavailable, err
		}
		s.logRecord(&rec)
		next.LastHash = rec.AuditHash
		return reply(rec, next), "", nil
	}
	return api.AppendReply{}, api.ErrConflict, appendError{"the chain kept changing"}
}

// linked returns rec with the link fields append will set, for the
// transition check before sealing.
func linked(rec record.Record, ch chain) record.Record {
	rec.Index = len(ch.records)
	if n := len(ch.records); n > 0 {
		rec.PrevHash = ch.records[n-1].AuditHash
	}
	return rec
}

func (s *Service) lifecycleRecord(req api.AppendRequest, prev record.State) record.Record {
	r := record.Record{
		DLQID:          req.DLQID,
		Kind:           req.Kind,
		Domain:         prev.Domain,
		Class:          prev.Class,
		ErrorCode:      prev.ErrorCode,
		ErrorDetail:    prev.ErrorDetail,
		SourceSubject:  prev.SourceSubject,
		SourceStream:   prev.SourceStream,
		SourceSeq:      prev.SourceSeq,
		IdempotencyKey: prev.IdempotencyKey,
		OrderingKey:    prev.OrderingKey,
		PartyID:        prev.PartyID,
		EventTime:      prev.EventTime,
		RedriveCount:   prev.RedriveCount,
		FirstSeen:      prev.FirstSeen,
		QuarantinedAt:  s.now().UTC(),
		Actor:          req.Actor,
		Reason:         req.Reason,
		DrainID:        req.DrainID,
	}
	if req.SourceStream != "" {
		r.SourceStream, r.SourceSeq = req.SourceStream, req.SourceSeq
	}
	switch req.Kind {
	case record.KindCorrected:
		r.Payload = record.NewPayload(req.Payload)
	case record.KindReleased:
		r.Class = req.Class
	case record.KindRedriveRequested:
		r.RedriveCount = prev.RedriveCount
	case record.KindPoisoned:
		r.Class = record.ClassPoison
	}
	return r
}

// sameRequest reports whether stored record r is what req asked for.
func sameRequest(r record.Record, req api.AppendRequest) bool {
	return r.Kind == req.Kind && r.DrainID == req.DrainID && r.Actor == req.Actor
}

func reply(r record.Record, st record.State) api.AppendReply {
	return api.AppendReply{DLQID: r.DLQID, Index: r.Index, AuditHash: r.AuditHash, Status: st.Status, Class: st.Class}
}

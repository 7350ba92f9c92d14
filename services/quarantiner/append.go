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
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// handleAppend appends a lifecycle record requested by another service or an
// operator tool (quarantiner.append), or a legal hold's record requested
// by the auditor (quarantiner.hold, which refuses any other kind). The transition is checked with record.Fold, so a chain can
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
		attribute.String("deadletter.record_kind", string(req.Kind)))
	if req.DLQID == "" || req.Domain == "" || req.Kind == "" || req.Kind == record.KindQuarantined {
		telemetry.Error(span, api.ErrBadRequest)
		_ = r.Error(api.ErrBadRequest, "dlq_id, domain and a lifecycle kind are required", nil)
		return
	}
	// The auditor's endpoint appends holds' records and nothing else; the
	// redriver's appends no hold's record.
	if holdKind := req.Kind == record.KindHoldPlaced || req.Kind == record.KindHoldLifted; holdKind != (r.Subject() == api.QuarantinerHold) {
		telemetry.Error(span, api.ErrForbidden)
		_ = r.Error(api.ErrForbidden, "hold_placed and hold_lifted records are appended on "+api.QuarantinerHold+", and only they", nil)
		return
	}
	rep, code, err := s.appendLifecycle(ctx, req)
	if code == api.ErrDecisionUnsigned {
		// A decision nobody signed (E6): refused, counted, said (ids only).
		s.metrics.decisionsRefused.Inc()
		s.log.Warn("DECISION_UNSIGNED", "dlq_id", req.DLQID, "kind", string(req.Kind), "actor", req.Actor, "err", err)
	}
	if err != nil {
		telemetry.Error(span, code)
		_ = r.Error(code, err.Error(), nil)
		return
	}
	span.SetAttributes(attribute.Int("deadletter.record_index", rep.Index), attribute.String("deadletter.audit_hash", rep.AuditHash))
	_ = r.RespondJSON(rep)
}

// appendError is a refused append, with its reply code.
type appendError struct{ code, msg string }

func (e appendError) Error() string { return e.msg }

// appendLifecycle appends the lifecycle record req asks for to the chain's
// tail: cached when this instance read or wrote the chain lately, else
// read (chains.update). A stale cached tail (another writer appended
// since) shows as an expected index beyond it or a refused conditional
// write: the chain is then read again and the request decided again.
func (s *Service) appendLifecycle(ctx context.Context, req api.AppendRequest) (api.AppendReply, string, error) {
	var landed *api.AppendReply
	t, written, err := s.chains.update(ctx, req.Domain, req.DLQID, false, func(v view) (*record.Record, error) {
		if v.n == 0 {
			return nil, appendError{api.ErrNotFound, "no quarantine record has this dlq id"}
		}
		if req.ExpectedIndex != nil && *req.ExpectedIndex != v.n {
			if v.cached {
				return nil, errStale // decide on the stored chain
			}
			rep, ok, err := s.landed(ctx, req, v.tail)
			if err != nil {
				return nil, err
			}
			if ok {
				landed = &rep
				return nil, nil
			}
			return nil, appendError{api.ErrConflict, "the chain changed since it was read"}
		}
		if v.foldErr != nil {
			return nil, appendError{api.ErrInvalidTransition, "the chain is not in a valid state: " + v.foldErr.Error()}
		}
		rec := s.lifecycleRecord(req, v.state)
		rec.TraceID, rec.SpanID = telemetry.IDs(ctx)
		rec.Index, rec.PrevHash = v.n, v.state.LastHash
		if _, err := v.state.Next(rec); err != nil {
			if v.cached {
				return nil, errStale // a stale tail may refuse what the stored chain allows
			}
			return nil, appendError{api.ErrInvalidTransition, err.Error()}
		}
		// A decision record is sealed only with its person's signed
		// decision of it, on the chain as it stands (decision.go).
		if err := s.checkDecision(ctx, rec, v.last); err != nil {
			if v.cached {
				return nil, errStale // decide on the stored chain
			}
			return nil, err
		}
		return &rec, nil
	})
	var ae appendError
	switch {
	case errors.As(err, &ae):
		return api.AppendReply{}, ae.code, ae
	case errors.Is(err, errKeptChanging):
		return api.AppendReply{}, api.ErrConflict, appendError{api.ErrConflict, "the chain kept changing"}
	case err != nil:
		return api.AppendReply{}, api.ErrUnavailable, err
	case !written:
		return *landed, "", nil
	}
	s.logRecord(ctx, &t.last, t.lastSeq)
	return reply(t.last, t.state), "", nil
}

// landed reports whether the record req asks for is already in the stored
// chain at req's expected index (a retried request that was written): then
// it answers as the first time. t is the stored chain's tail.
func (s *Service) landed(ctx context.Context, req api.AppendRequest, t tail) (api.AppendReply, bool, error) {
	i := *req.ExpectedIndex
	switch {
	case i < 0 || i >= t.n:
		return api.AppendReply{}, false, nil
	case i == t.n-1:
		if !sameRequest(t.last, req) {
			return api.AppendReply{}, false, nil
		}
		return reply(t.last, t.state), true, nil
	}
	ch, err := s.chains.read(ctx, req.Domain, req.DLQID)
	if err != nil {
		return api.AppendReply{}, false, err
	}
	if i >= len(ch.Records) || !sameRequest(ch.Records[i], req) {
		return api.AppendReply{}, false, nil
	}
	st, _ := record.Fold(ch.Records[:i+1])
	return reply(ch.Records[i], st), true, nil
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
		Publisher:      prev.Publisher,
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
		r.Class, r.Decision = req.Class, approval.Raw(req.Signed)
	case record.KindDismissed:
		r.Decision = approval.Raw(req.Signed)
	case record.KindRedriveRequested:
		r.RedriveCount = prev.RedriveCount
		r.IgnoreOrder = req.IgnoreOrder
	case record.KindPoisoned:
		r.Class = record.ClassPoison
	case record.KindApproved:
		r.Signature = req.Signature
	case record.KindHoldPlaced, record.KindHoldLifted:
		if h := req.Hold; h != nil {
			r.Hold = &record.HoldMark{HoldID: h.HoldID, CaseID: h.CaseID, At: h.At.UTC(), Status: prev.Status}
		}
	}
	return r
}

// sameRequest reports whether stored record r is what req asked for.
func sameRequest(r record.Record, req api.AppendRequest) bool {
	return r.Kind == req.Kind && r.DrainID == req.DrainID && r.Actor == req.Actor && sameApproval(r.Signature, req.Signature) &&
		sameHold(r.Hold, req.Hold)
}

// sameHold reports whether two hold marks (either may be absent) name the
// same hold.
func sameHold(a, b *record.HoldMark) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.HoldID == b.HoldID
}

// sameApproval reports whether two signatures (either may be absent) are
// of the same approval.
func sameApproval(a, b *record.Signature) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ApprovalID == b.ApprovalID
}

func reply(r record.Record, st record.State) api.AppendReply {
	return api.AppendReply{DLQID: r.DLQID, Index: r.Index, AuditHash: r.AuditHash, Status: st.Status, Class: st.Class}
}

package auditor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/subjects"
)

// recordFields is the part of a record a records list reads: never the
// payload, headers, detail or attempts.
type recordFields struct {
	DLQID         string    `json:"dlq_id"`
	Index         int       `json:"index"`
	Kind          string    `json:"kind"`
	Domain        string    `json:"domain"`
	Class         string    `json:"class"`
	ErrorCode     string    `json:"error_code"`
	RedriveCount  int       `json:"redrive_count"`
	DrainID       string    `json:"drain_id"`
	Actor         string    `json:"actor"`
	QuarantinedAt time.Time `json:"quarantined_at"`
	AuditHash     string    `json:"audit_hash"`
}

// unreadableKind is the kind of a records list's entry for a stored
// message that is not a record.
const unreadableKind = "(unreadable)"

// listRecords answers a records list (api.ListRequest.Records): the
// records of QUARANTINE after req.AfterSeq, oldest first, read with
// batched direct gets up to the stream's last sequence at the time of the
// request, at most limit of them.
func (s *Service) listRecords(ctx context.Context, req api.ListRequest, limit int) (api.ListReply, error) {
	if (req.Domain != "" && !validToken(req.Domain)) || (req.DLQID != "" && !validToken(req.DLQID)) {
		return api.ListReply{}, badRequest("domain and dlq_id must be single subject tokens")
	}
	filter := subjects.QuarantineAll
	switch {
	case req.Domain != "" && req.DLQID != "":
		filter = subjects.Quarantine(req.Domain, req.DLQID)
	case req.DLQID != "":
		filter = chainFilter(req.DLQID)
	case req.Domain != "":
		filter = "quarantine." + req.Domain + ".>"
	}
	info, err := s.quarantine.Info(ctx)
	if err != nil {
		return api.ListReply{}, fmt.Errorf("auditor: %w", err)
	}
	last := info.State.LastSeq
	rep := api.ListReply{Items: []api.Summary{}, Records: []api.RecordSummary{}, NextAfterSeq: last}
	if req.AfterSeq >= last {
		return rep, nil
	}
	from := req.AfterSeq + 1
	if !req.From.IsZero() {
		seq, found, err := seqAtTime(ctx, s.js, subjects.QuarantineStream, filter, req.From)
		if err != nil {
			return api.ListReply{}, fmt.Errorf("auditor: %w", err)
		}
		if !found || seq > last {
			return rep, nil
		}
		from = max(from, seq)
	}
	full := false
	_, _, err = scan(ctx, s.js, subjects.QuarantineStream, filter, from, last, func(m *jetstream.RawStreamMsg) bool {
		rs := api.RecordSummary{Seq: m.Sequence, Kind: unreadableKind}
		var f recordFields
		if json.Unmarshal(m.Data, &f) == nil {
			rs = api.RecordSummary{Seq: m.Sequence, DLQID: f.DLQID, Index: f.Index, Kind: f.Kind, Domain: f.Domain,
				Class: f.Class, ErrorCode: f.ErrorCode, RedriveCount: f.RedriveCount, DrainID: f.DrainID, Actor: f.Actor,
				QuarantinedAt: f.QuarantinedAt.UTC(), AuditHash: f.AuditHash}
		}
		rep.Records = append(rep.Records, rs)
		full = len(rep.Records) == limit
		return !full
	})
	if err != nil {
		return api.ListReply{}, fmt.Errorf("auditor: read %s: %w", subjects.QuarantineStream, err)
	}
	if full {
		rep.NextAfterSeq = rep.Records[len(rep.Records)-1].Seq
	}
	return rep, nil
}

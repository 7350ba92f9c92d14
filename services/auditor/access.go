package auditor

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/safetext"
	"github.com/deadletter/deadletter/shared/subjects"
)

// anonymous is the user of an unauthenticated payload read, allowed only
// with Config.AllowAnonymous (tests).
const anonymous = "anonymous"

// reader is the caller of an allowed payload read.
type reader struct {
	user, role string
}

// payloadReader refuses a payload read unless the caller's role reads
// payloads (or, with AllowAnonymous, there is no caller) and returns who
// reads. Nothing is recorded yet: recordAccess does that before any
// payload byte leaves.
func (s *Service) payloadReader(ctx context.Context, what string) (reader, error) {
	id, err := callerOf(ctx)
	switch {
	case err != nil && s.cfg.AllowAnonymous:
		return reader{user: anonymous}, nil
	case err != nil:
		return reader{}, api.Wrap(api.ErrUnauthenticated, err, "payloads are read only by an authenticated inspector or operator")
	case !id.Role.ReadsPayloads():
		s.log.Warn("payload read refused", "user", id.User, "role", string(id.Role), "what", what)
		return reader{}, api.Errorf(api.ErrForbidden, "role %s may not read payloads", id.Role)
	}
	return reader{user: id.User, role: string(id.Role)}, nil
}

// approvalReader checks a payload read for an approval's review: the
// caller reads payloads, or is an approver, and the approval exists and is
// a correction of dlqID.
func (s *Service) approvalReader(ctx context.Context, approvalID, dlqID string) (reader, error) {
	id, err := callerOf(ctx)
	switch {
	case err != nil && s.cfg.AllowAnonymous:
		id = access.Identity{User: anonymous, Role: access.RoleApprover}
	case err != nil:
		return reader{}, api.Wrap(api.ErrUnauthenticated, err, "payloads are read only by an authenticated person")
	case !id.Role.ReadsPayloads() && id.Role != access.RoleApprover:
		s.log.Warn("payload read refused", "user", id.User, "role", string(id.Role), "what", api.AccessGet, "approval_id", safetext.LogID(approvalID))
		return reader{}, api.Errorf(api.ErrForbidden, "role %s may not read payloads", id.Role)
	}
	a, err := s.approvals.Get(ctx, approvalID)
	if err != nil {
		return reader{}, approval.APIError(err)
	}
	if a.DLQID != dlqID || a.Action != api.ActionCorrect {
		s.log.Warn("payload read refused", "user", id.User, "role", string(id.Role), "what", api.AccessGet, "approval_id", safetext.LogID(approvalID), "dlq_id", safetext.LogID(dlqID))
		return reader{}, api.Errorf(api.ErrForbidden, "approval %s is not a correction of this record", approvalID)
	}
	return reader{user: id.User, role: string(id.Role)}, nil
}

// idsHash is the AccessRecord.IDsHash of ids.
func idsHash(ids []string) string {
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(id))
		h.Write([]byte{'\n'})
	}
	return hexString(h.Sum(nil))
}

// recordAccess writes the access record of a payload read of ids by who
// to AUDIT and waits for the server's acknowledgement: the caller sends
// no payload unless it returns nil. Its error is UNAVAILABLE (the read
// is refused, fail closed).
func (s *Service) recordAccess(ctx context.Context, who reader, action, reason string, filter *api.ExportFilter, ids []string) (uint64, error) {
	rec := api.AccessRecord{User: who.user, Role: who.role, At: s.now().UTC(), Action: action, Filter: filter,
		Count: len(ids), IDsHash: idsHash(ids), Reason: reason}
	if len(ids) <= api.MaxAccessIDs {
		rec.DLQIDs = ids
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, api.Wrap(api.ErrInternal, err, "the access record could not be encoded")
	}
	ctx, cancel := context.WithTimeout(ctx, accessTimeout)
	defer cancel()
	m := nats.NewMsg(subjects.AuditAccess(who.user))
	m.Data = b
	ack, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectStream(subjects.AuditStream))
	if err != nil {
		s.metrics.accessRefused.Inc()
		s.log.Error("AUDIT_ACCESS_NOT_RECORDED", "user", who.user, "role", who.role, "action", action,
			"count", len(ids), "ids_hash", rec.IDsHash, "err", err)
		return 0, api.Wrap(api.ErrUnavailable, err, "the payload read could not be recorded in the access audit: refused; retry")
	}
	s.log.Info("payload read", "user", who.user, "role", who.role, "action", action, "count", len(ids),
		"ids_hash", rec.IDsHash, "audit_seq", ack.Sequence)
	return ack.Sequence, nil
}

// accessScanWindow is how many AUDIT sequences an access listing reads
// at a time, from the newest down.
const accessScanWindow = 1024

// Access lists the access audit, newest first (by AUDIT sequence): the
// records of req.User (or every user) whose time is within req.Since and
// req.Until. The cursor is the AUDIT sequence of the last item of the
// previous page. Since bounds the scan below by the first AUDIT record
// stored at or after it (a record is stored after its time is taken).
func (s *Service) Access(ctx context.Context, req api.AccessRequest) (api.AccessReply, error) {
	limit := req.Limit
	if limit == 0 {
		limit = defaultPageSize
	}
	before := uint64(math.MaxUint64)
	if req.Cursor != "" {
		n, err := strconv.ParseUint(req.Cursor, 10, 64)
		if err != nil || n == 0 {
			return api.AccessReply{}, api.BadField("cursor", "not a cursor of this endpoint")
		}
		before = n
	}
	filter := subjects.AuditAccessAll
	if req.User != "" {
		filter = subjects.AuditAccess(req.User)
	}
	info, err := s.audit.Info(ctx)
	if err != nil {
		return api.AccessReply{}, fmt.Errorf("auditor: %w", err)
	}
	lo := uint64(1)
	if !req.Since.IsZero() {
		seq, found, err := seqAtTime(ctx, s.js, subjects.AuditStream, filter, req.Since)
		if err != nil {
			return api.AccessReply{}, fmt.Errorf("auditor: read %s: %w", subjects.AuditStream, err)
		}
		if !found {
			return api.AccessReply{Items: []api.AccessEntry{}}, nil
		}
		lo = seq
	}
	rep := api.AccessReply{Items: []api.AccessEntry{}}
	hi := min(before-1, info.State.LastSeq)
	var window []api.AccessEntry
	for hi >= lo && hi > 0 {
		wlo := max(lo, hi-min(hi, accessScanWindow)+1)
		window = window[:0]
		_, _, err := scan(ctx, s.js, subjects.AuditStream, filter, wlo, hi, func(m *jetstream.RawStreamMsg) bool {
			var e api.AccessEntry
			if json.Unmarshal(m.Data, &e.AccessRecord) != nil {
				return true
			}
			e.Seq = m.Sequence
			if (req.User == "" || e.User == req.User) && (req.Since.IsZero() || !e.At.Before(req.Since)) &&
				(req.Until.IsZero() || !e.At.After(req.Until)) {
				window = append(window, e)
			}
			return true
		})
		if err != nil {
			return api.AccessReply{}, fmt.Errorf("auditor: read %s: %w", subjects.AuditStream, err)
		}
		for i := len(window) - 1; i >= 0; i-- {
			if len(rep.Items) == limit {
				rep.NextCursor = strconv.FormatUint(rep.Items[len(rep.Items)-1].Seq, 10)
				return rep, nil
			}
			rep.Items = append(rep.Items, window[i])
		}
		hi = wlo - 1
	}
	return rep, nil
}

// accessTimeout bounds the write of one access record.
const accessTimeout = 10 * time.Second

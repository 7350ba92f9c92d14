package hold

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/trail"
)

// Errors of the store.
var (
	// ErrNotFound: no hold has the id.
	ErrNotFound = errors.New("hold: no hold has this id")
	// ErrNotPlaced: the hold to lift is lifted already.
	ErrNotPlaced = errors.New("hold: the hold is not placed")
	// ErrConflict: the hold changed meanwhile (a concurrent lift).
	ErrConflict = errors.New("hold: the hold changed meanwhile")
	// ErrUnavailable: HOLDS or AUDIT could not be read or written.
	ErrUnavailable = errors.New("hold: store unavailable")
	// ErrTooMany: HOLDS holds more holds than one multi-last get returns.
	ErrTooMany = errors.New("hold: too many holds to list")
)

// The HOLDS bucket's stream and key subjects.
var (
	holdsStream = subjects.BucketStream(subjects.HoldsBucket)
	holdsPrefix = strings.TrimSuffix(subjects.BucketKeys(subjects.HoldsBucket), ">")
)

// kvOperation is the header of a key-value delete or purge marker.
const kvOperation = "KV-Operation"

// auditObject is the AUDIT object kind of a hold's actions.
const auditObject = "hold"

// Audit actions of a hold (api.AuditAction.Action).
const (
	AuditPlaced = "placed"
	AuditLifted = "lifted"
)

// Store keeps the holds in the HOLDS bucket. Reading takes read access to
// the bucket's stream (the redriver's); Place, Lift and Audit take write
// access and audit.actions.hold.> (the auditor's).
type Store struct {
	js  jetstream.JetStream
	log *slog.Logger
}

// NewStore returns the store of HOLDS (provisioned by streams.EnsureCore)
// on js. log receives ids only (nil: discard).
func NewStore(js jetstream.JetStream, log *slog.Logger) *Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{js: js, log: log}
}

// All returns every hold, active and lifted, newest first, read with one
// multi-last direct get on the bucket's stream (no consumer).
func (s *Store) All(ctx context.Context) ([]api.Hold, error) {
	last := map[string]api.Hold{}
	pending, err := streams.DirectGet(ctx, s.js, holdsStream, streams.DirectRequest{MultiLast: []string{holdsPrefix + ">"}},
		func(m *jetstream.RawStreamMsg) error {
			key, ok := strings.CutPrefix(m.Subject, holdsPrefix)
			if !ok || m.Header.Get(kvOperation) != "" {
				return nil // a delete or purge marker: none is ever written
			}
			var h api.Hold
			if err := json.Unmarshal(m.Data, &h); err != nil || h.ID != key {
				s.log.WarnContext(ctx, "hold does not decode", "hold_id", key)
				return nil
			}
			h.Revision = m.Sequence
			last[key] = h
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("%w: list holds: %w", ErrUnavailable, err)
	}
	if pending > 0 {
		return nil, fmt.Errorf("%w: %d more", ErrTooMany, pending)
	}
	out := make([]api.Hold, 0, len(last))
	for _, h := range last {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b api.Hold) int {
		return cmp.Or(b.PlacedAt.Compare(a.PlacedAt), strings.Compare(b.ID, a.ID))
	})
	return out, nil
}

// Active returns the holds placed and not lifted, newest first.
func (s *Store) Active(ctx context.Context) ([]api.Hold, error) {
	all, err := s.All(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(h api.Hold) bool { return h.Status != api.HoldActive }), nil
}

// Get returns the hold id, read by direct get.
func (s *Store) Get(ctx context.Context, id string) (api.Hold, error) {
	if !api.ValidHoldID(id) {
		return api.Hold{}, fmt.Errorf("%w: %.64q", ErrNotFound, id)
	}
	var h api.Hold
	found := false
	_, err := streams.DirectGet(ctx, s.js, holdsStream, streams.DirectRequest{LastFor: holdsPrefix + id}, func(m *jetstream.RawStreamMsg) error {
		if m.Header.Get(kvOperation) != "" {
			return nil
		}
		if err := json.Unmarshal(m.Data, &h); err != nil {
			return fmt.Errorf("hold %s does not decode: %w", id, err)
		}
		h.Revision, found = m.Sequence, true
		return nil
	})
	if err != nil {
		return api.Hold{}, fmt.Errorf("%w: read %s: %w", ErrUnavailable, id, err)
	}
	if !found {
		return api.Hold{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return h, nil
}

// Place stores a new active hold of req by who, at now, and returns it
// (the id is new: a create).
func (s *Store) Place(ctx context.Context, req api.HoldPlaceRequest, who access.Identity, now time.Time) (api.Hold, error) {
	id, err := NewID(now)
	if err != nil {
		return api.Hold{}, err
	}
	h := api.Hold{ID: id, CaseID: req.CaseID, Reason: req.Reason, Target: req.Target, Status: api.HoldActive,
		PlacedBy: who.User, PlacedByRole: string(who.Role), PlacedAt: now.UTC()}
	b, err := json.Marshal(h)
	if err != nil {
		return api.Hold{}, fmt.Errorf("hold: encode: %w", err)
	}
	ack, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: holdsPrefix + id, Data: b,
		Header: nats.Header{jetstream.ExpectedLastSubjSeqHeader: []string{"0"}}})
	if err != nil {
		return api.Hold{}, fmt.Errorf("%w: create %s: %w", ErrUnavailable, id, err)
	}
	h.Revision = ack.Sequence
	return h, nil
}

// Lift marks hold id lifted by who, at now, for reason: a
// compare-and-set on the entry's revision, so of two lifts exactly one
// succeeds (the other: ErrNotPlaced). caseID must be the hold's.
func (s *Store) Lift(ctx context.Context, id, caseID, reason string, who access.Identity, now time.Time) (api.Hold, error) {
	return s.lift(ctx, id, caseID, reason, who, Approval{}, now)
}

// LiftSigned is Lift with who's signed decision to lift (issue #38),
// kept in the hold (LiftSigned) and in AUDIT's lifted action.
func (s *Store) LiftSigned(ctx context.Context, id, caseID, reason string, who access.Identity, signed *api.SignedDecision, now time.Time) (api.Hold, error) {
	return s.lift(ctx, id, caseID, reason, who, Approval{Signed: signed}, now)
}

// Approval is the signed two-person approval a lift executes: its id and
// its signer, and the requester's signed decision to lift.
type Approval struct {
	ID, Approver string
	Signed       *api.SignedDecision
}

// LiftApproved is Lift executing signed approval ap (the hold keeps its
// id and signer: LiftApprovalID, LiftApprovedBy).
func (s *Store) LiftApproved(ctx context.Context, id, caseID, reason string, who access.Identity, ap Approval, now time.Time) (api.Hold, error) {
	if ap.ID == "" || ap.Approver == "" {
		return api.Hold{}, fmt.Errorf("%w: %s: no signed approval", ErrNotPlaced, id)
	}
	return s.lift(ctx, id, caseID, reason, who, ap, now)
}

// lift is Lift, recording ap when set.
func (s *Store) lift(ctx context.Context, id, caseID, reason string, who access.Identity, ap Approval, now time.Time) (api.Hold, error) {
	h, err := s.Get(ctx, id)
	if err != nil {
		return api.Hold{}, err
	}
	switch {
	case h.Status != api.HoldActive:
		return api.Hold{}, fmt.Errorf("%w: %s was lifted", ErrNotPlaced, id)
	case h.CaseID != caseID:
		return api.Hold{}, fmt.Errorf("%w: %s is not placed for this case", ErrNotPlaced, id)
	}
	rev := h.Revision
	at := now.UTC()
	h.Status, h.LiftedBy, h.LiftedByRole, h.LiftedAt, h.LiftReason, h.Revision = api.HoldLifted, who.User, string(who.Role), &at, reason, 0
	h.LiftApprovalID, h.LiftApprovedBy, h.LiftSigned = ap.ID, ap.Approver, ap.Signed
	b, err := json.Marshal(h)
	if err != nil {
		return api.Hold{}, fmt.Errorf("hold: encode: %w", err)
	}
	ack, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: holdsPrefix + id, Data: b,
		Header: nats.Header{jetstream.ExpectedLastSubjSeqHeader: []string{fmt.Sprint(rev)}}})
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		if cur, gerr := s.Get(ctx, id); gerr == nil && cur.Status != api.HoldActive {
			return api.Hold{}, fmt.Errorf("%w: %s was lifted meanwhile", ErrNotPlaced, id)
		}
		return api.Hold{}, fmt.Errorf("%w: %s", ErrConflict, id)
	}
	if err != nil {
		return api.Hold{}, fmt.Errorf("%w: update %s: %w", ErrUnavailable, id, err)
	}
	h.Revision = ack.Sequence
	return h, nil
}

// Audit writes hold h's placing (AuditPlaced) or lifting (AuditLifted)
// to AUDIT on subjects.AuditAction("hold", id): who, when, why, the case
// and the target (ids and codes: a dlq id, a party id, a filter). It is
// idempotent within AUDIT's de-duplication window (the message id is the
// hold's id and action), so a caller may retry it.
func (s *Store) Audit(ctx context.Context, h api.Hold, action string) error {
	d := AuditDetail{CaseID: h.CaseID, Kind: targetKind(h.Target), Target: h.Target}
	if action == AuditLifted {
		d.ApprovalID, d.ApprovedBy, d.Signed = h.LiftApprovalID, h.LiftApprovedBy, h.LiftSigned
	}
	detail, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("hold: encode audit: %w", err)
	}
	act := api.AuditAction{Action: action, Object: auditObject, ObjectID: h.ID, Actor: h.PlacedBy, Role: h.PlacedByRole,
		At: h.PlacedAt, Reason: h.Reason, Detail: detail}
	if action == AuditLifted && h.LiftedAt != nil {
		act.Actor, act.Role, act.At, act.Reason = h.LiftedBy, h.LiftedByRole, *h.LiftedAt, h.LiftReason
	}
	if _, err := trail.Publish(ctx, s.js, act, h.ID+"-"+action); err != nil {
		return fmt.Errorf("%w: audit %s of %s: %w", ErrUnavailable, action, h.ID, err)
	}
	return nil
}

// AuditDetail is the Detail of a hold's audit action (what package
// rebuild folds HOLDS back from).
type AuditDetail struct {
	CaseID string `json:"case_id"`
	// Kind is "dlq_id", "party" or "filter"; Target the target.
	Kind   string         `json:"target_kind"`
	Target api.HoldTarget `json:"target"`
	// ApprovalID and ApprovedBy: a lift's two-person approval and its
	// signer, when it needed one.
	ApprovalID string `json:"approval_id,omitempty"`
	ApprovedBy string `json:"approved_by,omitempty"`
	// Signed is the lifter's signed decision (issue #38).
	Signed *api.SignedDecision `json:"signed,omitempty"`
}

// targetKind names the kind of t.
func targetKind(t api.HoldTarget) string {
	switch {
	case t.DLQID != "":
		return "dlq_id"
	case t.DLQIDs != nil:
		return "dlq_ids"
	case t.PartyID != "":
		return "party"
	}
	return "filter"
}

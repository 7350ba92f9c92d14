package auditor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor/legalhold"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/retry"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Legal holds (package hold) are placed and lifted here: hold.place and
// hold.lift store the hold in HOLDS, write the action to AUDIT and append
// the hold's record to every chain it holds (on quarantiner.hold, which
// appends nothing else). A party or filter hold is dynamic: the live view
// tells holdWorker of every record it applies, and a chain that matches an
// active dynamic hold and does not carry it gets its record. When
// QUARANTINE has a MaxAge, every held chain is copied, record by record as
// stored, into LEGALHOLD (no age limit) as soon as it is held or grows,
// and a sweep every legalhold.SweepEvery(MaxAge) catches up whatever
// failed.

// Provenance headers of a LEGALHOLD copy (package legalhold).
const (
	HeaderSourceStream  = legalhold.HeaderSourceStream
	HeaderSourceSeq     = legalhold.HeaderSourceSeq
	HeaderSourceSubject = legalhold.HeaderSourceSubject
)

// holdState is the auditor's view of the holds and its pending work
// (legalhold.Queue), and whether LEGALHOLD is provisioned.
type holdState struct {
	*legalhold.Queue
	legal bool // LEGALHOLD is provisioned (QUARANTINE has a MaxAge)
}

// newHoldState returns the holds of store, none queued, LEGALHOLD not
// provisioned.
func newHoldState(store *hold.Store) *holdState { return &holdState{Queue: legalhold.NewQueue(store)} }

// onRecord is the live view's hook (legalhold.Queue.OnRecord).
func (hs *holdState) onRecord(r chain.Head, hc *heldChain) {
	var carries func(string) bool
	if hc != nil {
		carries = func(id string) bool { return hc.holds[id] }
	}
	hs.OnRecord(r, carries, hs.legal)
}

// runHolds does the queued hold work until ctx is done: once the live
// view has caught up with QUARANTINE as it was at start (the records it
// replays then queue work for chains that may already carry a hold), then
// whenever work is queued, with a sweep of the held chains' copies every
// sweep.
func (s *Service) runHolds(ctx context.Context, sweep time.Duration) {
	if info, err := s.quarantine.Info(ctx); err == nil {
		if err := s.index.waitFor(ctx, info.State.LastSeq); err != nil {
			return
		}
	}
	reload := time.NewTicker(legalhold.Reload)
	defer reload.Stop()
	sweeps := time.NewTicker(sweep)
	defer sweeps.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload.C:
			if err := s.holds.Reload(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("reading the legal holds failed", "err", err)
			}
			continue
		case <-sweeps.C:
			s.sweepHolds()
		case <-s.holds.Wake():
		}
		for _, w := range s.holds.Take() {
			if err := s.doHoldWork(ctx, w); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Error("legal hold work failed; retried at the next sweep", "dlq_id", w.DLQID, "hold_id", w.HoldID,
					"work", int(w.Kind), "err", err)
				s.holds.Retry(w) // retried at the next sweep, not at once
			}
		}
	}
}

// sweepHolds queues a copy of every held chain with records not copied
// yet, and the lift of every lifted hold a chain still carries.
func (s *Service) sweepHolds() {
	refs := s.index.heldChains("")
	held := make([]legalhold.Held, len(refs))
	for i, ref := range refs {
		held[i] = legalhold.Held{DLQID: ref.dlqID, Domain: ref.domain, Records: ref.records, Holds: ref.holds}
	}
	s.holds.Sweep(held, s.holds.legal)
}

// doHoldWork does one piece of queued work.
func (s *Service) doHoldWork(ctx context.Context, w legalhold.Work) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if w.Kind == legalhold.Copy {
		return s.copyChain(ctx, w.Domain, w.DLQID)
	}
	h, ok := s.holds.Hold(w.HoldID)
	switch {
	case !ok:
		return nil
	case w.Kind == legalhold.Place && (h.Status != api.HoldActive || s.index.carries(w.DLQID, h.ID)):
		return nil // lifted meanwhile, or the record is written
	case w.Kind == legalhold.Lift && h.Status != api.HoldLifted:
		return nil
	}
	kind := record.KindHoldPlaced
	if w.Kind == legalhold.Lift {
		kind = record.KindHoldLifted
	}
	return s.appendHold(ctx, h, kind, w.Domain, w.DLQID)
}

// appendHold appends hold h's record of kind to the chain
// (legalhold.Append).
func (s *Service) appendHold(ctx context.Context, h api.Hold, kind record.Kind, domain, dlqID string) error {
	return legalhold.Append(ctx, s.chains, s.nc, h, kind, domain, dlqID)
}

// copyChain copies the chain's records not yet in LEGALHOLD there
// (legalhold.CopyChain) and notes how many are.
func (s *Service) copyChain(ctx context.Context, domain, dlqID string) error {
	n, err := legalhold.CopyChain(ctx, s.js, s.chains, domain, dlqID)
	if err != nil {
		return err
	}
	s.holds.Copied(dlqID, n)
	return nil
}

// holder is the authenticated caller placing or lifting a hold (the
// endpoint subject): a role the endpoint table allows on it (the server's
// imports already restrict the endpoints to them); anonymous only with
// AllowAnonymous.
func (s *Service) holder(ctx context.Context, subject string) (access.Identity, error) {
	id, err := callerOf(ctx)
	switch {
	case err != nil && s.cfg.AllowAnonymous:
		return access.Identity{User: anonymous}, nil
	case err != nil:
		return access.Identity{}, api.Wrap(api.ErrUnauthenticated, err, "legal holds are placed and lifted only by an authenticated inspector or operator")
	case !access.Allowed(subject, id.Role):
		return access.Identity{}, api.Errorf(api.ErrForbidden, "role %s may not place or lift legal holds", id.Role)
	}
	return id, nil
}

// holdErr maps the store's errors to coded ones.
func holdErr(err error) error {
	switch {
	case errors.Is(err, hold.ErrNotFound):
		return api.Wrap(api.ErrNotFound, err, "no hold has this id")
	case errors.Is(err, hold.ErrNotPlaced):
		return api.Wrap(api.ErrNotPlaced, err, "the hold is not placed (lifted already, or for another case)")
	case errors.Is(err, hold.ErrConflict):
		return api.Wrap(api.ErrConflict, err, "the hold changed meanwhile")
	}
	return api.Wrap(api.ErrUnavailable, err, "the legal holds could not be read or written")
}

// auditHold writes a hold's action to AUDIT, retrying a few times (it is
// idempotent).
func (s *Service) auditHold(ctx context.Context, h api.Hold, action string) error {
	err := retry.Policy{}.Times(ctx, 3, nil, func(ctx context.Context) error { return s.holds.Store().Audit(ctx, h, action) })
	if err == nil {
		return nil
	}
	s.log.Error("legal hold action not written to AUDIT", "hold_id", h.ID, "action", action, "err", err)
	return api.Wrap(api.ErrUnavailable, err, "hold "+h.ID+" is "+action+" but its action could not be written to AUDIT")
}

// HoldPlace places a legal hold (hold.place) by the authenticated caller
// and appends its record to every chain it holds now: one event, or every
// stored chain (resolved ones included) that matches a party or filter
// hold, which then also holds the chains quarantined later that match it.
func (s *Service) HoldPlace(ctx context.Context, req api.HoldPlaceRequest) (api.HoldReply, error) {
	who, err := s.holder(ctx, api.HoldPlace)
	if err != nil {
		return api.HoldReply{}, err
	}
	if !s.placeLimit.allow(who.User) {
		s.log.Warn("hold placement refused", "user", who.User, "code", api.ErrHoldRateLimited)
		return api.HoldReply{}, api.Errorf(api.ErrHoldRateLimited, "%s placed more holds than %d a minute (burst %d): retry later",
			who.User, s.cfg.HoldPlacePerMinute, s.cfg.HoldPlaceBurst)
	}
	if id := req.Target.DLQID; id != "" {
		if _, err := s.chains.Last(ctx, domain.DomainOfID(id), id); errors.Is(err, chain.ErrNotFound) {
			return api.HoldReply{}, api.Errorf(api.ErrNotFound, "no quarantine chain has this dlq id")
		} else if err != nil {
			return api.HoldReply{}, fmt.Errorf("auditor: read chain: %w", err)
		}
	}
	if req.Target.DLQID == "" && !req.Confirm {
		// A party or filter that matches nothing is likely misspelt: the
		// person confirms it (it will hold what is quarantined later).
		found, err := s.holdTargets(ctx, req.Target)
		if err != nil {
			return api.HoldReply{}, fmt.Errorf("auditor: find the chains the hold would hold: %w", err)
		}
		if len(found) == 0 {
			return api.HoldReply{}, api.Errorf(api.ErrHoldMatchesNothing,
				"the hold's party or filter matches no stored event; place it with confirm to hold the matching events quarantined later")
		}
	}
	h, err := s.holds.Store().Place(ctx, req, who, s.now())
	if err != nil {
		return api.HoldReply{}, holdErr(err)
	}
	s.holds.Set(h) // from now on the live view matches new chains against it
	s.log.Info("legal hold placed", "hold_id", h.ID, "case_id", h.CaseID, "user", who.User)
	if err := s.auditHold(ctx, h, hold.AuditPlaced); err != nil {
		return api.HoldReply{}, err
	}
	targets, err := s.holdTargets(ctx, h.Target)
	if err != nil {
		return api.HoldReply{}, fmt.Errorf("auditor: find the chains hold %s holds: %w", h.ID, err)
	}
	rep := api.HoldReply{HeldHold: api.HeldHold{Hold: h, DLQIDs: []string{}}}
	for _, t := range targets {
		if err := s.appendHold(ctx, h, record.KindHoldPlaced, t.domain, t.dlqID); err != nil {
			s.log.Error("legal hold record not appended; retried", "hold_id", h.ID, "dlq_id", t.dlqID, "err", err)
			rep.Failed = append(rep.Failed, t.dlqID)
			s.holds.Add(legalhold.Work{Kind: legalhold.Place, HoldID: h.ID, DLQID: t.dlqID, Domain: t.domain})
			continue
		}
		rep.DLQIDs = append(rep.DLQIDs, t.dlqID)
	}
	return rep, nil
}

// chainRef names a chain.
type chainRef struct{ domain, dlqID string }

// holdTargets returns the stored chains target holds: its one event, or
// those whose last record matches it, read from QUARANTINE up to its last
// sequence now (a chain stored later is the live view's to match).
func (s *Service) holdTargets(ctx context.Context, t api.HoldTarget) ([]chainRef, error) {
	if t.DLQID != "" {
		return []chainRef{{domain.DomainOfID(t.DLQID), t.DLQID}}, nil
	}
	info, err := s.quarantine.Info(ctx)
	if err != nil {
		return nil, err
	}
	filter := subjects.QuarantineAll
	if t.Filter != nil && t.Filter.Domain != "" && validToken(t.Filter.Domain) {
		filter = "quarantine." + t.Filter.Domain + ".>"
	}
	match := map[string]chainRef{}
	matches := map[string]bool{}
	if info.State.Msgs > 0 {
		_, _, err = scan(ctx, s.js, subjects.QuarantineStream, filter, info.State.FirstSeq, info.State.LastSeq, func(m *jetstream.RawStreamMsg) bool {
			h, err := chain.DecodeHead(m.Data)
			if err != nil {
				return true
			}
			matches[h.DLQID] = hold.Matches(t, hold.FromHead(h)) // the last record decides
			match[h.DLQID] = chainRef{h.Domain, h.DLQID}
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	var out []chainRef
	for id, ok := range matches {
		if ok {
			out = append(out, match[id])
		}
	}
	slices.SortFunc(out, func(a, b chainRef) int { return strings.Compare(a.dlqID, b.dlqID) })
	return out, nil
}

// Two-person approval of a lift (package approval, ActionHoldLift): when
// the policy in force names it (the default does), hold.lift lifts
// nothing: it asks the redriver, the approval owner and the only writer
// of APPROVALS, to store a pending approval (approval.hold_lift) and
// answers APPROVAL_REQUIRED with it. An approver other than the requester signs it
// at the redriver (approval.approve, re-authenticating), which executes
// approvals: it asks hold.lift.approved here with the approval's id, a
// subject of the services' account that no person's account imports. The
// lift is done only for an approval read from APPROVALS as approved, of
// kind hold_lift, for that hold, not executed, with a proof of its
// signature that verifies against the configured approval key and
// matches its request and decision in AUDIT; it is the requester's
// lift (the hold's LiftedBy, the chains' hold_lifted records), with the
// approval and its signer kept in the hold (LiftApprovalID,
// LiftApprovedBy) and its AUDIT action; the signature itself is the
// approval's AUDIT action. Without a signed approval no path lifts a
// hold the policy holds for a second person: hold.lift refuses, and
// hold.lift.approved finds no proven approval (only the redriver writes
// APPROVALS, and only the redriver's key, used after re-authenticating an
// approver, makes a proof).

// noSigning is the auditor's Reauthenticator: it never signs approvals
// (the redriver does), so it refuses every re-authentication.
type noSigning struct{}

// Reauthenticate refuses.
func (noSigning) Reauthenticate(context.Context, string, api.Password) error {
	return fmt.Errorf("%w: approvals are signed at the redriver", approval.ErrForbidden)
}

// HoldLift lifts a legal hold (hold.lift) by the authenticated caller
// and appends the lift to every chain that carries it; when the approval
// policy names hold lifts it lifts nothing and answers APPROVAL_REQUIRED
// with the pending approval it created.
func (s *Service) HoldLift(ctx context.Context, req api.HoldLiftRequest) (api.HoldReply, error) {
	who, err := s.holder(ctx, api.HoldLift)
	if err != nil {
		return api.HoldReply{}, err
	}
	// The hold must be liftable (NOT_FOUND, NOT_PLACED) before anyone is
	// asked to approve its lift.
	cur, err := s.holds.Store().Get(ctx, req.ID)
	if err != nil {
		return api.HoldReply{}, holdErr(err)
	}
	if cur.Status != api.HoldActive || cur.CaseID != req.CaseID {
		return api.HoldReply{}, holdErr(fmt.Errorf("%w: %s", hold.ErrNotPlaced, req.ID))
	}
	if err := s.requireLiftApproval(ctx, who, req); err != nil {
		return api.HoldReply{}, err
	}
	h, err := s.holds.Store().Lift(ctx, req.ID, req.CaseID, req.Reason, who, s.now())
	if err != nil {
		return api.HoldReply{}, holdErr(err)
	}
	return s.lifted(ctx, h)
}

// requireLiftApproval returns nil when the policy in force lets who lift
// at once, else an APPROVAL_REQUIRED *api.Error carrying the pending
// approval the redriver created. The auditor writes no approval: the
// redriver, the approval owner, alone writes APPROVALS
// (api.ApprovalHoldLift). It fails closed: a redriver that does not
// answer refuses the lift.
func (s *Service) requireLiftApproval(ctx context.Context, who access.Identity, req api.HoldLiftRequest) error {
	body, err := json.Marshal(req)
	if err != nil {
		return api.Wrap(api.ErrInternal, err, "the request could not be encoded")
	}
	_, err = endpoint.Call[api.ApprovalHoldLiftRequest, api.ApprovalReply](ctx, s.nc, api.ApprovalHoldLift, api.ApprovalHoldLiftRequest{
		HoldID: req.ID, Request: body, Requester: who.User, RequesterRole: string(who.Role), Reason: req.Reason})
	if e := api.AsError(err); e != nil && e.Code == api.ErrApprovalRequired && e.Approval != nil {
		s.log.Info("APPROVAL_REQUIRED", "approval_id", e.Approval.ID, "action", e.Approval.Action, "hold_id", req.ID, "user", who.User)
		return e
	}
	if err != nil && api.AsError(err) == nil {
		return api.Wrap(api.ErrUnavailable, err, "the approval owner (the redriver) did not answer: the lift is refused; retry")
	}
	return err
}

// HoldLiftApproved executes signed approval req.ApprovalID of a hold lift
// (hold.lift.approved: the redriver's request; no person's account
// imports the subject, and a request that carries a person is refused).
// The approval must be approved, of kind hold_lift, for the hold its
// request names; the hold is lifted as the requester. A repeat (the
// redriver retrying before it marked the approval executed) finds the
// hold lifted by this approval and completes the lift's records.
func (s *Service) HoldLiftApproved(ctx context.Context, req api.HoldLiftApprovedRequest) (api.HoldReply, error) {
	if who, err := callerOf(ctx); err == nil {
		return api.HoldReply{}, api.Errorf(api.ErrForbidden, "%s may not execute approvals: the redriver does", who.User)
	}
	a, err := s.approvals.Get(ctx, req.ApprovalID)
	if err != nil {
		return api.HoldReply{}, approval.APIError(err)
	}
	var lift api.HoldLiftRequest
	switch {
	case a.Action != api.ActionHoldLift:
		return api.HoldReply{}, api.Errorf(api.ErrForbidden, "approval %s is not a hold lift", a.ID)
	case a.Status != api.ApprovalApproved:
		return api.HoldReply{}, api.Errorf(api.ErrForbidden, "approval %s is %s, not approved", a.ID, a.Status)

	case json.Unmarshal(a.Request, &lift) != nil || lift.Validate() != nil || lift.ID != a.HoldID:
		return api.HoldReply{}, api.Errorf(api.ErrBadRequest, "approval %s does not hold a lift of hold %s", a.ID, a.HoldID)
	}
	// Only a decision the approval owner signed after re-authenticating
	// the approver, recorded in AUDIT with its request, lifts the hold.
	if err := s.approvals.Proven(ctx, a); err != nil {
		s.log.Error("approved hold lift refused", "approval_id", a.ID, "hold_id", a.HoldID, "code", approval.Code(err))
		return api.HoldReply{}, approval.APIError(err)
	}
	sig, err := approval.Signature(a)
	if err != nil {
		return api.HoldReply{}, approval.APIError(err)
	}
	requester := access.Identity{User: a.Requester, Role: access.Role(a.RequesterRole)}
	h, err := s.holds.Store().LiftApproved(ctx, lift.ID, lift.CaseID, lift.Reason, requester, hold.Approval{ID: a.ID, Approver: sig.Approver}, s.now())
	if errors.Is(err, hold.ErrNotPlaced) {
		if cur, gerr := s.holds.Store().Get(ctx, lift.ID); gerr == nil && cur.LiftApprovalID == a.ID {
			h, err = cur, nil // a repeat: lifted by this approval
		}
	}
	if err != nil {
		return api.HoldReply{}, holdErr(err)
	}
	return s.lifted(ctx, h)
}

// lifted completes lifted hold h: its AUDIT action and the lift appended
// to every chain that carries it.
func (s *Service) lifted(ctx context.Context, h api.Hold) (api.HoldReply, error) {
	s.holds.Set(h)
	s.log.Info("legal hold lifted", "hold_id", h.ID, "case_id", h.CaseID, "user", h.LiftedBy, "approval_id", h.LiftApprovalID)
	if err := s.auditHold(ctx, h, hold.AuditLifted); err != nil {
		return api.HoldReply{}, err
	}
	// Every record stored so far applied: the chains carrying the hold.
	info, err := s.quarantine.Info(ctx)
	if err != nil {
		return api.HoldReply{}, fmt.Errorf("auditor: %w", err)
	}
	if err := s.index.waitFor(ctx, info.State.LastSeq); err != nil {
		return api.HoldReply{}, err
	}
	rep := api.HoldReply{HeldHold: api.HeldHold{Hold: h, DLQIDs: []string{}}}
	for _, ref := range s.index.heldChains(h.ID) {
		if err := s.appendHold(ctx, h, record.KindHoldLifted, ref.domain, ref.dlqID); err != nil {
			s.log.Error("legal hold lift not appended; retried", "hold_id", h.ID, "dlq_id", ref.dlqID, "err", err)
			rep.Failed = append(rep.Failed, ref.dlqID)
			s.holds.Add(legalhold.Work{Kind: legalhold.Lift, HoldID: h.ID, DLQID: ref.dlqID, Domain: ref.domain})
			continue
		}
		rep.DLQIDs = append(rep.DLQIDs, ref.dlqID)
	}
	return rep, nil
}

// heldHold is h with the chains that carry it now.
func (s *Service) heldHold(h api.Hold) api.HeldHold {
	out := api.HeldHold{Hold: h, DLQIDs: []string{}, Pending: s.holds.Pending(h.ID)}
	for _, ref := range s.index.heldChains(h.ID) {
		out.DLQIDs = append(out.DLQIDs, ref.dlqID)
	}
	out.Count, out.PendingCount = len(out.DLQIDs), len(out.Pending)
	return out
}

// listedHold is h as hold.list shows it: its counts and at most
// api.MaxListedHoldIDs of its ids.
func (s *Service) listedHold(h api.Hold) api.HeldHold {
	out := s.heldHold(h)
	if len(out.DLQIDs) > api.MaxListedHoldIDs || len(out.Pending) > api.MaxListedHoldIDs {
		out.Truncated = true
		out.DLQIDs = out.DLQIDs[:min(len(out.DLQIDs), api.MaxListedHoldIDs)]
		out.Pending = out.Pending[:min(len(out.Pending), api.MaxListedHoldIDs)]
	}
	return out
}

// HoldGet returns a hold and the chains it holds (hold.get).
func (s *Service) HoldGet(ctx context.Context, req api.HoldGetRequest) (api.HoldReply, error) {
	h, err := s.holds.Store().Get(ctx, req.ID)
	if err != nil {
		return api.HoldReply{}, holdErr(err)
	}
	return api.HoldReply{HeldHold: s.heldHold(h)}, nil
}

// HoldList lists the holds, newest first, each with how many chains it
// holds and the first api.MaxListedHoldIDs of them (hold.list).
func (s *Service) HoldList(ctx context.Context, req api.HoldListRequest) (api.HoldListReply, error) {
	all, err := s.holds.Store().All(ctx)
	if err != nil {
		return api.HoldListReply{}, holdErr(err)
	}
	rep := api.HoldListReply{Holds: []api.HeldHold{}}
	for _, h := range all {
		if h.Status == api.HoldActive || req.IncludeLifted {
			rep.Holds = append(rep.Holds, s.listedHold(h))
		}
	}
	return rep, nil
}

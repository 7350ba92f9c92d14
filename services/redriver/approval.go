package redriver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/redriver/approved"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/failpoint"
	"github.com/deadletter/deadletter/shared/notify"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Two-person approval (issue #18, package approval): a correction, a
// release or a drain the policy names is not executed when asked for: it
// becomes a pending approval (the request answered APPROVAL_REQUIRED with
// it). When someone else with the approver role signs it (approval.approve,
// re-authenticating), the redriver appends the approved record (the
// electronic signature) to the event's chain at the index the chain had
// when the action was asked for, then executes the request as its
// requester, then marks the approval executed. An approval signed but not
// executed (a crash in between) is executed at start-up, and later by the
// periodic sweep; the expected indexes make a repeat a no-op.

// approveTimeout bounds approval.approve: the re-authentication, the
// signature, and the execution of a correction (its replay's wait).
const approveTimeout = time.Minute

// accessTimeout bounds the access audit's write.
const accessTimeout = 5 * time.Second

// openApprovals binds the approval policy and the APPROVALS store.
func (s *Service) openApprovals(ctx context.Context) error {
	s.policy = approval.NewPolicyStore(s.js, s.cfg.Now)
	if s.ephemeralKey {
		s.log.Warn("APPROVAL_KEY_EPHEMERAL: no approval seed configured (DEADLETTER_APPROVAL_SEED_FILE): approvals signed here verify only here",
			"key", s.signer.PublicKey())
	}
	st, err := approval.Open(ctx, s.js, approval.Config{Reauth: approved.Reauth(s.nc, s.cfg.ReauthURLs, s.cfg.ReauthOptions), Signer: s.signer, Verifier: s.signer.Verifier(),
		Limits: approval.Limits{PerRequester: s.cfg.MaxPendingPerRequester, PerChain: s.cfg.MaxPendingPerChain}, Logger: s.log, Now: s.cfg.Now})
	if err != nil {
		return err
	}
	s.approvals = st
	return nil
}

// asker is the person asking for an action that may need approval, with
// the request as received (kept byte for byte to execute once approved).
// A nil *asker is the execution of a signed approval.
type asker struct {
	who  access.Identity
	body []byte
}

// askerOf returns the asker of a request served as who.
func askerOf(who access.Identity, m endpoint.Meta) *asker { return &asker{who: who, body: m.Body} }

// requireApproval decides whether action, asked for by who, needs a second
// person under the policy in force. It returns nil when it does not, else
// an APPROVAL_REQUIRED *api.Error carrying the pending approval it created
// from req (without values). It fails closed: an unreadable policy refuses
// the action (UNAVAILABLE).
func (s *Service) requireApproval(ctx context.Context, who access.Identity, action approval.Action, req approval.Request) error {
	p, err := s.policy.Get(ctx)
	if err != nil {
		return approval.APIError(err)
	}
	d, err := approval.Needs(p.Policy, action)
	if err != nil {
		return approval.APIError(err)
	}
	if !d.Needed {
		return nil
	}
	req.Action, req.Requester, req.Decision = action.Kind, who, d
	a, err := s.approvals.Create(ctx, req, p.Policy)
	if err != nil && a.ID == "" {
		return approval.APIError(err)
	}
	if err != nil {
		return approval.APIError(err)
	}
	s.log.Info("APPROVAL_REQUIRED", "approval_id", a.ID, "action", a.Action, "dlq_id", a.DLQID, "actor", who.User)
	ev := notify.Event{ID: "approval_pending." + a.ID, Kind: notify.KindApprovalPending, ApprovalID: a.ID, Reason: a.Action,
		DLQID: a.DLQID, Domain: a.Domain}
	if action.Kind == api.ActionDrain {
		ev.Counts = map[string]int{"selected": action.Selected}
	}
	s.alerts.Publish(ev)
	v := approved.WithoutValues(a)
	return &api.Error{Code: api.ErrApprovalRequired, Approval: &v,
		Message: "the action needs a second person's approval: pending approval " + a.ID + " (" + strings.Join(d.Reasons, "; ") + ")"}
}

// handleApprovalList lists approvals, without values (approval.get shows
// them, recorded in the access audit).
func (s *Service) handleApprovalList(ctx context.Context, m endpoint.Meta, req api.ApprovalListRequest) (api.ApprovalListReply, error) {
	if _, err := s.caller(m, ""); err != nil {
		return api.ApprovalListReply{}, err
	}
	rep, err := s.approvals.List(ctx, req.Status, req.Limit)
	if err != nil {
		return api.ApprovalListReply{}, approval.APIError(err)
	}
	for i, a := range rep.Approvals {
		rep.Approvals[i] = approved.WithoutValues(a)
	}
	return rep, nil
}

// handleApprovalGet shows an approval as the caller's role may see it. When
// that shows values (the corrected payload, the identity diff: the
// approver's review), the read is first recorded in the access audit and
// acknowledged; without that record nothing is shown (UNAVAILABLE).
func (s *Service) handleApprovalGet(ctx context.Context, m endpoint.Meta, req api.ApprovalGetRequest) (api.ApprovalReply, error) {
	who, err := s.caller(m, "")
	if err != nil {
		return api.ApprovalReply{}, err
	}
	a, err := s.approvals.Get(ctx, req.ID)
	if err != nil {
		return api.ApprovalReply{}, approval.APIError(err)
	}
	v := approval.Redact(a, who.Role)
	if len(v.Request) > 0 || len(v.Payload) > 0 || len(v.Diff) > 0 {
		if err := s.recordReview(ctx, who, v); err != nil {
			return api.ApprovalReply{}, err
		}
	}
	return api.ApprovalReply{Approval: v}, nil
}

// recordReview writes the access record of who reading approval a's values
// to AUDIT (subjects.AuditAccess) and waits for its acknowledgement.
func (s *Service) recordReview(ctx context.Context, who access.Identity, a api.Approval) error {
	var ids []string
	if a.DLQID != "" {
		ids = []string{a.DLQID}
	}
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(id + "\n"))
	}
	rec := api.AccessRecord{User: who.User, Role: string(who.Role), At: s.now().UTC(), Action: api.AccessReview,
		DLQIDs: ids, Count: len(ids), IDsHash: hex.EncodeToString(h.Sum(nil)), Reason: a.ID + " review"}
	b, err := json.Marshal(rec)
	if err != nil {
		return api.Wrap(api.ErrInternal, err, "the access record could not be encoded")
	}
	ctx, cancel := context.WithTimeout(ctx, accessTimeout)
	defer cancel()
	m := nats.NewMsg(subjects.AuditAccess(who.User))
	m.Data = b
	if _, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectStream(subjects.AuditStream)); err != nil {
		s.log.Error("AUDIT_ACCESS_NOT_RECORDED", "user", who.User, "role", string(who.Role), "approval_id", a.ID, "err", err)
		return api.Wrap(api.ErrUnavailable, err, "the review could not be recorded in the access audit: refused; retry")
	}
	return nil
}

// now is the clock of approvals.
func (s *Service) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

// handleApprovalReject refuses a pending approval (approver role).
func (s *Service) handleApprovalReject(ctx context.Context, m endpoint.Meta, req api.ApprovalDecisionRequest) (api.ApprovalReply, error) {
	who, err := s.caller(m, "")
	if err != nil {
		return api.ApprovalReply{}, err
	}
	if req.Password != "" {
		return api.ApprovalReply{}, api.BadField("password", "is for approval.approve only")
	}
	a, err := s.approvals.Reject(ctx, req.ID, who, req.Meaning)
	if err != nil && a.ID == "" {
		return api.ApprovalReply{}, approval.APIError(err)
	}
	if err != nil {
		s.log.Warn("approval rejection not audited", "approval_id", a.ID, "err", err)
	}
	return api.ApprovalReply{Approval: approved.WithoutValues(a)}, nil
}

// handleApprovalApprove signs a pending approval (approver role, not the
// requester, re-authenticating) and executes its action. Only the request
// whose signature the store accepted executes it.
func (s *Service) handleApprovalApprove(ctx context.Context, m endpoint.Meta, req api.ApprovalDecisionRequest) (api.ApprovalReply, error) {
	who, err := s.caller(m, "")
	if err != nil {
		return api.ApprovalReply{}, err
	}
	a, err := s.approvals.Approve(ctx, req.ID, who, req.Meaning, req.Password)
	if err != nil && a.Status != api.ApprovalApproved {
		return api.ApprovalReply{}, approval.APIError(err)
	}
	if err != nil {
		// Signed, its AUDIT action not written: the execution writes it
		// again (de-duplicated).
		s.log.Warn("approval signature not audited", "approval_id", a.ID, "err", err)
	}
	done, err := s.executeApproval(ctx, a)
	return api.ApprovalReply{Approval: approved.WithoutValues(done)}, err
}

// sweepApprovals recovers, in the background, the approvals signed at
// least minAge ago and not executed; one sweep at a time.
func (s *Service) sweepApprovals(minAge time.Duration) {
	if !s.sweeping.CompareAndSwap(false, true) {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.sweeping.Store(false)
		ctx, cancel := context.WithTimeout(s.runCtx, 5*time.Minute)
		defer cancel()
		s.recoverApprovals(ctx, minAge)
	}()
}

// recoverApprovals refuses the approvals stored as approved without a
// valid proof (whatever their age), then executes the approvals signed but
// not executed (signed at least minAge ago: an approve request in flight
// executes its own).
func (s *Service) recoverApprovals(ctx context.Context, minAge time.Duration) {
	forged, err := s.approvals.Unproven(ctx)
	if err != nil {
		s.log.Warn("approvals not checked", "err", err)
		return
	}
	for _, a := range forged {
		s.refuse(ctx, a, errors.New(a.Refused))
	}
	rep, err := s.approvals.List(ctx, api.ApprovalApproved, 0)
	if err != nil {
		s.log.Warn("approvals not listed", "err", err)
		return
	}
	for _, a := range rep.Approvals {
		if a.DecidedAt == nil || s.now().Sub(*a.DecidedAt) < minAge {
			continue
		}
		s.log.Info("APPROVAL_RECOVERED", "approval_id", a.ID, "action", a.Action, "dlq_id", a.DLQID)
		if _, err := s.executeApproval(ctx, a); err != nil {
			s.log.Warn("approval not executed", "approval_id", a.ID, "code", api.CodeOf(err))
		}
	}
}

// errChainMoved: the chain changed between the request and the signature
// (approved.ErrChainMoved).
var errChainMoved = approved.ErrChainMoved

// executeApproval executes signed approval a: its approved record, its
// action as its requester, and its outcome in APPROVALS. An action that
// could not be tried (UNAVAILABLE) leaves the approval approved, to be
// executed again (so does TOO_MANY_DRAINS); any other outcome, a failure included (a chain that
// moved on: CONFLICT), is recorded and final.
func (s *Service) executeApproval(ctx context.Context, a api.Approval) (api.Approval, error) {
	if err := s.prove(ctx, a); err != nil {
		return a, err
	}
	outcome, err := s.runApproved(ctx, a)
	code := outcome
	if err != nil {
		code = api.CodeOf(err)
		if code == "" {
			code = api.ErrUnavailable
		}
		if code == api.ErrUnavailable || code == api.ErrTooManyDrains {
			return a, err // tried again by the sweep
		}
	}
	done, merr := s.approvals.MarkExecuted(ctx, a.ID, code)
	switch {
	case errors.Is(merr, approval.ErrAlreadyDecided):
		// Another instance (or a recovery) executed it first.
		if cur, gerr := s.approvals.Get(ctx, a.ID); gerr == nil {
			done = cur
		}
	case merr != nil:
		s.log.Warn("approval outcome not recorded", "approval_id", a.ID, "err", merr)
		return a, errors.Join(err, approval.APIError(merr))
	}
	s.log.Info("APPROVAL_EXECUTED", "approval_id", a.ID, "action", a.Action, "dlq_id", a.DLQID, "outcome", code)
	return done, err
}

// prove checks, before anything of approval a is executed, that its
// proof verifies against this service's key and that AUDIT holds its
// request and its decision (written now if missing: the decision's own
// record, idempotent). An approval without a valid proof is refused
// (refuse) and never executed: APPROVAL_UNPROVEN. An AUDIT that cannot
// be written or read leaves it approved, for the sweep: UNAVAILABLE.
func (s *Service) prove(ctx context.Context, a api.Approval) error {
	if err := s.signer.Verifier().Verify(a); err != nil {
		s.refuse(ctx, a, err)
		return approval.APIError(err)
	}
	if err := s.approvals.Audit(ctx, a, approval.AuditApproved); err != nil {
		s.log.Warn("approval signature not audited; not executed", "approval_id", a.ID, "err", err)
		return approval.APIError(err)
	}
	if err := s.approvals.Proven(ctx, a); err != nil {
		if errors.Is(err, approval.ErrUnproven) {
			s.refuse(ctx, a, err)
		}
		return approval.APIError(err)
	}
	return nil
}

// refuse records that stored approval a has no valid proof (why): its
// entry becomes refused, AUDIT gets the refusal, the metric counts it and
// the log says so (ids only). It is never executed.
func (s *Service) refuse(ctx context.Context, a api.Approval, why error) {
	if _, err := s.approvals.Refuse(ctx, a, why.Error()); err != nil {
		s.log.Error("APPROVAL_REFUSED not recorded; retried by the sweep", "approval_id", a.ID, "err", err)
		return
	}
	s.metrics.approvalsRefused.Inc()
	s.log.Error("APPROVAL_REFUSED", "approval_id", a.ID, "action", a.Action, "dlq_id", a.DLQID, "status", a.Status,
		"decider", a.Decider, "code", api.ErrApprovalUnproven)
}

// handleApprovalHoldLift stores the pending approval of a hold lift for
// the auditor (the approval owner alone writes APPROVALS): only a request
// from within the services' account, where only the auditor may publish
// the subject, is served; one that carries a person is refused. It
// answers APPROVAL_REQUIRED with the pending approval, or an empty
// approval when the policy in force lets the lift go at once.
func (s *Service) handleApprovalHoldLift(ctx context.Context, m endpoint.Meta, req api.ApprovalHoldLiftRequest) (api.ApprovalReply, error) {
	if who, err := m.Caller(); err == nil {
		return api.ApprovalReply{}, api.Errorf(CodeForbidden, "%s may not store approvals: the auditor asks for a hold lift's", who.User)
	}
	role := access.Role(req.RequesterRole)
	switch {
	case req.Requester == "" || !slices.Contains(access.Roles, role):
		return api.ApprovalReply{}, api.BadField("requester", "names no person and role")
	case !api.ValidHoldID(req.HoldID):
		return api.ApprovalReply{}, api.BadField("hold_id", "is not a hold id")
	case len(req.Request) == 0 || !json.Valid(req.Request):
		return api.ApprovalReply{}, api.BadField("request", "must be a JSON value")
	}
	who := access.Identity{User: req.Requester, Role: role}
	err := s.requireApproval(ctx, who, approval.Action{Kind: api.ActionHoldLift},
		approval.Request{HoldID: req.HoldID, Body: req.Request, Reason: req.Reason})
	return api.ApprovalReply{}, err
}

// runApproved executes a's action: for an event, its approved record at
// a.ChainRecords, then the request as a.Requester. It returns the outcome
// (an api outcome, "released", or the drain id).
func (s *Service) runApproved(ctx context.Context, a api.Approval) (string, error) {
	sig, err := approval.Signature(a)
	if err != nil {
		return "", approval.APIError(err)
	}
	if a.Action == api.ActionDrain {
		var req api.DrainStartRequest
		if err := endpoint.Decode(a.Request, &req); err != nil {
			return "", err
		}
		req.Actor = a.Requester
		s.startMu.Lock()
		defer s.startMu.Unlock()
		if err := s.refuseOverlap(ctx, req, approved.DrainID(a.ID)); err != nil {
			return "", err
		}
		id, err := s.launchDrain(ctx, req, access.Identity{User: a.Requester, Role: access.Role(a.RequesterRole)}, approved.DrainID(a.ID))
		return id, err
	}
	if a.Action == api.ActionHoldLift {
		return s.liftApproved(ctx, a)
	}
	exp := a.ChainRecords
	_, err = s.chains.append(ctx, api.AppendRequest{
		DLQID: a.DLQID, Domain: a.Domain, Kind: record.KindApproved, ExpectedIndex: &exp,
		Actor: sig.Approver, Reason: sig.Meaning, Signature: &sig,
	})
	switch code := codeOf(err); {
	case code == api.ErrConflict:
		return "", api.Wrap(api.ErrConflict, errChainMoved, errChainMoved.Error()+": not executed")
	case err != nil:
		return "", api.Wrap(code, err, err.Error())
	}
	s.cfg.Failpoint.Hit(failpoint.RedriverAfterApproved, a.DLQID)
	switch a.Action {
	case api.ActionCorrect:
		var req api.RedriveRequest
		if err := endpoint.Decode(a.Request, &req); err != nil {
			return "", err
		}
		req.Actor = a.Requester
		if len(a.Payload) > 0 {
			req.Payload = a.Payload // byte for byte (Request is compacted)
		}
		rep, err := s.redrive(ctx, req, nil, &a)
		return rep.Outcome, err
	case api.ActionRelease:
		var req api.ReleaseRequest
		if err := endpoint.Decode(a.Request, &req); err != nil {
			return "", err
		}
		req.Actor = a.Requester
		if _, err := s.release(ctx, req, nil, &a); err != nil {
			return "", err
		}
		return "released", nil
	case api.ActionDismiss:
		var req api.DismissRequest
		if err := endpoint.Decode(a.Request, &req); err != nil {
			return "", err
		}
		req.Actor = a.Requester
		if _, err := s.dismiss(ctx, req, nil, &a); err != nil {
			return "", err
		}
		return "dismissed", nil
	}
	return "", api.Errorf(api.ErrBadRequest, "approval %s: no action %s", a.ID, a.Action)
}

// liftOutcome is the outcome of an executed hold lift.
const liftOutcome = "lifted"

// liftApproved executes signed hold-lift approval a: the auditor serves
// legal holds, so it is asked to lift (api.HoldLiftApproved, with the
// approval's id alone: the auditor reads the approval from APPROVALS and
// lifts only when it is approved, for its hold, as its requester). No
// approved record is sealed into the held chains: a hold may hold many
// chains, each would need its own conditional append, and the lift's own
// hold_lifted records (naming the requester) follow in each of them; the
// signature is the approval's AUDIT action, and the hold keeps the
// approval's id and signer (api.Hold.LiftApprovalID, LiftApprovedBy).
func (s *Service) liftApproved(ctx context.Context, a api.Approval) (string, error) {
	if _, err := endpoint.Call[api.HoldLiftApprovedRequest, api.HoldReply](ctx, s.nc, api.HoldLiftApproved,
		api.HoldLiftApprovedRequest{ApprovalID: a.ID}); err != nil {
		return "", err
	}
	return liftOutcome, nil
}

// policyGetRequest is policy.get's request: none (an empty body or {}).
type policyGetRequest struct{}

// handlePolicyGet answers the approval policy in force.
func (s *Service) handlePolicyGet(ctx context.Context, m endpoint.Meta, _ policyGetRequest) (api.PolicyReply, error) {
	if _, err := s.caller(m, ""); err != nil {
		return api.PolicyReply{}, err
	}
	rep, err := s.policy.Get(ctx)
	return rep, approval.APIError(err)
}

// handlePolicySet replaces the approval policy (policy role), recorded in
// AUDIT.
func (s *Service) handlePolicySet(ctx context.Context, m endpoint.Meta, req api.PolicySetRequest) (api.PolicyReply, error) {
	who, err := s.caller(m, "")
	if err != nil {
		return api.PolicyReply{}, err
	}
	rep, err := s.policy.Set(ctx, who, req)
	if err != nil {
		return api.PolicyReply{}, approval.APIError(err)
	}
	s.log.Info("APPROVAL_POLICY_SET", "actor", who.User, "revision", rep.Revision)
	return rep, nil
}

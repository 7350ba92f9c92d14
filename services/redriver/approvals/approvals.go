// Package approvals is the redriver's part for two-person approval and
// its policy (issue #18, package approval): a correction, a release, a
// dismissal or a drain the policy names is not executed when asked for:
// it becomes a pending approval (the request answered APPROVAL_REQUIRED
// with it). When someone else with the approver role signs it
// (approval.approve, with their signed decision), the Desk appends the approved
// record (the electronic signature, with the approver's decision signed
// by their own key, issue #38) to the event's chain at the index the
// chain had when the action was asked for, then has the action executed
// as its requester (an Executor: the single redrives' and drains' parts),
// then marks the approval executed. An approval signed but not executed
// (a crash in between) is executed at start-up, and later by the periodic
// sweep; the expected indexes make a repeat a no-op.
//
// The Desk checks no caller: the redriver's handlers do, and pass the
// identity they serve the request as.
package approvals

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/deadletter/deadletter/services/redriver/approved"
	"github.com/deadletter/deadletter/services/redriver/chainio"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/failpoint"
	"github.com/deadletter/deadletter/shared/notify"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// ApproveTimeout bounds approval.approve: the signature's check, and the
// execution of a correction (its replay's wait).
const ApproveTimeout = time.Minute

// accessTimeout bounds the access audit's write.
const accessTimeout = 5 * time.Second

// LiftOutcome is the outcome of an executed hold lift.
const LiftOutcome = "lifted"

// ErrChainMoved: the chain changed between the request and the signature
// (approved.ErrChainMoved).
var ErrChainMoved = approved.ErrChainMoved

// Executor executes the action of a signed approval as its requester:
// the part that owns the action does it, after the approved record.
type Executor interface {
	// Redrive executes an approved correction (req.Actor the requester).
	Redrive(ctx context.Context, req api.RedriveRequest, a *api.Approval) (api.RedriveReply, error)
	// Release executes an approved release.
	Release(ctx context.Context, req api.ReleaseRequest, a *api.Approval) (api.AppendReply, error)
	// Dismiss executes an approved dismissal.
	Dismiss(ctx context.Context, req api.DismissRequest, a *api.Approval) (api.AppendReply, error)
	// StartDrain starts an approved drain as drainID, started by who
	// (once: a drain already stored under drainID is not started again).
	StartDrain(ctx context.Context, req api.DrainStartRequest, who access.Identity, drainID string) (string, error)
}

// Desk is two-person approval and its policy: it decides whether an
// action needs a second person, stores the pending approvals, signs and
// executes the approved ones, and serves the approval and policy
// endpoints' work. Its exported fields are set before Open.
type Desk struct {
	// JS reaches APPROVALS, the policy and AUDIT; NC asks the auditor to
	// lift a hold.
	JS jetstream.JetStream
	NC *nats.Conn
	// Log logs ids and codes only.
	Log *slog.Logger
	// Now is the clock of approvals (nil: time.Now).
	Now func() time.Time
	// Decisions checks the approvers' signed decisions against the
	// people registry (issue #38): no key of this service signs one.
	Decisions approval.Checker
	// Limits bound the pending approvals.
	Limits approval.Limits
	// Chains appends the approved records.
	Chains chainio.Appender
	// Failpoint is the test hook (nil in production).
	Failpoint *failpoint.Armed
	// Refused counts the approvals refused for want of a valid proof.
	Refused prometheus.Counter
	// Alert publishes a notification (a pending approval).
	Alert func(notify.Event)
	// Exec executes the approved actions.
	Exec Executor

	policy *approval.PolicyStore
	store  *approval.Store
	// sweeping is set while signed approvals are being recovered.
	sweeping atomic.Bool
}

// Open binds the approval policy and the APPROVALS store.
func (d *Desk) Open(ctx context.Context) error {
	d.policy = approval.NewPolicyStore(d.JS, d.Now)
	st, err := approval.Open(ctx, d.JS, approval.Config{Checker: d.Decisions, Limits: d.Limits, Logger: d.Log, Now: d.Now})
	if err != nil {
		return err
	}
	d.store = st
	return nil
}

// now is the clock of approvals.
func (d *Desk) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// Policy returns the approval policy in force.
func (d *Desk) Policy(ctx context.Context) (api.PolicyReply, error) {
	rep, err := d.policy.Get(ctx)
	return rep, approval.APIError(err)
}

// Require decides whether action, asked for by who, needs a second
// person under the policy in force. It returns nil when it does not, else
// an APPROVAL_REQUIRED *api.Error carrying the pending approval it created
// from req (without values). A correction of a record with another
// pending correction is refused first (CORRECTION_PENDING, the pending
// one in the reply's Approval). It fails closed: an unreadable policy or
// APPROVALS refuses the action (UNAVAILABLE).
func (d *Desk) Require(ctx context.Context, who access.Identity, action approval.Action, req approval.Request) error {
	if action.Kind == api.ActionCorrect {
		// One open correction per record, whether this one needs a
		// second person or not: CORRECTION_PENDING names the pending one.
		req.Requester = who
		if err := d.store.PendingCorrection(ctx, req); err != nil {
			return approval.APIError(err)
		}
	}
	p, err := d.policy.Get(ctx)
	if err != nil {
		return approval.APIError(err)
	}
	dec, err := approval.Needs(p.Policy, action)
	if err != nil {
		return approval.APIError(err)
	}
	if !dec.Needed {
		return nil
	}
	req.Action, req.Requester, req.Decision = action.Kind, who, dec
	a, err := d.store.Create(ctx, req, p.Policy)
	if err != nil {
		return approval.APIError(err)
	}
	d.Log.Info("APPROVAL_REQUIRED", "approval_id", a.ID, "action", a.Action, "dlq_id", a.DLQID, "actor", who.User)
	ev := notify.Event{ID: "approval_pending." + a.ID, Kind: notify.KindApprovalPending, ApprovalID: a.ID, Reason: a.Action,
		DLQID: a.DLQID, Domain: a.Domain}
	if action.Kind == api.ActionDrain {
		ev.Counts = map[string]int{"selected": action.Selected}
	}
	d.Alert(ev)
	v := approved.WithoutValues(a)
	return &api.Error{Code: api.ErrApprovalRequired, Approval: &v,
		Message: "the action needs a second person's approval: pending approval " + a.ID + " (" + strings.Join(dec.Reasons, "; ") + ")"}
}

// List lists approvals, without values (Get shows them, recorded in the
// access audit).
func (d *Desk) List(ctx context.Context, req api.ApprovalListRequest) (api.ApprovalListReply, error) {
	rep, err := d.store.List(ctx, req.Status, req.Limit)
	if err != nil {
		return api.ApprovalListReply{}, approval.APIError(err)
	}
	for i, a := range rep.Approvals {
		rep.Approvals[i] = approved.WithoutValues(a)
	}
	return rep, nil
}

// Get shows an approval as who's role may see it. When that shows values
// (the corrected payload, the identity diff: the approver's review), the
// read is first recorded in the access audit and acknowledged; without
// that record nothing is shown (UNAVAILABLE).
func (d *Desk) Get(ctx context.Context, who access.Identity, req api.ApprovalGetRequest) (api.ApprovalReply, error) {
	a, err := d.store.Get(ctx, req.ID)
	if err != nil {
		return api.ApprovalReply{}, approval.APIError(err)
	}
	v := approval.Redact(a, who.Role)
	if len(v.Request) > 0 || len(v.Payload) > 0 || len(v.Diff) > 0 {
		if err := d.recordReview(ctx, who, v); err != nil {
			return api.ApprovalReply{}, err
		}
	}
	return api.ApprovalReply{Approval: v}, nil
}

// recordReview writes the access record of who reading approval a's values
// to AUDIT (subjects.AuditAccess) and waits for its acknowledgement.
func (d *Desk) recordReview(ctx context.Context, who access.Identity, a api.Approval) error {
	var ids []string
	if a.DLQID != "" {
		ids = []string{a.DLQID}
	}
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(id + "\n"))
	}
	rec := api.AccessRecord{User: who.User, Role: string(who.Role), At: d.now().UTC(), Action: api.AccessReview,
		DLQIDs: ids, Count: len(ids), IDsHash: hex.EncodeToString(h.Sum(nil)), Reason: a.ID + " review"}
	b, err := json.Marshal(rec)
	if err != nil {
		return api.Wrap(api.ErrInternal, err, "the access record could not be encoded")
	}
	ctx, cancel := context.WithTimeout(ctx, accessTimeout)
	defer cancel()
	m := nats.NewMsg(subjects.AuditAccess(who.User))
	m.Data = b
	if _, err := d.JS.PublishMsg(ctx, m, jetstream.WithExpectStream(subjects.AuditStream)); err != nil {
		d.Log.Error("AUDIT_ACCESS_NOT_RECORDED", "user", who.User, "role", string(who.Role), "approval_id", a.ID, "err", err)
		return api.Wrap(api.ErrUnavailable, err, "the review could not be recorded in the access audit: refused; retry")
	}
	return nil
}

// Reject refuses a pending approval as who (approver role), with who's
// signed decision (req.Signed).
func (d *Desk) Reject(ctx context.Context, who access.Identity, req api.ApprovalDecisionRequest) (api.ApprovalReply, error) {
	if err := meaningOf(req); err != nil {
		return api.ApprovalReply{}, err
	}
	a, err := d.store.Reject(ctx, req.ID, who, req.Signed)
	if err != nil && a.ID == "" {
		return api.ApprovalReply{}, approval.APIError(err)
	}
	if err != nil {
		d.Log.Warn("approval rejection not audited", "approval_id", a.ID, "err", err)
	}
	return api.ApprovalReply{Approval: approved.WithoutValues(a)}, nil
}

// Approve approves a pending approval as who (approver role, not the
// requester's person) with who's signed decision (req.Signed) and
// executes its action. Only the request whose decision the store
// accepted executes it.
func (d *Desk) Approve(ctx context.Context, who access.Identity, req api.ApprovalDecisionRequest) (api.ApprovalReply, error) {
	if err := meaningOf(req); err != nil {
		return api.ApprovalReply{}, err
	}
	a, err := d.store.Approve(ctx, req.ID, who, req.Signed)
	if err != nil && a.Status != api.ApprovalApproved {
		return api.ApprovalReply{}, approval.APIError(err)
	}
	if err != nil {
		// Signed, its AUDIT action not written: the execution writes it
		// again (de-duplicated).
		d.Log.Warn("approval signature not audited", "approval_id", a.ID, "err", err)
	}
	done, err := d.execute(ctx, a)
	return api.ApprovalReply{Approval: approved.WithoutValues(done)}, err
}

// meaningOf requires a decision's meaning, the one its person signed.
func meaningOf(req api.ApprovalDecisionRequest) error {
	switch {
	case strings.TrimSpace(req.Meaning) == "":
		return api.BadField("meaning", "is required: what the signature means, or why the request is rejected")
	case req.Signed != nil && req.Signed.Decision.Meaning != req.Meaning:
		return api.BadField("meaning", "is not the meaning the decision signs")
	}
	return nil
}

// Sweep recovers, in the background (counted in wg, under ctx), the
// approvals signed at least minAge ago and not executed; one sweep at a
// time.
func (d *Desk) Sweep(ctx context.Context, wg *sync.WaitGroup, minAge time.Duration) {
	if !d.sweeping.CompareAndSwap(false, true) {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer d.sweeping.Store(false)
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		d.recover(ctx, minAge)
	}()
}

// recover refuses the approvals stored as approved without a decision
// signed by their person that checks (whatever their age), then executes the approvals signed but not
// executed (signed at least minAge ago: an approve request in flight
// executes its own).
func (d *Desk) recover(ctx context.Context, minAge time.Duration) {
	forged, err := d.store.Unproven(ctx)
	if err != nil {
		d.Log.Warn("approvals not checked", "err", err)
		return
	}
	for _, a := range forged {
		d.refuse(ctx, a, errors.New(a.Refused))
	}
	rep, err := d.store.List(ctx, api.ApprovalApproved, 0)
	if err != nil {
		d.Log.Warn("approvals not listed", "err", err)
		return
	}
	for _, a := range rep.Approvals {
		if a.DecidedAt == nil || d.now().Sub(*a.DecidedAt) < minAge {
			continue
		}
		d.Log.Info("APPROVAL_RECOVERED", "approval_id", a.ID, "action", a.Action, "dlq_id", a.DLQID)
		if _, err := d.execute(ctx, a); err != nil {
			d.Log.Warn("approval not executed", "approval_id", a.ID, "code", api.CodeOf(err))
		}
	}
}

// execute executes signed approval a: its approved record, its action as
// its requester, and its outcome in APPROVALS. An action that could not
// be tried (UNAVAILABLE) leaves the approval approved, to be executed
// again (so does TOO_MANY_DRAINS); an event's chain that moved on since
// the request refuses it as stale (stale), never executed; any other
// outcome, a failure included, is recorded and final.
func (d *Desk) execute(ctx context.Context, a api.Approval) (api.Approval, error) {
	if err := d.prove(ctx, a); err != nil {
		return a, err
	}
	outcome, err := d.run(ctx, a)
	if errors.Is(err, ErrChainMoved) {
		// Refused before anything of it was executed: the approved
		// record's conditional append found the chain moved on.
		return d.stale(ctx, a, err)
	}
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
	done, merr := d.store.MarkExecuted(ctx, a.ID, code)
	switch {
	case errors.Is(merr, approval.ErrAlreadyDecided):
		// Another instance (or a recovery) executed it first.
		done = d.decidedFirst(ctx, a.ID, done)
	case merr != nil:
		d.Log.Warn("approval outcome not recorded", "approval_id", a.ID, "err", merr)
		return a, errors.Join(err, approval.APIError(merr))
	}
	d.Log.Info("APPROVAL_EXECUTED", "approval_id", a.ID, "action", a.Action, "dlq_id", a.DLQID, "outcome", code)
	return done, err
}

// decidedFirst is approval id as another instance (or a recovery) decided
// it first, or done when the entry cannot be read.
func (d *Desk) decidedFirst(ctx context.Context, id string, done api.Approval) api.Approval {
	if cur, err := d.store.Get(ctx, id); err == nil {
		return cur
	}
	return done
}

// stale refuses signed approval a, whose event's chain moved on since the
// request (moved, wrapping ErrChainMoved): its entry becomes refused with
// the outcome approval.StaleOutcome, AUDIT records the refusal, and the
// caller gets CONFLICT saying so. Nothing of it was executed. A refusal
// not recorded (UNAVAILABLE) leaves it approved, for the sweep, which
// finds the chain moved again.
func (d *Desk) stale(ctx context.Context, a api.Approval, moved error) (api.Approval, error) {
	why := "the record " + a.DLQID + " moved on since the request (it had " + strconv.Itoa(a.ChainRecords) + " records then)"
	done, err := d.store.Stale(ctx, a, why)
	switch {
	case errors.Is(err, approval.ErrAlreadyDecided):
		done = d.decidedFirst(ctx, a.ID, done)
	case err != nil:
		d.Log.Warn("stale approval not recorded; retried by the sweep", "approval_id", a.ID, "err", err)
		return a, errors.Join(moved, approval.APIError(err))
	}
	d.Log.Warn("APPROVAL_STALE", "approval_id", a.ID, "action", a.Action, "dlq_id", a.DLQID, "records_then", a.ChainRecords)
	return done, api.Wrap(api.ErrConflict, moved, "approval "+a.ID+" is stale: "+why+"; refused, never executed: ask again on the record as it is now")
}

// prove checks, before anything of approval a is executed, that it
// carries its approver's signed decision of itself, which the people
// registry accepts, and that AUDIT holds its request and its decision
// (written now if missing: the decision's own record, idempotent). An
// approval without one is refused (refuse) and never executed:
// APPROVAL_UNPROVEN. An AUDIT that cannot be written or read leaves it
// approved, for the sweep: UNAVAILABLE.
func (d *Desk) prove(ctx context.Context, a api.Approval) error {
	if err := d.store.Proven(ctx, a); errors.Is(err, approval.ErrUnproven) {
		// Refused before its decision is audited as if it were one.
		d.refuse(ctx, a, err)
		return approval.APIError(err)
	}
	if err := d.store.Audit(ctx, a, approval.AuditApproved); err != nil {
		d.Log.Warn("approval signature not audited; not executed", "approval_id", a.ID, "err", err)
		return approval.APIError(err)
	}
	if err := d.store.Proven(ctx, a); err != nil {
		if errors.Is(err, approval.ErrUnproven) {
			d.refuse(ctx, a, err)
		}
		return approval.APIError(err)
	}
	return nil
}

// refuse records that stored approval a has no valid signed decision (why): its
// entry becomes refused, AUDIT gets the refusal, the metric counts it and
// the log says so (ids only). It is never executed.
func (d *Desk) refuse(ctx context.Context, a api.Approval, why error) {
	if _, err := d.store.Refuse(ctx, a, why.Error()); err != nil {
		d.Log.Error("APPROVAL_REFUSED not recorded; retried by the sweep", "approval_id", a.ID, "err", err)
		return
	}
	d.Refused.Inc()
	d.Log.Error("APPROVAL_REFUSED", "approval_id", a.ID, "action", a.Action, "dlq_id", a.DLQID, "status", a.Status,
		"decider", a.Decider, "code", api.ErrApprovalUnproven)
}

// HoldLift stores the pending approval of a hold lift for the auditor
// (the approval owner alone writes APPROVALS; the caller, the auditor,
// is checked by the handler). It answers APPROVAL_REQUIRED with the
// pending approval, or an empty approval when the policy in force lets
// the lift go at once.
func (d *Desk) HoldLift(ctx context.Context, req api.ApprovalHoldLiftRequest) (api.ApprovalReply, error) {
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
	err := d.Require(ctx, who, approval.Action{Kind: api.ActionHoldLift},
		approval.Request{HoldID: req.HoldID, Body: req.Request, Reason: req.Reason})
	return api.ApprovalReply{}, err
}

// run executes a's action: for an event, its approved record at
// a.ChainRecords, then the request as a.Requester. It returns the outcome
// (an api outcome, "released", "dismissed", LiftOutcome, or the drain id).
func (d *Desk) run(ctx context.Context, a api.Approval) (string, error) {
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
		return d.Exec.StartDrain(ctx, req, access.Identity{User: a.Requester, Role: access.Role(a.RequesterRole)}, approved.DrainID(a.ID))
	}
	if a.Action == api.ActionHoldLift {
		return d.lift(ctx, a)
	}
	exp := a.ChainRecords
	_, err = d.Chains.Append(ctx, api.AppendRequest{
		DLQID: a.DLQID, Domain: a.Domain, Kind: record.KindApproved, ExpectedIndex: &exp,
		Actor: sig.Approver, Reason: sig.Meaning, Signature: &sig,
	})
	switch code := chainio.CodeOf(err); {
	case code == api.ErrConflict:
		return "", api.Wrap(api.ErrConflict, ErrChainMoved, ErrChainMoved.Error()+": not executed")
	case err != nil:
		return "", api.Wrap(code, err, err.Error())
	}
	d.Failpoint.Hit(failpoint.RedriverAfterApproved, a.DLQID)
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
		rep, err := d.Exec.Redrive(ctx, req, &a)
		return rep.Outcome, err
	case api.ActionRelease:
		var req api.ReleaseRequest
		if err := endpoint.Decode(a.Request, &req); err != nil {
			return "", err
		}
		req.Actor = a.Requester
		if _, err := d.Exec.Release(ctx, req, &a); err != nil {
			return "", err
		}
		return "released", nil
	case api.ActionDismiss:
		var req api.DismissRequest
		if err := endpoint.Decode(a.Request, &req); err != nil {
			return "", err
		}
		req.Actor = a.Requester
		if _, err := d.Exec.Dismiss(ctx, req, &a); err != nil {
			return "", err
		}
		return "dismissed", nil
	}
	return "", api.Errorf(api.ErrBadRequest, "approval %s: no action %s", a.ID, a.Action)
}

// lift executes signed hold-lift approval a: the auditor serves legal
// holds, so it is asked to lift (api.HoldLiftApproved, with the
// approval's id alone: the auditor reads the approval from APPROVALS and
// lifts only when it is approved, for its hold, as its requester). No
// approved record is sealed into the held chains: a hold may hold many
// chains, each would need its own conditional append, and the lift's own
// hold_lifted records (naming the requester) follow in each of them; the
// signature is the approval's AUDIT action, and the hold keeps the
// approval's id and signer (api.Hold.LiftApprovalID, LiftApprovedBy).
func (d *Desk) lift(ctx context.Context, a api.Approval) (string, error) {
	if _, err := endpoint.Call[api.HoldLiftApprovedRequest, api.HoldReply](ctx, d.NC, api.HoldLiftApproved,
		api.HoldLiftApprovedRequest{ApprovalID: a.ID}); err != nil {
		return "", err
	}
	return LiftOutcome, nil
}

// SetPolicy replaces the approval policy as who (policy role), recorded
// in AUDIT.
func (d *Desk) SetPolicy(ctx context.Context, who access.Identity, req api.PolicySetRequest) (api.PolicyReply, error) {
	rep, err := d.policy.Set(ctx, who, req)
	if err != nil {
		return api.PolicyReply{}, approval.APIError(err)
	}
	d.Log.Info("APPROVAL_POLICY_SET", "actor", who.User, "revision", rep.Revision)
	return rep, nil
}

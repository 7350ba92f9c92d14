package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/safetext"
)

// approvalPages is the approvals part: the list, one approval with the
// record it acts on, approve (signing) and reject.
type approvalPages struct {
	web
	// rp is the passkeys' relying party (passkeys.go).
	rp relyingParty
}

// approvalsData is the Approvals page (the inbox): pending approvals first,
// then the decided ones, newest first (approval.list's order), without
// values.
type approvalsData struct {
	Approvals []api.Approval
	Pending   int
	Truncated bool
}

// approvalData is one approval's page: what approval.get shows the
// person's role (the request, the corrected payload and the identity diff
// only to the roles the redriver shows them to, after recording the review
// in the access audit).
type approvalData struct {
	A api.Approval
	// Payload is a correction's corrected payload (indented JSON);
	// Drain the drain's request, when the approval is a drain's.
	Payload string
	Drain   *api.DrainStartRequest
	// Record is the failure context of the record the approval acts on
	// (its class, code, error text and attempts), without payloads.
	Record *record.State
	// Original is the record's payload the correction replaces (indented
	// JSON), read through audit.get as a payload read for this approval
	// (recorded in the access audit with the approval as its reason);
	// Changes the field-level diff from Original to Payload.
	Original string
	Changes  []diffRow
	// ContextErr says why the record's context or original could not be
	// read (the page still shows the approval).
	ContextErr string
	// Meaning and RejectMeaning are the meanings typed, kept after a
	// refusal (REAUTH_FAILED keeps what the person meant; the password is
	// never written back).
	Meaning, RejectMeaning string
	// Own: the person reading asked for the approval (one of their
	// logins did): the page offers no Approve and says why.
	Own bool
	// Moved says, for a pending approval whose record moved on since the
	// request (its chain head is no longer the approval's), how: signed
	// now it is refused as stale, never executed.
	Moved string
	// Signer, SignRequest and SignChain are what a decision on the
	// approval signs besides its meaning and time (sign.go): the person,
	// the approval's request digest and the head of its record's chain.
	Signer, SignRequest, SignChain string
}

// Done reports whether the approval was executed (the page says what it
// did, not what it would do).
func (d *approvalData) Done() bool { return d.A.Status == api.ApprovalExecuted }

// Pending reports whether a can still be decided.
func (d *approvalData) Pending() bool {
	return d.A.Status == api.ApprovalPending && (d.A.ExpiresAt.IsZero() || time.Now().Before(d.A.ExpiresAt))
}

func (p *approvalPages) handleApprovals(w http.ResponseWriter, r *http.Request, s *session) {
	rep, err := call[api.ApprovalListRequest, api.ApprovalListReply](r.Context(), p.rq, s, api.ApprovalList, api.ApprovalListRequest{Status: r.URL.Query().Get("status")})
	d := &approvalsData{Approvals: rep.Approvals, Truncated: rep.Truncated}
	for _, a := range rep.Approvals {
		if a.Status == api.ApprovalPending {
			d.Pending++
		}
	}
	v := newView(s, "Approvals", "approvals", d)
	v.Wide = true
	v.setErr(err)
	p.render(w, r, statusOf(err), "approvals", v)
}

// getApproval reads one approval as the person (approval.get).
func (p *approvalPages) getApproval(r *http.Request, s *session, id string) (*approvalData, error) {
	rep, err := call[api.ApprovalGetRequest, api.ApprovalReply](r.Context(), p.rq, s, api.ApprovalGet, api.ApprovalGetRequest{ID: id})
	d := &approvalData{A: rep.Approval}
	if d.A.ID == "" {
		d.A.ID = id
	}
	if err != nil {
		return d, err
	}
	if len(d.A.Payload) > 0 {
		d.Payload = showPayload(d.A.Payload)
	}
	if d.A.DLQID != "" {
		p.approvalContext(r, s, d)
	}
	d.Own = access.SamePerson(s.user, d.A.Requester)
	d.Signer, d.SignRequest = access.PersonOf(s.user), approval.RequestDigest(d.A)
	d.SignChain = d.A.ChainHead
	if d.A.Action == api.ActionDrain && len(d.A.Request) > 0 {
		var dr api.DrainStartRequest
		if json.Unmarshal(d.A.Request, &dr) == nil {
			d.Drain = &dr
		}
	}
	return d, nil
}

// approvalContext reads the record an approval acts on: its failure
// context, and for a correction shown to the person (the approver, a
// payload reader) the payload it replaces, through audit.get's payload
// read for this approval, so that the access audit records the read with
// the approval as its reason.
func (p *approvalPages) approvalContext(r *http.Request, s *session, d *approvalData) {
	review := d.A.Action == api.ActionCorrect && len(d.A.Payload) > 0
	req := api.GetRequest{DLQID: d.A.DLQID, Domain: d.A.Domain}
	if review {
		req.IncludePayload, req.Reason, req.ApprovalID = true, "review of the correction before signing", d.A.ID
	}
	rep, err := call[api.GetRequest, api.GetReply](r.Context(), p.rq, s, api.AuditGet, req)
	if err != nil {
		d.ContextErr = "The record could not be read: " + api.CodeOf(err) + "."
		p.log.Info("approval context unreadable", "user", s.user, "approval_id", d.A.ID, "dlq_id", d.A.DLQID, "code", api.CodeOf(err))
		return
	}
	st := rep.State
	if d.A.Status == api.ApprovalPending && d.A.ChainHead != "" && st.LastHash != "" && st.LastHash != d.A.ChainHead {
		d.Moved = "it had " + nRecords(d.A.ChainRecords) + " then, " + nRecords(len(rep.Records)) + " now"
	}
	if orig := payloadAsRequested(rep, d.A.ChainRecords); review && orig != nil {
		if b, perr := orig.Bytes(); perr == nil {
			d.Original = showPayload(b)
			d.Changes = jsonDiff(b, d.A.Payload)
		}
	}
	st.Payload, st.OriginalPayload = nil, nil
	d.Record = &st
}

// payloadAsRequested is the payload the correction replaces: the chain's
// as it stood when the correction was asked for (its first chainRecords
// records), not as it stands now, which after the correction executed is
// the corrected payload itself. A chain that cannot be folded there
// gives the current state's.
func payloadAsRequested(rep api.GetReply, chainRecords int) *record.Payload {
	if chainRecords <= 0 || chainRecords > len(rep.Records) {
		return rep.State.Payload
	}
	chain := make([]record.Record, 0, chainRecords)
	for _, cr := range rep.Records[:chainRecords] {
		var r record.Record
		if json.Unmarshal(cr.Record, &r) != nil {
			return rep.State.Payload
		}
		chain = append(chain, r)
	}
	st, err := record.Fold(chain)
	if err != nil {
		return rep.State.Payload
	}
	return st.Payload
}

func (p *approvalPages) renderApproval(w http.ResponseWriter, r *http.Request, s *session, d *approvalData, err error, notice string) {
	v := newView(s, "Approval "+d.A.ID, "approvals", d)
	v.setErr(err)
	v.Notice = notice
	p.render(w, r, statusOf(err), "approval", v)
}

func (p *approvalPages) handleApproval(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := p.getApproval(r, s, r.PathValue("id"))
	p.renderApproval(w, r, s, d, err, "")
}

// handleApprove signs an approval: the meaning and the person's passkey
// assertion over the decision (user verification: the passkey's PIN or
// biometric is the re-authentication at signing), sent to
// approval.approve.
func (p *approvalPages) handleApprove(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	req := api.ApprovalDecisionRequest{ID: id, Meaning: strings.TrimSpace(r.PostFormValue("meaning"))}
	var (
		rep api.ApprovalReply
		err error
	)
	switch {
	case req.Meaning == "":
		err = api.BadField("meaning", "say what your signature means")
	default:
		req.Signed, err = p.signedFor(r, s, req.Meaning, p.approvalDecision(api.DecisionApprove))
	}
	if err == nil {
		rep, err = call[api.ApprovalDecisionRequest, api.ApprovalReply](r.Context(), p.rq, s, api.ApprovalApprove, req)
	}
	p.log.Info("approval approve", "user", s.user, "approval_id", safetext.LogID(id), "signed", req.Signed != nil, "outcome", rep.Approval.Outcome, "code", api.CodeOf(err))
	p.afterDecision(w, r, s, id, err, req.Meaning, "", func(a api.Approval) string {
		n := "Approved by " + a.Decider + " (" + a.Meaning + ")"
		if a.Status == api.ApprovalExecuted {
			n += "; executed: " + a.Outcome
		}
		return n + "."
	}(rep.Approval))
}

// handleReject refuses an approval, with a reason (its meaning).
func (p *approvalPages) handleReject(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	req := api.ApprovalDecisionRequest{ID: id, Meaning: strings.TrimSpace(r.PostFormValue("meaning"))}
	var err error
	if req.Meaning == "" {
		err = api.BadField("meaning", "say why you reject it")
	} else {
		req.Signed, err = p.signedFor(r, s, req.Meaning, p.approvalDecision(api.DecisionReject))
	}
	if err == nil {
		_, err = call[api.ApprovalDecisionRequest, api.ApprovalReply](r.Context(), p.rq, s, api.ApprovalReject, req)
	}
	p.log.Info("approval reject", "user", s.user, "approval_id", safetext.LogID(id), "signed", req.Signed != nil, "code", api.CodeOf(err))
	p.afterDecision(w, r, s, id, err, "", req.Meaning, "Rejected: it will not run.")
}

// handleApproveChallenge answers the decision an approval's Approve form
// signs (sign.go).
func (p *approvalPages) handleApproveChallenge(w http.ResponseWriter, r *http.Request, s *session) {
	p.handleChallenge(w, r, s, p.rp, "meaning", p.approvalDecision(api.DecisionApprove))
}

// handleRejectChallenge answers the decision an approval's Reject form
// signs.
func (p *approvalPages) handleRejectChallenge(w http.ResponseWriter, r *http.Request, s *session) {
	p.handleChallenge(w, r, s, p.rp, "meaning", p.approvalDecision(api.DecisionReject))
}

// afterDecision shows the approval after a decision, with its outcome or
// the service's refusal (REAUTH_FAILED, SELF_APPROVAL, EXPIRED, ...).
// On success the page is redirected to (POST/redirect/GET); after a
// refusal the meaning typed stays in its field.
func (p *approvalPages) afterDecision(w http.ResponseWriter, r *http.Request, s *session, id string, err error, meaning, rejectMeaning, notice string) {
	if err != nil {
		d, _ := p.getApproval(r, s, id)
		d.Meaning, d.RejectMeaning = meaning, rejectMeaning
		p.renderApproval(w, r, s, d, err, "")
		return
	}
	s.setFlash(notice)
	http.Redirect(w, r, "/approvals/"+url.PathEscape(id), http.StatusSeeOther)
}

// pendingApprovals are the pending approvals (the Overview's card).
func pendingApprovals(ctx context.Context, rq requester, s *session) ([]api.Approval, error) {
	rep, err := call[api.ApprovalListRequest, api.ApprovalListReply](ctx, rq, s, api.ApprovalList, api.ApprovalListRequest{Status: api.ApprovalPending})
	if err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	return rep.Approvals, nil
}

// nRecords is n records in words ("1 record", "3 records").
func nRecords(n int) string {
	if n == 1 {
		return "1 record"
	}
	return fmt.Sprintf("%d records", n)
}

package decision

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/deadletter/deadletter/shared/api"
)

// The builders below are the one place that says what each member of a
// Decision holds for each action. A client (dlqctl, the console) builds
// the decision it signs from what the server shows it; an executor builds
// the one it expects from its own state, with the same function, and
// accepts the signed one only when Expect finds them equal.

// ForApproval is the decision to approve or reject (action
// api.DecisionApprove or api.DecisionReject) the approval a: Target is
// its id, Request its request digest (ApprovalRequestDigest, what AUDIT's
// requested action records), Chain the head of the quarantine chain the
// approval was asked on and the person reviewed (a.ChainHead: the
// AuditHash of the chain's last record then; "" when a has none: a
// drain, a hold lift).
func ForApproval(a api.Approval, action, meaning, person, role string, at time.Time) api.Decision {
	return api.Decision{Action: action, Target: a.ID, Request: ApprovalRequestDigest(a), Chain: a.ChainHead,
		Meaning: meaning, Person: person, Role: role, At: at.UTC().Truncate(time.Second)}
}

// ForRecord is the decision of a direct request on a quarantined event
// (api.DecisionRelease, api.DecisionDismiss): Target is the dlq id,
// Request the request's digest (ReleaseDigest, DismissDigest), Chain the
// hash of the chain's last record as the person read it.
func ForRecord(action, dlqID, requestDigest, chainHead, meaning, person, role string, at time.Time) api.Decision {
	return api.Decision{Action: action, Target: dlqID, Request: requestDigest, Chain: chainHead,
		Meaning: meaning, Person: person, Role: role, At: at.UTC().Truncate(time.Second)}
}

// ForRelease is ForRecord of a release request, meaning its reason.
func ForRelease(r api.ReleaseRequest, chainHead, person, role string, at time.Time) api.Decision {
	return ForRecord(api.DecisionRelease, r.DLQID, ReleaseDigest(r), chainHead, r.Reason, person, role, at)
}

// ForDismiss is ForRecord of a dismiss request, meaning its reason.
func ForDismiss(r api.DismissRequest, chainHead, person, role string, at time.Time) api.Decision {
	return ForRecord(api.DecisionDismiss, r.DLQID, DismissDigest(r), chainHead, r.Reason, person, role, at)
}

// ForHold is the decision to lift the legal hold of r (api.DecisionLift):
// Target is the hold id, Request the request's digest (HoldLiftDigest:
// hold, case and reason), Meaning the reason. A lift the policy makes
// wait for a second person is that person's ForApproval.
func ForHold(r api.HoldLiftRequest, person, role string, at time.Time) api.Decision {
	return api.Decision{Action: api.DecisionLift, Target: r.ID, Request: HoldLiftDigest(r),
		Meaning: r.Reason, Person: person, Role: role, At: at.UTC().Truncate(time.Second)}
}

// approvalRequest is what ApprovalRequestDigest covers: the request as
// asked for. Its members and their order are approval.RequestDigest's
// (a test keeps the two equal).
type approvalRequest struct {
	ID            string          `json:"id"`
	Action        string          `json:"action"`
	DLQID         string          `json:"dlq_id"`
	Domain        string          `json:"domain"`
	HoldID        string          `json:"hold_id"`
	Request       json.RawMessage `json:"request"`
	Payload       []byte          `json:"payload"`
	Requester     string          `json:"requester"`
	RequesterRole string          `json:"requester_role"`
	RequestedAt   time.Time       `json:"requested_at"`
	ExpiresAt     time.Time       `json:"expires_at"`
	ChainRecords  int             `json:"chain_records"`
	ChainHead     string          `json:"chain_head,omitempty"`
}

// ApprovalRequestDigest is the SHA-256 (hex) of a's request as asked for
// (id, action, event or hold, request body, payload, requester, times and
// the chain's length), the digest AUDIT's requested action records.
func ApprovalRequestDigest(a api.Approval) string {
	return digestJSON(approvalRequest{
		ID: a.ID, Action: a.Action, DLQID: a.DLQID, Domain: a.Domain, HoldID: a.HoldID, Request: a.Request, Payload: a.Payload,
		Requester: a.Requester, RequesterRole: a.RequesterRole, RequestedAt: a.RequestedAt.UTC(), ExpiresAt: a.ExpiresAt.UTC(),
		ChainRecords: a.ChainRecords, ChainHead: a.ChainHead,
	})
}

// ReleaseDigest is the SHA-256 (hex) of a release request without its
// signature and its ignored actor.
func ReleaseDigest(r api.ReleaseRequest) string {
	r.Signed, r.Actor = nil, ""
	return digestJSON(r)
}

// DismissDigest is the SHA-256 (hex) of a dismiss request without its
// signature and its ignored actor.
func DismissDigest(r api.DismissRequest) string {
	r.Signed, r.Actor = nil, ""
	return digestJSON(r)
}

// HoldLiftDigest is the SHA-256 (hex) of a hold lift request without its
// signature.
func HoldLiftDigest(r api.HoldLiftRequest) string {
	r.Signed = nil
	return digestJSON(r)
}

func digestJSON(v any) string {
	b, _ := json.Marshal(v)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// MaxSkew is how far a signed decision's time may be from the executor's
// clock.
const MaxSkew = 5 * time.Minute

// Expect checks that sd is the decision want, rebuilt by the executor
// from its own state, as signed: equal in every member but Meaning (the
// person's words, required) and At (when the person signed, within
// MaxSkew of now). It does not check the signature (Registry.Check does).
func Expect(want api.Decision, sd *api.SignedDecision, now time.Time) error {
	if sd == nil {
		return ErrUnsigned
	}
	got := sd.Decision
	switch {
	case got.Action != want.Action:
		return fmt.Errorf("%w: action %q, expected %q", ErrMismatch, got.Action, want.Action)
	case got.Target != want.Target:
		return fmt.Errorf("%w: another target", ErrMismatch)
	case got.Request != want.Request:
		return fmt.Errorf("%w: another request (its digest differs)", ErrMismatch)
	case got.Chain != want.Chain:
		return fmt.Errorf("%w: the chain changed since the person read it", ErrMismatch)
	case got.Person != want.Person:
		return fmt.Errorf("%w: signed by %s, decided by %s", ErrMismatch, got.Person, want.Person)
	case got.Role != want.Role:
		return fmt.Errorf("%w: role %q, expected %q", ErrMismatch, got.Role, want.Role)
	case got.Meaning == "":
		return fmt.Errorf("%w: no meaning", ErrMismatch)
	case got.At.Sub(now) > MaxSkew || now.Sub(got.At) > MaxSkew:
		return fmt.Errorf("%w: signed at %s, more than %s from now", ErrMismatch, got.At.UTC().Format(time.RFC3339), MaxSkew)
	}
	return nil
}

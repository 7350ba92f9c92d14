package api

import (
	"encoding/json"
	"log/slog"
	"time"
)

// Endpoint subjects of two-person approval and of the approval policy
// (served by the redriver, package approval).
const (
	ApprovalList    = "approval.list"
	ApprovalGet     = "approval.get"
	ApprovalApprove = "approval.approve"
	ApprovalReject  = "approval.reject"
	PolicyGet       = "policy.get"
	PolicySet       = "policy.set"
	// ApprovalHoldLift is the redriver's endpoint (services' account only,
	// no person's account imports it) where the auditor stores the pending
	// approval of a hold lift: the redriver alone writes APPROVALS.
	ApprovalHoldLift = "approval.hold_lift"
)

// Error codes of two-person approval, beside the shared ones
// (ErrBadRequest, ErrNotFound, ErrConflict, ErrForbidden, ...).
const (
	// ErrApprovalRequired: the action needs a second person's approval
	// and was not executed; the error reply's Approval is the pending
	// approval created (without request or diff values: approval.get
	// shows them, recorded in the access audit). An error rather than a
	// success, so that a client that knows nothing of approvals never
	// takes the action for done.
	ErrApprovalRequired = "APPROVAL_REQUIRED"
	// ErrSelfApproval: the approver is the person who requested it.
	ErrSelfApproval = "SELF_APPROVAL"
	// ErrExpired: the pending approval expired before it was decided.
	ErrExpired = "EXPIRED"
	// ErrAlreadyDecided: the approval was already approved or rejected.
	ErrAlreadyDecided = "ALREADY_DECIDED"
	// ErrReauthFailed: the signer's password did not authenticate the
	// signer (re-authentication at signing, 21 CFR 11.200(a)(1)).
	ErrReauthFailed = "REAUTH_FAILED"
	// ErrApprovalUnproven: an approval marked approved carries no
	// decision signed by its person that checks (SignedDecision against
	// the person's registered key, role and state, matching the request
	// and decision in AUDIT): it is never executed, and shown refused.
	ErrApprovalUnproven = "APPROVAL_UNPROVEN"
	// ErrApprovalLimit: the requester, or the event's chain, already has
	// the most pending approvals the redriver's configuration allows.
	ErrApprovalLimit = "APPROVAL_LIMIT"
)

// Approval statuses.
const (
	// ApprovalPending: waiting for a second person.
	ApprovalPending = "pending"
	// ApprovalApproved: signed by an approver; the action is to be
	// executed (or is being executed).
	ApprovalApproved = "approved"
	// ApprovalExecuted: the approved action was executed (Outcome says
	// how it went).
	ApprovalExecuted = "executed"
	// ApprovalRejected: refused by an approver; never executed.
	ApprovalRejected = "rejected"
	// ApprovalExpired: not decided before ExpiresAt; never executed.
	// Stored entries stay pending: the status is computed when read.
	ApprovalExpired = "expired"
	// ApprovalRefused: stored as approved (or executed) without a
	// decision signed by its person (Signed): a forgery, never executed
	// (Refused says why).
	ApprovalRefused = "refused"
)

// Actions that may need approval (Approval.Action, Policy).
const (
	// ActionCorrect: a redrive with a corrected payload.
	ActionCorrect = "correct"
	// ActionRelease: the release of a poison event.
	ActionRelease = "release"
	// ActionDrain: a drain.
	ActionDrain = "drain"
	// ActionHoldLift: lifting a legal hold.
	ActionHoldLift = "hold_lift"
	// ActionDismiss: closing a chain for good without committing it.
	ActionDismiss = "dismiss"
)

// IdentityChange is one identity field a correction changes, with its
// value before and after. The values are business identifiers (keys, an
// ordering key, an event type): they are shown only to roles that read
// payloads and to the approver, and never logged (LogValue and String give
// the field name only).
type IdentityChange struct {
	// Field is "idempotency_key", "ordering_key", "domain" or
	// "event_type".
	Field  string `json:"field"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// LogValue logs the field name, never the values.
func (c IdentityChange) LogValue() slog.Value { return slog.StringValue(c.Field) }

// String is the field name only, so that no value reaches a log by a %v.
func (c IdentityChange) String() string { return c.Field }

// Approval is a two-person approval as stored (bucket APPROVALS) and
// shown (approval.get, approval.list).
type Approval struct {
	// ID names the approval (a token safe in a subject and a key).
	ID string `json:"id"`
	// Action is one of the Action* constants; DLQID the event it acts on
	// (empty for a drain); DrainID a drain's, once started.
	Action string `json:"action"`
	DLQID  string `json:"dlq_id,omitempty"`
	Domain string `json:"domain,omitempty"`
	// HoldID is the legal hold a hold_lift approval lifts.
	HoldID string `json:"hold_id,omitempty"`
	// Status is one of the Approval* statuses.
	Status string `json:"status"`
	// Request is the request to execute once approved (the original
	// endpoint's request body). It may carry a payload: it is left out
	// for roles that neither read payloads nor approve (approval.Redact).
	Request json.RawMessage `json:"request,omitempty"`
	// Payload is a correction's corrected payload byte for byte (base64
	// in JSON): Request, a JSON value inside this one, is re-encoded
	// compacted, and a correction is stored exactly as it was sent. Left
	// out like Request.
	Payload []byte `json:"payload,omitempty"`
	// Reasons says why approval is needed (the policy rules that matched;
	// no values).
	Reasons []string `json:"reasons"`
	// Diff lists the identity fields a correction changes (see
	// IdentityChange); left out for roles that neither read payloads nor
	// approve (see approval.Redact).
	Diff []IdentityChange `json:"diff,omitempty"`
	// DiffFields names the changed identity fields (no values): shown to
	// every role.
	DiffFields []string `json:"diff_fields,omitempty"`
	// Requester, RequesterRole, RequestedAt and Reason: who asked, when and
	// why.
	Requester     string    `json:"requester"`
	RequesterRole string    `json:"requester_role"`
	RequestedAt   time.Time `json:"requested_at"`
	Reason        string    `json:"reason,omitempty"`
	// ExpiresAt is when a pending approval lapses.
	ExpiresAt time.Time `json:"expires_at"`
	// Decider, DecidedAt and Meaning: the approver (or rejecter), when, and
	// the meaning of the signature ("reviewed the correction against the
	// invoice") or the reason for a rejection.
	Decider   string     `json:"decider,omitempty"`
	DecidedAt *time.Time `json:"decided_at,omitempty"`
	Meaning   string     `json:"meaning,omitempty"`
	// ExecutedAt and Outcome: when the approved action was executed and
	// its outcome (an Outcome* or an error code).
	ExecutedAt *time.Time `json:"executed_at,omitempty"`
	Outcome    string     `json:"outcome,omitempty"`
	// ChainRecords is the number of records of the event's chain when the
	// action was requested: the approved record is appended at that index
	// (an expected index), so that an approval never applies to a chain
	// that changed since the approver read it.
	ChainRecords int `json:"chain_records,omitempty"`
	// ChainHead is the AuditHash of the chain's last record when the
	// action was requested (the record at ChainRecords-1; empty for a
	// drain and a hold lift): the chain the approver reviews, which the
	// signed decision names (Decision.Chain).
	ChainHead string `json:"chain_head,omitempty"`
	// Signed is the approver's (or rejecter's) decision signed by that
	// person (issue #38): without one that checks against the person's
	// registered key, role and state, an approval is never executed.
	Signed *SignedDecision `json:"signed,omitempty"`
	// Refused says why an approval is refused (status refused).
	Refused string `json:"refused,omitempty"`
	// Revision is the entry's revision in APPROVALS (for information).
	Revision uint64 `json:"revision,omitempty"`
}

// ApprovalHoldLiftRequest is the auditor's request to store the pending
// approval of a hold lift (ApprovalHoldLift), for the person the auditor
// authenticated.
type ApprovalHoldLiftRequest struct {
	// HoldID is the hold to lift; Request the hold.lift request to
	// execute once approved.
	HoldID  string          `json:"hold_id"`
	Request json.RawMessage `json:"request"`
	// Requester and RequesterRole: the person who asked (as the server
	// attached it to the auditor's hold.lift request); Reason why.
	Requester     string `json:"requester"`
	RequesterRole string `json:"requester_role"`
	Reason        string `json:"reason,omitempty"`
}

// LogValue logs the approval's id, action, status and event, never its
// request or diff values.
func (a Approval) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", a.ID), slog.String("action", a.Action),
		slog.String("status", a.Status), slog.String("dlq_id", a.DLQID))
}

// ApprovalListRequest lists approvals (approval.list).
type ApprovalListRequest struct {
	// Status restricts to one status ("" for all); pending approvals are
	// listed first, then the others newest first.
	Status string `json:"status,omitempty"`
	// Limit caps the approvals returned (default and maximum 1,000).
	Limit int `json:"limit,omitempty"`
}

// ApprovalListReply is approval.list's answer.
type ApprovalListReply struct {
	Approvals []Approval `json:"approvals"`
	// Truncated says more matched than Limit.
	Truncated bool `json:"truncated,omitempty"`
}

// ApprovalGetRequest names an approval (approval.get).
type ApprovalGetRequest struct {
	ID string `json:"id"`
}

// Password is a secret typed by a person: it is sent in a request's JSON
// but never printed or logged (String, GoString and LogValue redact it).
type Password string

// String redacts the password.
func (Password) String() string { return "[redacted]" }

// GoString redacts the password.
func (Password) GoString() string { return "[redacted]" }

// LogValue redacts the password.
func (Password) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// ApprovalDecisionRequest approves or rejects an approval
// (approval.approve, approval.reject).
type ApprovalDecisionRequest struct {
	ID string `json:"id"`
	// Meaning is what the signature means ("reviewed the correction against
	// the invoice"), or for a rejection why; required.
	Meaning string `json:"meaning"`
	// Password re-authenticates the signer at signing (approve only): the
	// password of the NATS user the request comes from. It is checked by
	// the server (a short connection as that user) and never stored,
	// logged or echoed.
	Password Password `json:"password,omitempty"`
	// Signed is the decision signed by its person (issue #38).
	Signed *SignedDecision `json:"signed,omitempty"`
}

// LogValue logs the id only: a JSON log handler would otherwise marshal
// the password (LogValue of a member is not consulted).
func (r ApprovalDecisionRequest) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", r.ID))
}

// ApprovalReply is the approval after a decision (approval.approve,
// approval.reject) or as read (approval.get). A request that needs
// approval is answered ErrApprovalRequired with the approval in the
// error's Approval member.
type ApprovalReply struct {
	Approval Approval `json:"approval"`
}

// Policy says which actions need a second person's approval
// (policy.get, policy.set; package approval documents the default).
type Policy struct {
	// Corrections: "none", "identity" (only those that change the event's
	// identity, which always need approval whatever this says) or "all".
	Corrections string `json:"corrections"`
	// ReleasePoison: every release of a poison event.
	ReleasePoison bool `json:"release_poison"`
	// DrainMaxSelected: a drain selecting more than this many events (0:
	// no limit).
	DrainMaxSelected int `json:"drain_max_selected"`
	// DrainValidation: a drain that includes validation-class events.
	DrainValidation bool `json:"drain_validation"`
	// IgnoreOrder: a drain with ignore_order.
	IgnoreOrder bool `json:"ignore_order"`
	// HoldLift: lifting a legal hold.
	HoldLift bool `json:"hold_lift"`
	// DismissWithoutApproval waives the second person a dismissal needs
	// otherwise (a policy set before dismissals existed lacks it: they
	// need one).
	DismissWithoutApproval bool `json:"dismiss_without_approval"`
	// PendingTTL is how long a pending approval stays open (Go duration,
	// default "72h").
	PendingTTL string `json:"pending_ttl"`
}

// PolicyReply is the current policy and who set it (policy.get,
// policy.set).
type PolicyReply struct {
	Policy Policy `json:"policy"`
	// Default says no policy was ever stored: Policy is the default.
	Default bool `json:"default,omitempty"`
	// SetBy and SetAt: who stored it and when; Revision its AUDIT sequence.
	SetBy    string     `json:"set_by,omitempty"`
	SetAt    *time.Time `json:"set_at,omitempty"`
	Revision uint64     `json:"revision,omitempty"`
}

// PolicySetRequest replaces the policy (policy.set).
type PolicySetRequest struct {
	Policy Policy `json:"policy"`
	// Reason is required: why the policy changes.
	Reason string `json:"reason"`
	// ExpectedRevision, when set, makes the change conditional on the
	// current policy's revision (PolicyReply.Revision; 0: none stored).
	ExpectedRevision *uint64 `json:"expected_revision,omitempty"`
}

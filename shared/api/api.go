// Package api defines the request and reply bodies of deadletter's
// request-reply endpoints (NATS micro services), and their error codes, so
// that services and tools share one definition of each.
package api

import "github.com/deadletter/deadletter/shared/record"

// Endpoint subjects. Each service is a NATS micro service; these are the
// subjects of its endpoints (request-reply, JSON in and out).
const (
	// QuarantinerAppend appends a lifecycle record to a quarantine chain.
	QuarantinerAppend = "quarantiner.append"
	// QuarantinerHold appends a legal hold's record (hold_placed or
	// hold_lifted, api.AppendRequest) and no other kind: the auditor's
	// appends, so that its credential cannot resolve or redrive an event.
	QuarantinerHold = "quarantiner.hold"
	// QuarantinerRepair seals the quarantine record of an event left
	// without an outcome (api.RepairRequest): the auditor's reconciliation
	// names the event; the quarantiner reads it from EVENTS itself.
	QuarantinerRepair = "quarantiner.repair"

	// ValidatorCheckAll covers the validator's dry-run endpoint,
	// validator.check.<domain>.<type>.
	ValidatorCheckAll = "validator.check.>"

	// Redriver endpoints.
	DrainStart  = "drain.start"
	DrainStatus = "drain.status"
	DrainCancel = "drain.cancel"
	DrainList   = "drain.list"
	DrainResume = "drain.resume"
	Redrive     = "redrive"
	Release     = "release"
	// Dismiss closes a chain for good without committing its event
	// (record.KindDismissed).
	Dismiss = "dismiss"

	// Auditor endpoints.
	AuditVerify     = "audit.verify"
	AuditReconcile  = "audit.reconcile"
	AuditGet        = "audit.get"
	AuditList       = "audit.list"
	AuditGroups     = "audit.groups"
	AuditCheckpoint = "audit.checkpoint"
	// AuditWhoami answers who the caller is, as the server attached it
	// (a console learns its person's role from it).
	AuditWhoami = "audit.whoami"
	// AuditExport pages an inspection export; AuditAccess lists the
	// access audit (payload reads).
	AuditExport = "audit.export"
	AuditAccess = "audit.access"
)

// Error codes of endpoint replies (the Nats-Service-Error-Code header).
const (
	// ErrBadRequest: the request body is malformed or invalid.
	ErrBadRequest = "BAD_REQUEST"
	// ErrNotFound: no quarantine chain has that dlq id.
	ErrNotFound = "NOT_FOUND"
	// ErrInvalidTransition: the record's kind is not allowed in the chain's
	// current state.
	ErrInvalidTransition = "INVALID_TRANSITION"
	// ErrConflict: the chain changed since the caller read it.
	ErrConflict = "CONFLICT"
	// ErrUnavailable: a store could not be reached; retry.
	ErrUnavailable = "UNAVAILABLE"
	// ErrUnauthenticated: the request carries no caller the server
	// attached (it did not come through a person's account).
	ErrUnauthenticated = "UNAUTHENTICATED"
	// ErrForbidden: the caller's role may not do this.
	ErrForbidden = "FORBIDDEN"
)

// AppendRequest asks the quarantiner to append a lifecycle record.
type AppendRequest struct {
	// DLQID and Domain name the chain.
	DLQID  string `json:"dlq_id"`
	Domain string `json:"domain"`
	// Kind is the record kind (record.Kind* except quarantined).
	Kind record.Kind `json:"kind"`
	// ExpectedIndex, when set, makes the append conditional: the chain must
	// have exactly this many records. A repeated request whose record is
	// already at that index (same kind, drain and redrive count) is answered
	// with that record: appends are idempotent.
	ExpectedIndex *int `json:"expected_index,omitempty"`
	// Class, for released: the class the event returns to.
	Class record.Class `json:"class,omitempty"`
	// RedriveCount, for redrive_requested: the replay's number.
	RedriveCount int `json:"redrive_count,omitempty"`
	// Payload, for corrected: the corrected body (base64 in JSON).
	Payload []byte `json:"payload,omitempty"`
	// Actor and Reason record a person's decision.
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
	// DrainID names the drain on whose behalf the record is written.
	DrainID string `json:"drain_id,omitempty"`
	// IgnoreOrder, for redrive_requested: the drain waived per-key order
	// (DrainStartRequest.IgnoreOrder).
	IgnoreOrder bool `json:"ignore_order,omitempty"`
	// SourceStream and SourceSeq locate the replay message, if any.
	SourceStream string `json:"source_stream,omitempty"`
	SourceSeq    uint64 `json:"source_seq,omitempty"`
	// Signature, for approved: the two-person approval's electronic
	// signature (approval.Signature builds it from a signed approval).
	Signature *record.Signature `json:"signature,omitempty"`
	// Signed, for released, dismissed and hold_lifted: the person's
	// signed decision (issue #38), sealed into the record
	// (record.Record.Decision); the quarantiner refuses the append when
	// it does not check.
	Signed *SignedDecision `json:"signed,omitempty"`
	// Hold, for hold_placed and hold_lifted: the legal hold (its id, case
	// id and time; the quarantiner states the status the record keeps).
	// Actor and Reason are the person who placed (lifted) it and why.
	Hold *record.HoldMark `json:"hold,omitempty"`
}

// AppendReply is the stored record's position and seal.
type AppendReply struct {
	DLQID     string        `json:"dlq_id"`
	Index     int           `json:"index"`
	AuditHash string        `json:"audit_hash"`
	Status    record.Status `json:"status"`
	Class     record.Class  `json:"class"`
}

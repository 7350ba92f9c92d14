package record

import (
	"encoding/json"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
)

// SchemaVersion is the version of the record format written by this code.
const SchemaVersion = 1

// Payload encodings.
const (
	// EncodingText: Data is the payload itself (valid UTF-8 JSON).
	EncodingText = "text"
	// EncodingBase64: Data is the standard base64 of the payload bytes.
	EncodingBase64 = "base64"
)

// Payload is an event body preserved byte for byte (see NewPayload and
// Payload.Bytes).
type Payload struct {
	// Encoding is EncodingText or EncodingBase64.
	Encoding string `json:"encoding"`
	// Data is the payload as text, or its standard base64.
	Data string `json:"data"`
	// SHA256 is the hex SHA-256 of the payload bytes.
	SHA256 string `json:"sha256"`
	// Size is the payload length in bytes.
	Size int `json:"size"`
}

// Record is one sealed entry of a quarantine chain. Records are append-only:
// a change of state is a new Record for the same DLQID whose PrevHash is the
// previous record's AuditHash. AuditHash seals every other field (see Seal).
type Record struct {
	// SchemaVersion is the record format version.
	SchemaVersion int `json:"schema_version"`
	// DLQID identifies the quarantined event (see DLQIDFor): its
	// idempotency key when it passed the gate, a hash of its subject and
	// bytes when it failed validation, else
	// domain.Key(domain, "source", stream, sequence) of the original; a
	// token safe in a NATS subject.
	DLQID string `json:"dlq_id"`
	// Index is the record's position in its chain, 0 for the first.
	Index int `json:"index"`
	// Kind is the lifecycle step this record states (Kind* constants).
	Kind Kind `json:"kind"`
	// Domain is a registered domain (package registry) or "unknown".
	Domain string `json:"domain"`
	// Class is the failure class after this record: validation, exhausted
	// or poison. A released record carries the class it restores.
	Class Class `json:"class"`
	// ErrorCode and ErrorDetail describe the latest failure.
	ErrorCode   codes.Code `json:"error_code"`
	ErrorDetail string     `json:"error_detail"`
	// Payload is the original event body (first record), or a corrected
	// body (KindCorrected); nil on other records.
	Payload *Payload `json:"payload,omitempty"`
	// Headers are the original message headers (first record).
	Headers map[string][]string `json:"headers,omitempty"`
	// SourceSubject, SourceStream and SourceSeq locate the original (or,
	// on later records, the replay) message.
	SourceSubject string `json:"source_subject"`
	SourceStream  string `json:"source_stream"`
	SourceSeq     uint64 `json:"source_seq"`
	// IdempotencyKey is the event's key when the payload parsed.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// OrderingKey groups the events of one business object for ordered
	// replay; empty when the payload did not parse.
	OrderingKey string `json:"ordering_key,omitempty"`
	// PartyID is the supplier or registrant, when known.
	PartyID string `json:"party_id,omitempty"`
	// Publisher is the publisher of the original event
	// (envelope.PublisherOf: the token the server wrote into its subject),
	// carried by every record of the chain; "" when the event came from
	// inside the services' account or a server without accounts.
	Publisher string `json:"publisher,omitempty"`
	// EventTime is the event's own time (UTC) when known.
	EventTime *time.Time `json:"event_time,omitempty"`
	// EventHashID is the event's standard content fingerprint when its
	// domain defines one and its payload parsed (DSCSA: the CBV 2.0 EPCIS
	// event hash ID; see envelope.Envelope.EventHashID).
	EventHashID string `json:"event_hash_id,omitempty"`
	// Document, on the first record of an event read from an EPCIS
	// document, is its provenance: the document, the event's position and
	// where its original bytes are (envelope.Document).
	Document *envelope.Document `json:"document,omitempty"`
	// Identifiers, on the first record, are the business identifiers a
	// records list shows and searches that the ordering key does not
	// name (ListedIdentifiers: pharmacy "transaction_id" and
	// "registrant_dea", DSCSA "lot" and "event_type", FSMA "tlc"), taken
	// from the envelope's Identifiers by a per-domain allow-list: never
	// another payload value. Absent on records written before it existed
	// and when the payload gave none.
	Identifiers map[string]string `json:"identifiers,omitempty"`
	// Attempts are the failed attempts this record adds, in order; Fold
	// accumulates them over the chain.
	Attempts []Attempt `json:"attempts,omitempty"`
	// DeliveryCount is how many times the failing message was delivered.
	DeliveryCount uint64 `json:"delivery_count"`
	// RedriveCount is how many replays have failed so far.
	RedriveCount int `json:"redrive_count"`
	// FirstSeen is when the original event was stored (UTC).
	FirstSeen time.Time `json:"first_seen"`
	// QuarantinedAt is when this record was written (UTC).
	QuarantinedAt time.Time `json:"quarantined_at"`
	// TraceID and SpanID are the W3C trace context of the failure.
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
	// Actor and Reason record a person's decision (correction, release,
	// manual resolution, redrive request).
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
	// DrainID names the drain that caused this record, if any.
	DrainID string `json:"drain_id,omitempty"`
	// IgnoreOrder, on a redrive_requested record, says the drain replayed
	// the event without waiting for earlier unresolved events of its
	// ordering key (the operator waived per-key order).
	IgnoreOrder bool `json:"ignore_order,omitempty"`
	// Signature, on an approved record, is the approver's electronic
	// signature of a two-person approval.
	Signature *Signature `json:"signature,omitempty"`
	// Decision, on a released, dismissed or hold_lifted record, is the
	// person's signed decision whole (the JSON of an api.SignedDecision,
	// issue #38): verify checks it again against the person's registered
	// key, role and state at the time. Absent on records written before.
	Decision json.RawMessage `json:"decision,omitempty"`
	// Hold, on a hold_placed or hold_lifted record, names the legal hold
	// placed or lifted.
	Hold *HoldMark `json:"hold,omitempty"`
	// Conflict, on a record of error code IDEMPOTENCY_CONFLICT, names the
	// LEDGER entry the event's key is committed as and both contents'
	// hashes.
	Conflict *Conflict `json:"conflict,omitempty"`
	// PrevHash is the AuditHash of the previous record of the chain ("" for
	// the first record).
	PrevHash string `json:"prev_hash"`
	// AuditHash is the lowercase hex SHA-256 of the RFC 8785 canonical
	// JSON of this record without audit_hash (see Seal and the package
	// doc).
	AuditHash string `json:"audit_hash"`
}

// Signature is the electronic signature of a two-person approval, as an
// approved record seals it (21 CFR 11.50: the printed name of the signer,
// the date and time of signing, and the meaning of the signature), with
// the request it approves.
type Signature struct {
	// ApprovalID names the approval (bucket APPROVALS, and its actions in
	// AUDIT); Action is what was approved ("correct", "release", ...).
	ApprovalID string `json:"approval_id"`
	Action     string `json:"action"`
	// Requester and RequestedAt: who asked for the action, and when.
	Requester   string    `json:"requester"`
	RequestedAt time.Time `json:"requested_at"`
	// Approver is the signer's user name (the name it authenticated
	// with, again at signing) and ApproverRole its role.
	Approver     string `json:"approver"`
	ApproverRole string `json:"approver_role"`
	// RequesterPerson and ApproverPerson are the persons of Requester and
	// Approver (access.PersonOf): a person never approves their own
	// request, whichever of their logins asked or signed (issue #38, E7).
	// Empty on records written before.
	RequesterPerson string `json:"requester_person,omitempty"`
	ApproverPerson  string `json:"approver_person,omitempty"`
	// SignedAt is when the approver signed (UTC).
	SignedAt time.Time `json:"signed_at"`
	// Meaning is what the signature means, in the signer's words.
	Meaning string `json:"meaning"`
	// Signed is the approver's signed decision whole (the JSON of an
	// api.SignedDecision, issue #38): the signature by the person's own
	// key over the approval's request, the chain reviewed, the meaning
	// and the time. Absent on records written before.
	Signed json.RawMessage `json:"signed,omitempty"`
}

// Conflict is an idempotency conflict: the event's key is committed in
// LEDGER (at LedgerSeq) with content whose canonical hash is CommittedHash,
// and the event's own is ContentHash (idempotency.ContentHash of each payload).
type Conflict struct {
	// LedgerStream and LedgerSeq locate the committed entry.
	LedgerStream string `json:"ledger_stream"`
	LedgerSeq    uint64 `json:"ledger_seq"`
	// CommittedHash is the committed entry's content hash, ContentHash
	// the conflicting event's.
	CommittedHash string `json:"committed_hash"`
	ContentHash   string `json:"content_hash"`
}

// HoldMark names the legal hold a hold_placed or hold_lifted record places
// or lifts (package hold keeps the holds). The record's Actor and Reason
// are the person who placed (lifted) the hold and why, its QuarantinedAt
// when the record was written.
type HoldMark struct {
	// HoldID names the hold (bucket HOLDS, and its actions in AUDIT);
	// CaseID is the legal matter it is placed for.
	HoldID string `json:"hold_id"`
	CaseID string `json:"case_id"`
	// At is when the person placed (lifted) the hold (UTC): for a hold
	// on a party or filter, earlier than the record of an event that
	// matched it later.
	At time.Time `json:"at"`
	// Status is the event's status, which the record keeps (so that the
	// last record alone tells the status: see chain.Head).
	Status Status `json:"status"`
}

package record

import (
	"fmt"
	"strconv"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
)

// Stages at which an attempt can fail.
const (
	StageValidate = "validate"
	StageCommit   = "commit"
	StageRedrive  = "redrive"
)

// Attempt is one failed processing attempt of an event.
type Attempt struct {
	// At is when the attempt failed (UTC).
	At time.Time `json:"at"`
	// Stage is "validate", "commit" or "redrive".
	Stage string `json:"stage"`
	// Code classifies the failure.
	Code codes.Code `json:"code"`
	// Reason is the human-readable detail (no payload values).
	Reason string `json:"reason"`
	// Delivery is the JetStream delivery number of the attempt (1-based).
	Delivery uint64 `json:"delivery,omitempty"`
}

// Failure is what the validator publishes on the FAILURES intake for an
// event it will not commit, before it terminates the original. The
// quarantiner turns it into a sealed record.
type Failure struct {
	// Class is ClassValidation for structural failures.
	Class Class `json:"class"`
	// Code and Detail describe the failure that ended processing.
	Code   codes.Code `json:"code"`
	Detail string     `json:"detail"`
	// Domain is the event's domain, or "unknown".
	Domain string `json:"domain"`
	// Subject, Stream and Seq locate the original message.
	Subject string `json:"subject"`
	Stream  string `json:"stream"`
	Seq     uint64 `json:"seq"`
	// Deliveries is how many times the original was delivered.
	Deliveries uint64 `json:"deliveries"`
	// Published is when the original was stored in Stream (UTC).
	Published time.Time `json:"published"`
	// Headers are the original message's headers, verbatim.
	Headers map[string][]string `json:"headers,omitempty"`
	// Payload is the original message's body, verbatim.
	Payload []byte `json:"payload"`
	// Envelope is the event's normalized identity when it passed the gate
	// (e.g. a downstream rejection at commit); nil when it did not parse.
	Envelope *envelope.Envelope `json:"envelope,omitempty"`
	// DLQID and RedriveCount are set when the failed event was a redrive.
	DLQID        string `json:"dlq_id,omitempty"`
	RedriveCount int    `json:"redrive_count,omitempty"`
	// Attempts is the ordered history of failed attempts, the last one
	// being the failure above.
	Attempts []Attempt `json:"attempts"`
	// Conflict is set on an IDEMPOTENCY_CONFLICT failure: the committed
	// LEDGER entry and both content hashes.
	Conflict *Conflict `json:"conflict,omitempty"`
	// FailedAt is when the failure was reported (UTC).
	FailedAt time.Time `json:"failed_at"`
	// Replayed, set only with DLQID and RedriveCount, makes the report
	// no failure but the outcome of a replay of a whole EPCIS document
	// (a chain quarantined MALFORMED_DOCUMENT, corrected or redriven after
	// the rules changed): every event of it ended committed, duplicate or
	// quarantined on its own chain, and the document's chain gets its
	// replayed record (no Code then).
	Replayed *DocumentReplay `json:"replayed,omitempty"`
}

// DocumentReplay counts the outcomes of the events of a replayed document.
type DocumentReplay struct {
	Events      int `json:"events"`
	Committed   int `json:"committed"`
	Duplicates  int `json:"duplicates"`
	Quarantined int `json:"quarantined"`
}

// Reason is the replayed record's reason: how many events the document
// held and what became of them (counts only, no payload values).
func (d DocumentReplay) Reason() string {
	return fmt.Sprintf("document replayed: %d events, %d committed, %d duplicates, %d quarantined", d.Events, d.Committed, d.Duplicates, d.Quarantined)
}

// History is the value the validator keeps in the ATTEMPTS bucket for an
// event it is retrying: enough to name the event even if its original
// expires from EVENTS before it is quarantined.
type History struct {
	// Subject, Domain and IdempotencyKey identify the event.
	Subject        string `json:"subject"`
	Domain         string `json:"domain"`
	IdempotencyKey string `json:"idempotency_key"`
	// Attempts is the ordered list of failed attempts.
	Attempts []Attempt `json:"attempts"`
}

// FailureMsgID is the Nats-Msg-Id of the failure report of the message
// seq of stream: the same whoever stores it (the validator on any
// delivery, the auditor's repair), so FAILURES keeps one within its
// de-duplication window (the quarantiner keeps one record in any case).
func FailureMsgID(stream string, seq uint64) string {
	return "failure-" + stream + "-" + strconv.FormatUint(seq, 10)
}

// DocumentFailureMsgID is the Nats-Msg-Id of the failure report of event
// index of the EPCIS document whose bytes have the hex SHA-256 sha: the
// same on every delivery of the document (and every copy of it published
// within FAILURES' de-duplication window), and for the auditor's repair.
func DocumentFailureMsgID(sha string, index int) string {
	return "failure-doc-" + sha + "-" + strconv.Itoa(index)
}

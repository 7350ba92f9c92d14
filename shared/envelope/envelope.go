// Package envelope defines the normalized view of a valid event that the
// validation gate produces, and the NATS header keys deadletter reads and
// writes. The original bytes of an event are never rewritten: the envelope
// travels beside them.
package envelope

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/subjects"
)

// Envelope is the normalized identity of one valid event. Later services
// (quarantiner, redriver, auditor) group, order and reconcile by it.
type Envelope struct {
	// Domain is one of the registered domains (package registry).
	Domain string `json:"domain"`
	// EventType is the subject's event-type token (pharmacy event type,
	// DSCSA bizStep, FSMA CTE type).
	EventType string `json:"event_type"`
	// IdempotencyKey is deterministic from the identifiers a compliance
	// reviewer would name; see each domain package. It is safe as a NATS
	// subject token and KV key: "<domain>_<32 hex>".
	IdempotencyKey string `json:"idempotency_key"`
	// KeySource names what the key was derived from, e.g. "eventID" or
	// "eventHashID". No values.
	KeySource string `json:"key_source"`
	// OrderingKey groups the events of one business object (DSCSA GTIN +
	// serial, FSMA supplier + TLC, pharmacy registrant + NDC-11 + lot); replays within
	// a key follow EventTime.
	OrderingKey string `json:"ordering_key"`
	// EventTime is the event's own time, normalized to UTC.
	EventTime time.Time `json:"event_time"`
	// PartyID is the supplier (FSMA), registrant DEA number (pharmacy) or
	// trading-partner location (DSCSA) failures are grouped by.
	PartyID string `json:"party_id,omitempty"`
	// EventHashID is the event's standard content fingerprint where its
	// domain defines one: for DSCSA the CBV 2.0 EPCIS event hash ID
	// ("ni:///sha-256;<64 hex>?ver=CBV2.0", package eventhash), computed
	// for every event that parsed, valid or not.
	EventHashID string `json:"event_hash_id,omitempty"`
	// Identifiers holds the normalized identifiers (e.g. "gtin", "serial",
	// "ndc11", "lot", "tlc"), all kept as strings so leading zeros survive.
	Identifiers map[string]string `json:"identifiers,omitempty"`
	// Publisher is the publisher the event came from (PublisherOf): the
	// token the server wrote into its subject, or for a replay the
	// original's publisher as the redriver states it; "" when the event
	// came from inside the services' account.
	Publisher string `json:"publisher,omitempty"`
	// Document is set on an event read from an EPCIS document published
	// as one message: which document, where in it, and where its exact
	// original bytes are kept.
	Document *Document `json:"document,omitempty"`
	// Partial marks the envelope of an event that failed validation
	// (gate.Gate.Identify): only the fields its payload let the domain's
	// rules derive are set, and its quarantine chain is named by a hash of
	// its bytes (record.DLQIDFor), so that the same bytes land in the same
	// chain and different bytes never share one.
	Partial bool `json:"partial,omitempty"`
}

// Document is the provenance of an event read from an EPCIS document
// (package dscsa/document): the document's identity, the event's position
// in it, and where its exact original bytes are: bytes Offset to
// Offset+Length of the object named SHA256 in the DOCUMENTS object store
// (subjects.DocumentsBucket), and, while EVENTS keeps it, of the document
// message at Stream/Seq. The identity strings are the document's own text
// (its header): show them escaped, never log them.
type Document struct {
	// ID is the document's id (its SBDH InstanceIdentifier, or a JSON
	// document's "id"); the hex SHA-256 when it names none.
	ID string `json:"id"`
	// SHA256 is the lowercase hex SHA-256 of the document's bytes.
	SHA256 string `json:"sha256"`
	// Format is "json" or "xml".
	Format string `json:"format"`
	// Index is the event's 0-based position; Count the document's events
	// (0 when unknown).
	Index int `json:"index"`
	Count int `json:"count"`
	// Sender and Receiver are the SBDH's identifiers, when present.
	Sender   string `json:"sender,omitempty"`
	Receiver string `json:"receiver,omitempty"`
	// Created is the document's creation date (RFC 3339, UTC), when given.
	Created string `json:"created,omitempty"`
	// Stream and Seq locate the (first) message of the document's bytes.
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
	// Offset and Length locate the event's original bytes in the document.
	Offset int `json:"offset"`
	Length int `json:"length"`
}

// Header keys. nats.Header is case-sensitive: always use these constants.
const (
	// MsgID is JetStream's de-duplication header.
	MsgID = "Nats-Msg-Id"
	// ExpectedLastSubjectSeq makes a publish conditional on the subject's
	// last sequence (0 = subject must be empty).
	ExpectedLastSubjectSeq = "Nats-Expected-Last-Subject-Sequence"

	// IdempotencyKey is set on LEDGER writes and failure messages.
	IdempotencyKey = "Deadletter-Idempotency-Key"
	// EventType is set on LEDGER writes.
	EventType = "Deadletter-Event-Type"
	// SourceStream and SourceSeq point at the original message in EVENTS.
	SourceStream = "Deadletter-Source-Stream"
	SourceSeq    = "Deadletter-Source-Seq"
	// DLQID and RedriveCount are set by the redriver on a re-published event
	// so that its outcome is written to the same quarantine chain.
	DLQID        = "Deadletter-Dlq-Id"
	RedriveCount = "Deadletter-Redrive-Count"
	// Publisher is set on LEDGER writes (the event's publisher,
	// Envelope.Publisher) and by the redriver on a replay (the original's
	// publisher, read by PublisherOf).
	Publisher = "Deadletter-Publisher"
	// ErrorCode is set on failure messages and error replies.
	ErrorCode = "Deadletter-Error-Code"
	// ContentHash is set on LEDGER writes: the hex SHA-256 of the event's
	// content identity (idempotency.ContentHash: the canonical RFC 8785
	// payload, or for DSCSA the CBV 2.0 event hash ID's digest), which a
	// second event with the same idempotency key must match to be a
	// duplicate.
	ContentHash = "Deadletter-Content-Hash"
	// ContentIdentity is set on LEDGER writes next to ContentHash when it
	// was derived by a domain's own content identity (idempotency.StoredIdentity,
	// e.g. DSCSA's "cbv2-event-hash"). Without it (entries of the other
	// domains, and every entry written before it was recorded) the hash is
	// the canonical JSON's (idempotency.IdentityJCS).
	ContentIdentity = "Deadletter-Content-Identity"

	// DocumentSHA256, DocumentIndex, DocumentOffset and DocumentLength
	// are set on the LEDGER write of an event read from a document
	// (Document): the document object's name and where the event's
	// original bytes are in it.
	DocumentSHA256 = "Deadletter-Document-Sha256"
	DocumentIndex  = "Deadletter-Document-Index"
	DocumentOffset = "Deadletter-Document-Offset"
	DocumentLength = "Deadletter-Document-Length"

	// DocumentUpload, DocumentPart and DocumentManifest mark a document
	// published in parts (package dscsa/document, Manifest): each part
	// carries the upload's id and its number "<i>" (from 1); the manifest, which
	// completes the upload, carries the id and "1".
	DocumentUpload   = "Deadletter-Document-Upload"
	DocumentPart     = "Deadletter-Document-Part"
	DocumentManifest = "Deadletter-Document-Manifest"

	// Traceparent and Tracestate are the W3C trace-context headers.
	Traceparent = "traceparent"
	Tracestate  = "tracestate"

	// DownstreamIdempotencyKey is the HTTP header sent to the downstream
	// system of record.
	DownstreamIdempotencyKey = "Idempotency-Key"
)

// RedriveOf returns the redrive headers of a message on subject: the dlq id
// of the chain it replays and the replay's number. Only a replay subject
// (subjects.IsReplay), which no one but the redriver may publish to, can
// carry them; on any other subject the headers were set by a publisher and
// are ignored, so a stranger cannot write into someone else's chain.
func RedriveOf(subject string, h nats.Header) (dlqID string, count int) {
	if h == nil || !subjects.IsReplay(subject) {
		return "", 0
	}
	dlqID = h.Get(DLQID)
	count, _ = strconv.Atoi(h.Get(RedriveCount))
	return dlqID, count
}

// PublisherOf returns the publisher of a message on subject: the token
// the server wrote into an events subject (subjects.PublisherOf), or on a
// replay subject, which no one but the redriver may publish to, the
// Publisher header it copied from the original's record. On an events
// subject a Publisher header is the publisher's own and ignored.
func PublisherOf(subject string, h nats.Header) string {
	if subjects.IsReplay(subject) {
		if h == nil {
			return ""
		}
		return h.Get(Publisher)
	}
	return subjects.PublisherOf(subject)
}

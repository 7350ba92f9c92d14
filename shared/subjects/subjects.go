// Package subjects is the single source of truth for deadletter's NATS
// subjects, stream and bucket names, and consumer names. Every service and
// test builds subjects through it.
package subjects

import (
	"strconv"
	"strings"
)

// Stream and bucket names.
const (
	// EventsStream holds inbound events (Limits retention, so an event that
	// exhausts its deliveries can still be fetched by sequence) and the
	// redriver's replays (RedrivenAll), which the redriver publishes into
	// it directly; it also sources ReplaysStream, where an earlier
	// redriver left its replays.
	EventsStream = "EVENTS"
	// ReplaysStream held the replays of earlier redrivers (ReplaysAll),
	// which EVENTS sources. Nothing publishes to it any more (replays go
	// to EVENTS on RedrivenAll); it stays provisioned, and sourced, so that
	// a store upgraded in place still delivers the replays an older
	// redriver left there. Retiring it is a later step.
	ReplaysStream = "REPLAYS"
	// LedgerStream is the system of record for accepted events.
	LedgerStream = "LEDGER"
	// FailuresStream is the durable intake of the quarantiner.
	FailuresStream = "FAILURES"
	// AdvisoriesStream durably captures JetStream delivery advisories about
	// the EVENTS consumers.
	AdvisoriesStream = "ADVISORIES"
	// QuarantineStream is the WORM store of sealed quarantine records.
	QuarantineStream = "QUARANTINE"
	// IdempotencyBucket holds the commit state of every idempotency key.
	IdempotencyBucket = "IDEMPOTENCY"
	// AttemptsBucket holds the ordered transient-failure history of events
	// still being retried, keyed by EVENTS sequence.
	AttemptsBucket = "ATTEMPTS"
	// AuditStream is the WORM audit trail: the auditor's checkpoints
	// (AuditCheckpoints), the governance actions of people and services
	// (AuditActionsAll) and every payload read (AuditAccessAll).
	AuditStream = "AUDIT"
	// DrainsBucket holds the durable state of the redriver's drains.
	DrainsBucket = "DRAINS"
	// ApprovalsBucket holds the two-person approvals (package approval),
	// one key per approval: pending until a second person approves or
	// rejects it, or it expires.
	ApprovalsBucket = "APPROVALS"
	// HoldsBucket holds the legal holds (package hold), one key per hold:
	// what it holds (an event, a party or a filter), its case, who placed
	// and who lifted it.
	HoldsBucket = "HOLDS"
	// LegalHoldStream is the WORM store of the held chains' copies (the
	// auditor's), kept with no age limit when QUARANTINE has one.
	LegalHoldStream = "LEGALHOLD"
	// DocumentsBucket is the object store of the EPCIS documents the
	// validator ingested, each kept verbatim once under the hex SHA-256
	// of its bytes (DocumentObject), never overwritten: the exact
	// original bytes of every event a document held, after EVENTS
	// expired the document's message.
	DocumentsBucket = "DOCUMENTS"
)

// Consumer names.
const (
	// ValidatorConsumer is the durable pull consumer shared by every
	// validator instance.
	ValidatorConsumer = "validator"
	// FailuresConsumer is the quarantiner's durable pull consumer of
	// FAILURES.
	FailuresConsumer = "quarantiner"
	// AdvisoriesConsumer is the quarantiner's durable pull consumer of
	// ADVISORIES.
	AdvisoriesConsumer = "quarantiner-advisories"
)

// Subject roots and filters.
const (
	// EventsAll covers the events publishers send: every
	// "events.<domain>.<type>", including unknown domains, which the
	// validator quarantines.
	EventsAll = "events.>"
	// ReplaysAll covers the replays of earlier redrivers,
	// "replay.<domain>.<type>", stored in REPLAYS and sourced into EVENTS
	// with their subject and headers. Only the redriver may publish there
	// (package access), though it no longer does (see RedrivenAll). A
	// replay subject (IsReplay: this one or RedrivenAll) is the only place
	// a message can carry a redrive's Deadletter-Dlq-Id and
	// Deadletter-Redrive-Count: on an events subject those headers come
	// from a publisher and are ignored.
	ReplaysAll = "replay.>"
	// RedrivenAll covers the redriver's replays as it publishes them now,
	// straight into EVENTS: "redriven.<domain>.<type>.<dlq_id>.<n>"
	// (Redriven), one subject per replay. Only the redriver may publish
	// there (package access).
	RedrivenAll = "redriven.>"
	// LedgerAll is LEDGER's subject filter.
	LedgerAll = "ledger.>"
	// FailuresAll is FAILURES' subject filter.
	FailuresAll = "dlq.intake.>"
	// QuarantineAll is QUARANTINE's subject filter.
	QuarantineAll = "quarantine.>"
	// LegalHoldAll is LEGALHOLD's subject filter.
	LegalHoldAll = "legalhold.>"
	// AuditCheckpoints is the subject of the auditor's checkpoints (AUDIT).
	AuditCheckpoints = "audit.checkpoints"
	// AuditActionsAll covers the governance actions in AUDIT
	// (AuditAction): a drain paused, resumed or cancelled, an approval
	// requested, signed or refused, a policy changed, a hold placed or
	// lifted. Only the redriver writes them.
	AuditActionsAll = "audit.actions.>"
	// AuditAccessAll covers the access audit in AUDIT (AuditAccess): one
	// message per payload read, written by the auditor before the payload
	// is returned.
	AuditAccessAll = "audit.access.>"
	// MaxDeliveriesAdvisories matches the max-delivery advisories of the
	// validator's consumer of EVENTS, and no other consumer's: an advisory
	// of someone else's consumer says nothing about whether an event was
	// committed.
	MaxDeliveriesAdvisories = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + EventsStream + "." + ValidatorConsumer
	// TerminatedAdvisories matches the message-terminated advisories of the
	// validator's consumer of EVENTS.
	TerminatedAdvisories = "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED." + EventsStream + "." + ValidatorConsumer
)

// UnknownDomain is the domain token used for failures whose subject names
// no known domain.
const UnknownDomain = "unknown"

// Event returns the subject an event of a domain and type is published on.
// A publisher publishes there in its own account; the server stores it
// under Published, which names the publisher.
func Event(domain, eventType string) string { return "events." + domain + "." + eventType }

// Published returns the subject an event of a domain and type published
// by publisher is stored under in EVENTS:
// "events.<publisher>.<domain>.<event_type>". A publisher's account
// imports events.> mapped to PublishedBy(publisher) (package access), so
// the server writes the publisher's token: a publisher cannot choose it,
// and a subject of three tokens (Event) comes from inside the services'
// account (the break-glass admin) or a server without accounts.
func Published(publisher, domain, eventType string) string {
	return "events." + publisher + "." + domain + "." + eventType
}

// AsPublished returns subject as its publisher published it: a Published
// subject without the publisher token ("events.<domain>.<event_type>"),
// any other subject as it is. Span names use it, so the consumer's span
// is named as the publisher's.
func AsPublished(subject string) string {
	if p := PublisherOf(subject); p != "" {
		return "events." + subject[len("events.")+len(p)+1:]
	}
	return subject
}

// PublishedBy covers the events of one publisher: "events.<publisher>.>".
func PublishedBy(publisher string) string { return "events." + publisher + ".>" }

// PublisherOf returns the publisher token of an events subject of four
// tokens (Published), "" for any other subject. The publisher of a replay
// is not in its subject: see envelope.PublisherOf.
func PublisherOf(subject string) string {
	if !strings.HasPrefix(subject, "events.") {
		return ""
	}
	parts := strings.Split(subject, ".")
	if len(parts) != 4 {
		return ""
	}
	return parts[1]
}

// Replay returns the subject earlier redrivers replayed an event of a
// domain and type on, in REPLAYS (ReplaysAll). Nothing publishes there any
// more: see Redriven.
func Replay(domain, eventType string) string { return "replay." + domain + "." + eventType }

// Redriven returns the subject of replay n of chain dlqID, an event of a
// domain and type: "redriven.<domain>.<event_type>.<dlq_id>.<n>", in
// EVENTS (RedrivenAll). Each replay has a subject of its own, so its
// publish can expect the subject to be empty (a retry of a stored replay
// is refused, never stored twice). The domain and type stay the second
// and third tokens, as on an events subject. dlqID must be one subject
// token (ValidToken).
func Redriven(domain, eventType, dlqID string, n int) string {
	return "redriven." + domain + "." + eventType + "." + dlqID + "." + strconv.Itoa(n)
}

// ValidToken reports whether s can be one token of a subject: not empty,
// and no '.', wildcard, whitespace or control byte.
func ValidToken(s string) bool {
	if s == "" || s == "*" || s == ">" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '.' || c == '*' || c == '>' || c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// IsReplay reports whether subject is a replay subject: a replay of an
// earlier redriver (ReplaysAll) or one published into EVENTS directly
// (RedrivenAll). Only the redriver may publish either.
func IsReplay(subject string) bool {
	return strings.HasPrefix(subject, "replay.") || strings.HasPrefix(subject, "redriven.")
}

// ParseEvent splits "events.<domain>.<event_type>",
// "events.<publisher>.<domain>.<event_type>" (Published),
// "replay.<domain>.<event_type>" or
// "redriven.<domain>.<event_type>.<dlq_id>.<n>" (Redriven; n a positive
// number) into its domain and event type; ok is false for any other shape.
func ParseEvent(subject string) (domain, eventType string, ok bool) {
	parts := strings.Split(subject, ".")
	if len(parts) == 4 && parts[0] == "events" && parts[1] != "" {
		parts = []string{"events", parts[2], parts[3]}
	}
	switch {
	case len(parts) == 3 && (parts[0] == "events" || parts[0] == "replay"):
	case len(parts) == 5 && parts[0] == "redriven" && parts[3] != "" && positive(parts[4]):
	default:
		return "", "", false
	}
	if parts[1] == "" || parts[2] == "" {
		return "", "", false
	}
	return parts[1], parts[2], true
}

// positive reports whether s is a decimal number above zero, without
// sign or leading zero.
func positive(s string) bool {
	if s == "" || s[0] == '0' || len(s) > 9 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// DomainOf returns the domain token of an event subject, or UnknownDomain
// when the subject has no second token that is a known domain.
func DomainOf(subject string, known []string) string {
	parts := strings.SplitN(subject, ".", 3)
	if p := PublisherOf(subject); p != "" {
		parts = strings.SplitN(subject[len("events.")+len(p)+1:], ".", 2)
		parts = append([]string{"events"}, parts...)
	}
	if len(parts) >= 2 {
		for _, k := range known {
			if parts[1] == k {
				return k
			}
		}
	}
	return UnknownDomain
}

// Ledger returns the LEDGER subject of an idempotency key. One subject per
// key lets a commit be conditional on the subject being empty, so a key is
// committed at most once whatever the de-duplication window.
func Ledger(domain, key string) string { return "ledger." + domain + "." + key }

// BucketStream is the stream behind a key-value bucket.
func BucketStream(bucket string) string { return "KV_" + bucket }

// ObjectStream returns the stream behind an object store bucket.
func ObjectStream(bucket string) string { return "OBJ_" + bucket }

// ObjectsAll covers the subjects of an object store bucket's chunks and
// metadata.
func ObjectsAll(bucket string) string { return "$O." + bucket + ".>" }

// DocumentType is the event-type token of a whole EPCIS document
// published as one message: "events.dscsa.document" (stored as
// "events.<publisher>.dscsa.document"). "document" is no CBV business
// step, so it names no single event.
const DocumentType = "document"

// IsDocument reports whether an event subject carries a whole document
// of domain (Event, Published, Replay or Redriven with event type
// DocumentType).
func IsDocument(subject, domain string) bool {
	d, t, ok := ParseEvent(subject)
	return ok && d == domain && t == DocumentType
}

// BucketKey is the subject a key of a bucket is written on (a put, create
// or update of the key is a publish to it).
func BucketKey(bucket, key string) string { return "$KV." + bucket + "." + key }

// BucketKeys matches every key of a bucket.
func BucketKeys(bucket string) string { return "$KV." + bucket + ".>" }

// NotifyAll covers the notifications (package notify), one subject per
// kind: deadletter.notify.<kind>. They are core publishes (no stream).
const NotifyAll = "deadletter.notify.>"

// Notify returns the subject of the notifications of one kind.
func Notify(kind string) string { return "deadletter.notify." + kind }

// The kinds of notifications (package notify names them; the access table
// grants their subjects without importing it).
const (
	NotifyFailureGroup    = "failure_group"
	NotifyPoison          = "poison"
	NotifyDrainPaused     = "drain_paused"
	NotifyApprovalPending = "approval_pending"
	NotifyVerifyFailed    = "verify_failed"
)

// Failure returns the FAILURES intake subject of a domain.
func Failure(domain string) string { return "dlq.intake." + domain }

// Quarantine returns the subject of a quarantine chain.
func Quarantine(domain, dlqID string) string { return "quarantine." + domain + "." + dlqID }

// LegalHold is the LEGALHOLD subject of the copies of a chain's records.
func LegalHold(domain, dlqID string) string { return "legalhold." + domain + "." + dlqID }

// AuditAction is the AUDIT subject of a governance action of kind (a
// token such as "drain", "approval", "policy", "hold") on the object id
// (a drain id, an approval id, ...): "audit.actions.<kind>.<id>".
func AuditAction(kind, id string) string { return "audit.actions." + kind + "." + id }

// AuditAccess is the AUDIT subject of a payload read by user:
// "audit.access.<user>", where every byte of user that may not appear in
// a subject token (anything but ASCII letters, digits, '-' and '_') is
// '_' ("alice@example.com" reads audit.access.alice_example_com), so a
// user name never adds a token or a wildcard. The record itself holds the
// exact user name.
func AuditAccess(user string) string {
	b := []byte(user)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		b = []byte("_")
	}
	return "audit.access." + string(b)
}

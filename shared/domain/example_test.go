package domain_test

import (
	"fmt"
	"strings"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/envelope"
)

// recallNotice is the Checker of an imagined domain of product recall
// notices: the rules a document must meet beyond its JSON Schema, and the
// identity deadletter derives from it. A real domain lives in its own
// package, shared/domain/<name>, with its schema and one line in
// shared/domain/registry (docs/development.md, "Adding a domain").
type recallNotice struct{}

// Domain names the domain, its subjects (events.recall.<type>) and schema.
func (recallNotice) Domain() string { return "recall" }

// EventType derives the subject's last token from a document.
func (recallNotice) EventType(doc domain.Doc) (string, error) {
	t, ok := domain.String(doc, "notice_type")
	if !ok {
		return "", codes.Errorf(codes.SchemaValidation, "notice_type is missing")
	}
	return t, nil
}

// Check validates a schema-valid document published as eventType.
func (c recallNotice) Check(eventType string, doc domain.Doc) (envelope.Envelope, error) {
	env := c.Identify(doc)
	if t, _ := c.EventType(doc); t != eventType {
		return envelope.Envelope{}, codes.Errorf(codes.SubjectMismatch, "notice_type does not match the subject")
	}
	raw, _ := domain.String(doc, "issued_at")
	at, err := domain.ParseTime("issued_at", raw)
	if err != nil {
		return envelope.Envelope{}, err
	}
	env.EventTime = at
	return env, nil
}

// Identify derives what it can of the identity, even of a document that
// failed: the key only when every part of it is there.
func (recallNotice) Identify(doc domain.Doc) envelope.Envelope {
	env := envelope.Envelope{Domain: "recall", KeySource: "firm_id+notice_id"}
	env.EventType, _ = domain.String(doc, "notice_type")
	firm, okFirm := domain.String(doc, "firm_id")
	notice, okNotice := domain.String(doc, "notice_id")
	if okFirm {
		env.PartyID = firm
		env.OrderingKey = firm
	}
	if okFirm && okNotice {
		env.IdempotencyKey = domain.Key("recall", firm, notice)
	}
	return env
}

// A Checker turns a decoded, schema-valid document into the event's
// envelope (domain, event type, keys, UTC event time) or a coded error.
// Its idempotency key is domain.Key over the identity parts, so the same
// notice published twice has one key.
func ExampleChecker() {
	var c domain.Checker = recallNotice{}
	doc := domain.Doc{
		"notice_type": "initiated",
		"firm_id":     "Pharmacie Saint-Étienne",
		"notice_id":   "RN-2026-0042",
		"issued_at":   "2026-12-01T10:30:00+01:00",
	}
	env, err := c.Check("initiated", doc)
	fmt.Println(env.Domain, env.EventType, env.IdempotencyKey, env.EventTime.Format("2006-01-02T15:04:05Z07:00"), err)
	fmt.Println("same key again:", env.IdempotencyKey == domain.Key("recall", "Pharmacie Saint-Étienne", "RN-2026-0042"))

	// A time without a UTC offset is ambiguous: refused with its code.
	doc["issued_at"] = "2026-12-01T10:30:00"
	_, err = c.Check("initiated", doc)
	fmt.Println(codes.Of(err))

	// A document that failed still names its party and key for triage.
	partial := c.Identify(domain.Doc{"firm_id": "Müller & Söhne <Großhandel>"})
	fmt.Printf("party %q, key %q\n", partial.PartyID, partial.IdempotencyKey)
	fmt.Println(strings.HasPrefix(env.IdempotencyKey, "recall_"), len(env.IdempotencyKey))
	// Output:
	// recall initiated recall_b2e2d283621aa18722171f9c45601e1d 2026-12-01T09:30:00Z <nil>
	// same key again: true
	// UNPARSEABLE_EVENT_TIME
	// party "Müller & Söhne <Großhandel>", key ""
	// true 39
}

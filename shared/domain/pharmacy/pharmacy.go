package pharmacy

import (
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/envelope"
)

// Name is the domain name: the subject token and the schema name.
const Name = "pharmacy"

// KeySource names what the idempotency key is derived from.
const KeySource = "registrant_dea+transaction_id"

// Checker implements the pharmacy rules for the validation gate. The zero
// value is ready to use and safe for concurrent use.
type Checker struct{}

// Domain returns "pharmacy".
func (Checker) Domain() string { return Name }

// EventType returns the normalized event_type of a document, the token to
// publish it under; a missing or unknown event_type is a
// SCHEMA_VALIDATION_ERROR.
func (Checker) EventType(doc domain.Doc) (string, error) {
	s, ok := doc["event_type"].(string)
	if !ok {
		return "", codes.Errorf(codes.SchemaValidation, "event_type: required, must be a string")
	}
	t, ok := normalizeEventType(s)
	if !ok {
		return "", codes.Errorf(codes.SchemaValidation, "event_type: must be one of the pharmacy event types")
	}
	return t, nil
}

// event is the normalized content of one inventory event.
type event struct {
	eventType    string
	txID         string
	registrant   string
	ndc          string
	ndc11        string
	schedule     string
	lot          string
	counterparty string
	at           time.Time
}

// steps run in order; the first error is returned (see the package comment).
var steps = []func(e *event, doc domain.Doc) error{
	checkRequired,
	checkRegistrant,
	checkNDC,
	checkSchedule,
	checkQuantity,
	checkLot,
	checkCounterparty,
	checkTime,
	checkExpiry,
}

// Check validates a schema-valid document published with the subject token
// eventType and returns its envelope, or a *codes.Error.
func (c Checker) Check(eventType string, doc domain.Doc) (envelope.Envelope, error) {
	if doc == nil {
		return envelope.Envelope{}, codes.Errorf(codes.SchemaValidation, "/: must be an object")
	}
	t, err := c.EventType(doc)
	if err != nil {
		return envelope.Envelope{}, err
	}
	if token, _ := normalizeEventType(eventType); token != t {
		return envelope.Envelope{}, codes.Errorf(codes.SubjectMismatch,
			"subject event-type token disagrees with event_type")
	}
	e := event{eventType: t}
	for _, step := range steps {
		if err := step(&e, doc); err != nil {
			return envelope.Envelope{}, err
		}
	}
	return e.envelope(), nil
}

// orderingKey is "<registrant>.<ndc11>.<lot>": the inventory bucket one
// registrant's events move, whose order belongs to that registrant alone
// (another registrant's failing event of the same NDC and lot never holds
// it).
func orderingKey(registrant, ndc11, lot string) string {
	return registrant + "." + ndc11 + "." + lot
}

// envelope builds the envelope of a checked event.
func (e *event) envelope() envelope.Envelope {
	ids := make(map[string]string, 7)
	ids["transaction_id"] = e.txID
	ids["registrant_dea"] = e.registrant
	ids["ndc"] = e.ndc
	ids["ndc11"] = e.ndc11
	ids["dea_schedule"] = e.schedule
	if e.lot != "" {
		ids["lot"] = e.lot
	}
	if e.counterparty != "" {
		ids["counterparty_dea"] = e.counterparty
	}
	return envelope.Envelope{
		Domain:         Name,
		EventType:      e.eventType,
		IdempotencyKey: domain.Key(Name, e.registrant, e.txID),
		KeySource:      KeySource,
		OrderingKey:    orderingKey(e.registrant, e.ndc11, e.lot),
		EventTime:      e.at,
		PartyID:        e.registrant,
		Identifiers:    ids,
	}
}

package fsma

import (
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/envelope"
)

// Spec returns the FSMA 204 domain's registry entry.
func Spec() domain.Spec {
	return domain.Spec{
		Name:        Name,
		Title:       "FSMA 204 (food traceability)",
		EventTypes:  CTETypes(),
		KeySource:   KeySource,
		OrderingKey: "supplier_id.traceability_lot_code",
		PartyID:     "supplier_id",
		PartyLabel:  "supplier",
		// Traceability records are kept 2 years.
		Retention:     2 * domain.Year,
		RetentionRule: "21 CFR 1.1455(c)",
		Checker:       Checker{},
		Codes:         Codes(),
		Listed:        []string{"tlc"},
		Shown:         []string{"tlc", "event_type"},
		Unique:        unique,
		Search:        search,
		Sheet:         sheet,
	}
}

// Identify derives what it can of the identity of a document that failed
// validation, by the rules Check uses: the party id from supplier_id, the
// ordering key from supplier_id and traceability_lot_code, the event time
// from a valid event_time, and the idempotency key when all of those and a
// known cte_type are given.
func (c Checker) Identify(doc domain.Doc) envelope.Envelope {
	env := envelope.Envelope{Domain: Name}
	if doc == nil {
		return env
	}
	var e event
	e.cte, _ = c.EventType(doc)
	e.supplier, _ = domain.String(doc, fieldSupplier)
	e.tlc, _ = domain.String(doc, fieldTLC)
	if raw, ok := domain.String(doc, fieldEventTime); ok {
		e.at, _ = domain.ParseTime(fieldEventTime, raw)
	}
	env.EventType, env.PartyID, env.EventTime = e.cte, e.supplier, e.at
	if e.tlc != "" {
		env.Identifiers = map[string]string{"tlc": e.tlc} // as Check names it
	}
	if e.supplier != "" && e.tlc != "" {
		env.OrderingKey = e.supplier + "." + e.tlc
		if e.cte != "" && !e.at.IsZero() {
			env.IdempotencyKey, env.KeySource = e.key(doc), KeySource
		}
	}
	return env
}

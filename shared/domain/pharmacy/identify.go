package pharmacy

import (
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/envelope"
)

// Spec returns the pharmacy domain's registry entry.
func Spec() domain.Spec {
	return domain.Spec{
		Name:        Name,
		Title:       "pharmacy (DEA controlled-substance inventory)",
		EventTypes:  EventTypes,
		KeySource:   KeySource,
		OrderingKey: "registrant_dea.ndc11.lot",
		PartyID:     "registrant_dea",
		PartyLabel:  "registrant",
		// Every inventory and record of controlled substances is kept
		// at least 2 years.
		Retention:     2 * domain.Year,
		RetentionRule: "21 CFR 1304.04(a)",
		Checker:       Checker{},
		SecondPerson:  secondPerson,
		Codes:         Codes(),
		Listed:        []string{"transaction_id", "registrant_dea"},
		Shown:         []string{"transaction_id", "event_type", "ndc11", "lot"},
		Unique:        unique,
		Search:        search,
		Sheet:         sheet,
	}
}

// Identify derives what it can of the identity of a document that failed
// validation, by the rules Check uses: the idempotency key when
// registrant_dea is a valid DEA number and transaction_id is given, the
// party id from a valid registrant_dea, the ordering key from a valid
// registrant_dea and ndc (and lot), the event time from a valid occurred_at.
func (c Checker) Identify(doc domain.Doc) envelope.Envelope {
	env := envelope.Envelope{Domain: Name}
	if doc == nil {
		return env
	}
	env.EventType, _ = c.EventType(doc)
	e := event{eventType: env.EventType}
	e.txID, _ = required(doc, "transaction_id", "")
	_ = checkRegistrant(&e, doc)
	_ = checkNDC(&e, doc)
	e.lot, _ = optional(doc, "lot", "")
	_ = checkTime(&e, doc)
	env.PartyID = e.registrant
	if e.registrant != "" && e.txID != "" {
		env.IdempotencyKey, env.KeySource = domain.Key(Name, e.registrant, e.txID), KeySource
	}
	if e.registrant != "" && e.ndc11 != "" {
		env.OrderingKey = orderingKey(e.registrant, e.ndc11, e.lot)
	}
	env.EventTime = e.at
	env.Identifiers = partialIdentifiers(map[string]string{"transaction_id": e.txID, "registrant_dea": e.registrant})
	return env
}

// partialIdentifiers returns the non-empty members of ids (nil when none):
// the identifiers a failed event's first record lists (transaction id and
// registrant, as Check names them).
func partialIdentifiers(ids map[string]string) map[string]string {
	for k, v := range ids {
		if v == "" {
			delete(ids, k)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return ids
}

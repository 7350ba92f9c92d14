// Package pharmacy holds the rules of the pharmacy domain: the perpetual
// inventory of DEA controlled substances kept by a registrant (a pharmacy,
// hospital or other DEA registrant). Events are published on
// "events.pharmacy.<event_type>" and described by
// schemas/pharmacy.schema.json; the schema gives the generic shape and this
// package checks every field that has a dedicated error code.
//
// # Event types and the sign of quantity_delta
//
// quantity_delta is a decimal string (at most 15 integer and 6 fractional
// digits, optional leading sign, no exponent) giving the change of the
// on-hand quantity, in unit, that the event records:
//
//	event_type    quantity_delta   meaning
//	receive       > 0              received from a supplier (DEA Form 222 / CSOS for Schedule II)
//	transfer_in   > 0              received from another registrant
//	return        > 0              returned to stock (e.g. a prescription never picked up)
//	dispense      < 0              dispensed to a patient
//	transfer_out  < 0              sent to another registrant, including a supplier or reverse distributor
//	waste         < 0              wasted or destroyed (witnessed waste, DEA Form 41)
//	adjust        != 0             a correction, either sign
//	count         any, even 0      the difference a physical count found against the book
//	                               quantity (0: the count agreed)
//
// A zero delta where a sign is required, or the wrong sign, is
// QUANTITY_SIGN_MISMATCH. A quantity_delta that is a JSON number or not a
// plain decimal string is INVALID_QUANTITY.
//
// # Checks, in order (the first failure is returned)
//
//  1. event_type against the subject token, both trimmed and lower-cased:
//     SUBJECT_MISMATCH.
//  2. transaction_id and the other schema-required fields, for callers
//     that skip the schema: SCHEMA_VALIDATION_ERROR.
//  3. registrant_dea: INVALID_DEA_NUMBER (see [ValidateDEA]).
//  4. ndc: INVALID_NDC (see [NormalizeNDC]).
//  5. dea_schedule, one of II, IIN, III, IIIN, IV, V (trimmed,
//     upper-cased): INVALID_DEA_SCHEDULE. Schedule I substances are not held
//     in a pharmacy inventory and are rejected the same way.
//  6. quantity_delta: INVALID_QUANTITY, then QUANTITY_SIGN_MISMATCH.
//  7. Schedule II and IIN: a lot on every event, counts and adjustments
//     included, because Schedule II inventory is kept per lot: MISSING_LOT.
//  8. Schedule II and IIN transfer_in and transfer_out: counterparty_dea:
//     MISSING_COUNTERPARTY. A counterparty_dea that is present, on any
//     event, must be a valid DEA number: INVALID_DEA_NUMBER.
//  9. occurred_at, RFC 3339 with an offset, normalized to UTC:
//     UNPARSEABLE_EVENT_TIME.
//  10. expiry, when present, a calendar date "YYYY-MM-DD":
//     SCHEMA_VALIDATION_ERROR (there is no dedicated code).
//
// The optional fields lot, expiry and counterparty_dea may be absent, null
// or an empty string; all three mean "not given". drug_name, the name on
// the label, is optional and informational: it takes no part in the
// identity, is not checked against the NDC and is shown in the pharmacy
// sheet of an export. Error details name the field and the rule, never the
// value.
//
// # Envelope
//
//   - EventType: the normalized event_type.
//   - IdempotencyKey: domain.Key("pharmacy", registrant_dea, transaction_id)
//     with registrant_dea upper-cased and transaction_id trimmed; KeySource
//     "registrant_dea+transaction_id". An inventory transaction id is
//     unique within one registrant's system only, so the registrant is part
//     of the identity: two pharmacies' id spaces never collide, and a
//     re-send of the same transaction (whatever its formatting, offset or
//     field order) maps to the same key.
//   - OrderingKey: "<registrant_dea>.<ndc11>.<lot>", the inventory bucket
//     the event moves, one registrant's: another registrant's failing event
//     of the same NDC and lot never holds it; "<registrant_dea>.<ndc11>."
//     when the event has no lot (allowed below Schedule II).
//   - EventTime: occurred_at in UTC.
//   - PartyID: registrant_dea.
//   - Identifiers: "transaction_id", "registrant_dea", "ndc" (as given),
//     "ndc11", "dea_schedule", plus "lot" and "counterparty_dea" when
//     present.
package pharmacy

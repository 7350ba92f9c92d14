package dscsa

import (
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/dscsa/eventhash"
	"github.com/deadletter/deadletter/shared/envelope"
)

// Spec returns the DSCSA domain's registry entry.
func Spec() domain.Spec {
	return domain.Spec{
		Name:        Name,
		Title:       "DSCSA (GS1 EPCIS 2.0 ObjectEvents and AggregationEvents)",
		EventTypes:  BizSteps(),
		KeySource:   "eventID, else the CBV 2.0 event hash ID",
		OrderingKey: "the container: the first SSCC of epcList, an aggregation's parent (SSCC or SGTIN); else gtin14.serial of the first EPC",
		PartyID:     "owning_party source, else bizLocation GLN",
		PartyLabel:  "GLN or company prefix",
		// Transaction information, history and statements are kept
		// at least 6 years after the transaction.
		Retention:     6 * domain.Year,
		RetentionRule: "21 U.S.C. 360eee-1 (FD&C Act 582(b)(1)(A), (c)(1)(A), (d)(1)(A), (e)(1)(A))",
		Checker:       Checker{},
		Content:       contentIdentity(),
		Codes:         Codes(),
		Listed:        []string{"lot", "event_type"},
		Shown:         []string{"gtin", "serial", "sscc", "lot", "event_type"},
		Unique:        unique,
		Search:        search,
		Sheet:         sheet,
	}
}

// Identify derives what it can of the identity of a document that failed
// validation, by the rules Check uses: the ordering key from a valid first
// EPC (an aggregation's valid parentID, else its first child), the party id
// from the owning_party source (else a valid bizLocation), the event time
// from a valid eventTime, the ILMD lot as written (Identifiers "lot"), and
// the idempotency key from the eventID (with a
// valid declarationTime when it carries an errorDeclaration), or, without
// an eventID, from the hashed identity when every part of it is valid.
func (Checker) Identify(doc domain.Doc) envelope.Envelope {
	env := envelope.Envelope{Domain: Name}
	if doc == nil {
		return env
	}
	ev := event{}
	ev.hashID, env.EventHashID = eventhash.IDs(doc, nil, eventhash.FromJSON)
	var err error
	bizOK := true
	if ev.bizStep, err = bizStep(doc); err != nil {
		bizOK = false
	}
	env.EventType = ev.bizStep
	ev.time, err = eventTime(doc)
	timeOK := err == nil
	env.EventTime = ev.time
	ev.typ, _ = doc["type"].(string)
	ev.action, _ = domain.String(doc, "action")
	var epcsOK bool
	switch ev.typ {
	case typeAggregation:
		epcsOK = ev.readAggregation(doc) == nil
		if p := ev.parent.id(); p != "" {
			env.OrderingKey = p
		} else if len(ev.epcs) > 0 && epcsOK {
			env.OrderingKey = orderingEPC(ev.epcs).id()
		}
	default:
		ev.epcs, err = readEPCs(doc)
		epcsOK = err == nil
		if epcsOK {
			env.OrderingKey = orderingEPC(ev.epcs).id()
		}
	}
	rp, rpErr := readLocation(doc, "readPoint", "readPoint.id")
	bl, blErr := readLocation(doc, "bizLocation", "bizLocation.id")
	ev.readPoint, ev.bizLocation = rp, bl
	env.PartyID = owningParty(doc, bl)
	var declErr error
	ev.declared, ev.corrected, declErr = declarationTime(doc)
	ev.eventID, _ = domain.String(doc, "eventID")
	if d, ok := domain.String(doc, "disposition"); ok {
		ev.disposition = normDisposition(d)
	}
	if lot := lotAsWritten(doc); lot != "" {
		// Listed (Spec.Listed), so that a recall by lot finds the event
		// whatever it failed on.
		env.Identifiers = map[string]string{"lot": lot}
	}
	switch {
	case declErr != nil:
		// A correction whose declaration time is unknown: its key is not.
	case ev.eventID != "":
		env.IdempotencyKey, env.KeySource = ev.key()
	case bizOK && timeOK && epcsOK && rpErr == nil && blErr == nil &&
		(ev.typ == typeObject || ev.typ == typeAggregation):
		env.IdempotencyKey, env.KeySource = ev.key()
	}
	return env
}

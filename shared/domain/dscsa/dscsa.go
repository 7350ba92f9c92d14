// Package dscsa holds the rules of the DSCSA domain: serialized
// pharmaceutical supply-chain events as trading partners exchange them, GS1
// EPCIS 2.0 ObjectEvents and AggregationEvents in the JSON / JSON-LD
// binding, one event per message, published on events.dscsa.<bizStep> where
// <bizStep> is the bare CBV word ("commissioning", "packing", "shipping",
// ...).
//
// # What is accepted
//
// bizStep and disposition may be bare CBV words, CBV URNs
// (urn:epcglobal:cbv:bizstep:shipping), CBV 2.0 web URIs
// (https://ref.gs1.org/cbv/BizStep-shipping) or compact IRIs
// (cbv:BizStep-shipping); all are normalized to the bare word. A bizStep
// outside the CBV 2.0 vocabulary is INVALID_BIZSTEP (it could not name a
// subject); a disposition of the sender's own (a URI outside the CBV's
// namespaces) is kept as sent, one written as a CBV word that is none is
// INVALID_DISPOSITION. epcList entries are
// serialized items, SGTIN EPC URNs (prefix in any case, company prefix 6
// to 12 digits, company prefix + indicator/item reference 13 digits,
// percent-encoded serial of 1 to 20 GS1 set-82 characters) or GS1 Digital
// Link URIs on any host, /01/<GTIN-14>/21/<serial>, where other AIs (/10/
// lot, /22/) and the query string do not take part in identity; or
// logistic units (pallets, totes, mixed cases), SSCC EPC URNs
// (urn:epc:id:sscc:CompanyPrefix.SerialReference) or Digital Link
// /00/<SSCC-18> URIs, check digit verified. Shipments are usually sent at
// the pallet level: the business steps that move, hand over, hold, count
// or check goods (shipping, receiving, departing, arriving, accepting,
// consigning, loading, unloading, transporting, staging_outbound, storing,
// holding, inspecting, entering_exiting, cycle_counting, stock_taking,
// void_shipping) take SSCCs beside SGTINs at any packing level, and so do
// packing and unpacking in an AggregationEvent; the steps that make,
// change or end serialized items (commissioning, decommissioning,
// dispensing, destroying...) take SGTINs only (keys.go). readPoint.id and
// bizLocation.id are SGLN URNs or Digital Link /414/<GLN>[/254/<ext>]
// URIs. ILMD lot and expiry are read from cbvmda:lotNumber and
// cbvmda:itemExpirationDate or their URN, ref.gs1.org/cbv, gs1: and
// gs1.org/voc forms. @context is optional and ignored.
//
// An AggregationEvent (packing, unpacking, shipping, receiving a hierarchy
// of containers) names its container in parentID, an SSCC (URN
// urn:epc:id:sscc:CompanyPrefix.SerialReference or Digital Link
// /00/<SSCC-18>) or an SGTIN (a homogeneous case), and its serialized
// contents in childEPCs, SGTINs and SSCCs as in epcList. parentID is required for ADD
// and DELETE; childEPCs must be non-empty for ADD and may be empty for
// DELETE (all contents removed); an OBSERVE names one or the other. Every
// other event type (TransformationEvent, TransactionEvent,
// AssociationEvent, an EPCISDocument, an unknown type) is refused by
// Precheck, before the schema.
//
// # Codes
//
//   - UNSUPPORTED_EVENT_TYPE: a "type" other than ObjectEvent or
//     AggregationEvent; the detail names it (an unknown one quoted, cut to
//     64 bytes).
//   - INVALID_PARENT_ID: an AggregationEvent ADD or DELETE without
//     parentID, or a parentID that is not an SSCC or SGTIN URN or Digital
//     Link (the detail names another GS1 key: "an SGLN (a location) is not
//     a container"), is malformed, or has a wrong check digit.
//   - INVALID_AGGREGATION: the parentID among its own childEPCs, a child
//     listed twice (in any notation), an OBSERVE naming neither.
//   - INVALID_BIZSTEP: bizStep missing or not a CBV 2.0 business step.
//   - SUBJECT_MISMATCH: the subject's token is not the normalized bizStep.
//   - UNPARSEABLE_EVENT_TIME: eventTime missing or unparseable; eventTime
//     without an offset and no eventTimeZoneOffset; an eventTimeZoneOffset
//     not of the form ±hh:mm; an errorDeclaration without a valid
//     declarationTime.
//   - INVALID_EPC: epcList missing or empty (a DSCSA ObjectEvent must name
//     serialized items or logistic units; quantityList alone is
//     lot-level), childEPCs missing or empty in an ADD aggregation, an
//     entry that is not a string or not an EPC URN or Digital Link URI at
//     all (an EPC tag URN, a pattern, an unknown scheme included), a
//     malformed SGTIN, SSCC or Digital Link path, an SSCC with a wrong
//     check digit, or a serial that is not 1 to 20 characters of GS1 set 82
//     once percent-decoded.
//   - UNSUPPORTED_GS1_KEY: an entry of epcList or childEPCs that is another
//     GS1 key (or EPC scheme) than an SGTIN or SSCC: a GRAI, a GIAI, an
//     SGLN, a PGLN, an LGTIN class...; the detail names it and, where the
//     event has one, the place it belongs (quantityList, readPoint).
//   - KEY_NOT_FOR_BIZSTEP: an SSCC named by an event whose business step
//     takes serialized items only (commissioning an SSCC); the detail names
//     the entry, the step and the steps that take SSCCs.
//   - MISSING_SERIAL: an SGTIN URN or Digital Link URI without a serial.
//   - INVALID_GTIN: a Digital Link GTIN that is not 14 digits (a 13-digit
//     GTIN lost its leading zero: never padded).
//   - GTIN_CHECK_DIGIT_FAILED: a Digital Link GTIN-14 with a wrong check
//     digit (a GTIN rebuilt from an SGTIN gets a computed one).
//   - INVALID_DISPOSITION: a disposition written as a CBV disposition that
//     is none: a bare word outside the CBV 2.0 vocabulary (in_transt), or
//     an unknown word in the CBV's URN, web URI or compact IRI form
//     (urn:epcglobal:cbv:disp:in-transit). A URI of the sender's own
//     (https://ns.example.com/disp/held, urn:example:disp:qa) is kept as
//     sent.
//   - INVALID_LOCATION: a readPoint/bizLocation id that is empty, not a
//     string, not an SGLN or Digital Link /414/ URI, malformed, or whose
//     GLN check digit is wrong (INVALID_GLN is left to the FSMA domain).
//   - MISSING_LOT / MISSING_EXPIRY: a commissioning event without lot or
//     expiry in ilmd. A lot that is not a string, or an expiry that is not
//     an xsd:date, is reported with the same codes in any event.
//
// # Envelope
//
// EventType is the normalized bizStep word. EventHashID is the event's
// CBV 2.0 EPCIS event hash ID as the reference implementation computes it
// (eventhash.ReferenceID, the one a person sees), computed for every event
// that parses as a JSON object, valid or not (Identify sets it too).
// IdempotencyKey is domain.Key("dscsa", "eventID", eventID) (KeySource
// "eventID") when the event has a non-empty eventID; otherwise
// domain.Key("dscsa", "eventHashID", its normalized event hash ID,
// eventhash.KeyID, which differs from EventHashID only where the
// reference tells the XML and JSON forms of one event apart) (KeySource
// "eventHashID"), so that the same event with its lists in another order,
// other namespace prefixes, CBV URNs or web URIs, EPC URNs or Digital
// Links, or its eventTime in another offset, gets one key, and an event
// whose content differs in any field of the hash (including
// eventTimeZoneOffset, business transactions, sources and destinations,
// ILMD and extensions) another. An event carrying an errorDeclaration (an
// EPCIS correction, which repeats the eventID, and has the event hash ID,
// of the event it retracts) appends "errorDeclaration" and the
// declarationTime in UTC to either key, and its KeySource gains
// "+errorDeclaration": without that, the retraction would be taken for a
// duplicate of the original.
//
// Keys of events stored before the event hash ID (KeySource
// "hash(identity)", derived from a hash of type, time, action, bizStep,
// disposition, locations and EPCs) are not re-derived: a redrive of such
// an event gets its new key, and the same event published again after the
// change is not recognised as a duplicate of one committed under the old
// key. Events with an eventID keep their keys.
//
// OrderingKey is the event's container when it names one: the first SSCC
// of epcList in document order (so that a pallet's packing, shipping,
// receiving and unpacking replay in order), else "<gtin14>.<serial>" of
// its first EPC (the key of an event of serialized items is unchanged);
// for an AggregationEvent, its parent's identity, else its first SSCC
// child, else its first child's. PartyID is the source of the first sourceList entry of
// type owning_party (any CBV form), as a GLN when it is a PGLN, SGLN or
// Digital Link /417/ or /414/ URI and as sent otherwise; else the
// bizLocation GLN; else empty. Identifiers: "gtin" and "serial" of the
// first SGTIN, "sscc" of the first SSCC, "lot" and "expiry" (YYYY-MM-DD)
// when present, "read_point" and "biz_location" when present,
// "epc_count". An AggregationEvent's are "parent_id" and "parent_type"
// ("sscc" or "sgtin") when it has a parent, "child_count", "gtin" and
// "serial" of its first SGTIN child when it has one, "read_point" and
// "biz_location".
package dscsa

import (
	"strconv"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/dscsa/eventhash"
	"github.com/deadletter/deadletter/shared/envelope"
)

// Name is the domain's name, its subject token and its key prefix.
const Name = "dscsa"

// commissioning is the business step that must carry lot and expiry.
const commissioning = "commissioning"

// Checker implements the DSCSA rules. The zero value is ready to use and
// safe for concurrent use.
type Checker struct{}

// Domain returns "dscsa".
func (Checker) Domain() string { return Name }

// EventType returns the subject token of a document: its bizStep as a bare
// CBV word.
func (Checker) EventType(doc domain.Doc) (string, error) {
	return bizStep(doc)
}

// Check validates a schema-valid EPCIS ObjectEvent published with the given
// subject token and returns its envelope, or a *codes.Error.
func (Checker) Check(eventType string, doc domain.Doc) (envelope.Envelope, error) {
	return check(eventType, doc, eventhash.FromJSON)
}

// CheckXML is Check of an event read from an XML document
// (domain.XMLChecker): its shown event hash ID is the reference's for the
// XML form; its key is the same as the JSON form's.
func (Checker) CheckXML(eventType string, doc domain.Doc) (envelope.Envelope, error) {
	return check(eventType, doc, eventhash.FromXML)
}

// check is Check of an event sent in form from.
func check(eventType string, doc domain.Doc, from eventhash.Origin) (envelope.Envelope, error) {
	ev := event{from: from}
	if err := ev.read(eventType, doc); err != nil {
		return envelope.Envelope{}, err
	}
	return ev.envelope(), nil
}

// event is the normalized content of a valid event.
type event struct {
	eventID     string
	bizStep     string
	disposition string
	action      string
	time        time.Time
	declared    time.Time // errorDeclaration.declarationTime
	corrected   bool      // has an errorDeclaration
	typ         string    // typeObject or typeAggregation
	epcs        []epc     // epcList, or an aggregation's childEPCs
	parent      parent    // an aggregation's parentID (zero when absent)
	readPoint   location
	bizLocation location
	ilmd        lotExpiry
	party       string
	hashID      string           // the CBV 2.0 event hash ID the key is of (eventhash.KeyID)
	refID       string           // the one a person sees (eventhash.ReferenceID)
	from        eventhash.Origin // the form the event was sent in
}

// read fills ev from the document, checking it in a fixed order so that a
// document with one fault yields that fault's code.
func (ev *event) read(eventType string, doc domain.Doc) error {
	ev.typ, _ = doc["type"].(string)
	if ev.typ != typeObject && ev.typ != typeAggregation {
		if err := precheckType(doc); err != nil {
			return err
		}
		return codes.Errorf(codes.SchemaValidation, "type must be ObjectEvent or AggregationEvent")
	}
	var err error
	if ev.bizStep, err = bizStep(doc); err != nil {
		return err
	}
	if token, ok := normBizStep(eventType); !ok || token != ev.bizStep {
		return codes.Errorf(codes.SubjectMismatch,
			"subject event type does not match the normalized bizStep")
	}
	if ev.time, err = eventTime(doc); err != nil {
		return err
	}
	if ev.declared, ev.corrected, err = declarationTime(doc); err != nil {
		return err
	}
	ev.action, _ = domain.String(doc, "action")
	if ev.typ == typeAggregation {
		if err = ev.readAggregation(doc); err != nil {
			return err
		}
	} else if ev.epcs, err = readEPCs(doc); err != nil {
		return err
	}
	if err = ev.checkKeys(); err != nil {
		return err
	}
	if ev.readPoint, err = readLocation(doc, "readPoint", "readPoint.id"); err != nil {
		return err
	}
	if ev.bizLocation, err = readLocation(doc, "bizLocation", "bizLocation.id"); err != nil {
		return err
	}
	if ev.typ == typeObject {
		if ev.ilmd, err = readILMD(doc); err != nil {
			return err
		}
		if err = ev.checkCommissioning(); err != nil {
			return err
		}
	}
	if ev.disposition, err = readDisposition(doc); err != nil {
		return err
	}
	ev.eventID, _ = domain.String(doc, "eventID")
	ev.party = owningParty(doc, ev.bizLocation)
	ev.hashID, ev.refID = eventhash.IDs(doc, nil, ev.from)
	return nil
}

// bizStep returns the normalized bizStep of a document.
func bizStep(doc domain.Doc) (string, error) {
	s, ok := domain.String(doc, "bizStep")
	if !ok {
		return "", codes.Errorf(InvalidBizStep, "bizStep is missing")
	}
	w, ok := normBizStep(s)
	if !ok {
		return "", codes.Errorf(InvalidBizStep,
			"bizStep must be a CBV 2.0 business step (bare word, urn:epcglobal:cbv:bizstep: or https://ref.gs1.org/cbv/BizStep- form)")
	}
	return w, nil
}

// readEPCs parses every entry of epcList.
func readEPCs(doc domain.Doc) ([]epc, error) {
	list, ok := domain.Array(doc, "epcList")
	if !ok || len(list) == 0 {
		return nil, codes.Errorf(InvalidEPC,
			"epcList is missing or empty: a DSCSA ObjectEvent must list serialized items")
	}
	epcs := make([]epc, len(list))
	var cache gtinCache
	for i, v := range list {
		s, ok := v.(string)
		if !ok {
			return nil, codes.Errorf(InvalidEPC, "epcList[%d]: must be a string", i)
		}
		e, err := parseEPC(where{"epcList", i}, s, &cache)
		if err != nil {
			return nil, err
		}
		epcs[i] = e
	}
	return epcs, nil
}

// readLocation parses doc[field].id (idField names it in details); an
// absent field is the empty location.
func readLocation(doc domain.Doc, field, idField string) (location, error) {
	o, ok := domain.Object(doc, field)
	if !ok {
		return location{}, nil
	}
	id, ok := domain.String(o, "id")
	if !ok {
		return location{}, codes.Errorf(InvalidLocation, "%s is missing or not a string", idField)
	}
	return parseLocation(idField, id)
}

// checkCommissioning requires lot and expiry on a commissioning event.
func (ev *event) checkCommissioning() error {
	if ev.bizStep != commissioning {
		return nil
	}
	if ev.ilmd.lot == "" {
		return codes.Errorf(codes.MissingLot,
			"a commissioning event needs ilmd lotNumber")
	}
	if ev.ilmd.expiry == "" {
		return codes.Errorf(MissingExpiry,
			"a commissioning event needs ilmd itemExpirationDate")
	}
	return nil
}

// owningParty returns the first owning_party source (as a GLN when it is
// one), else the bizLocation GLN, else "".
func owningParty(doc domain.Doc, bizLocation location) string {
	list, _ := domain.Array(doc, "sourceList")
	for _, v := range list {
		src, ok := v.(map[string]any)
		if !ok {
			continue
		}
		t, _ := domain.String(src, "type")
		if normSDT(t) != "owning_party" {
			continue
		}
		s, ok := domain.String(src, "source")
		if !ok {
			continue
		}
		if gln, ok := partyGLN(s); ok {
			return gln
		}
		return s
	}
	return bizLocation.gln
}

// envelope builds the event's envelope.
func (ev *event) envelope() envelope.Envelope {
	if ev.typ == typeAggregation {
		return ev.aggregationEnvelope()
	}
	ordering := orderingEPC(ev.epcs).id()
	ids := make(map[string]string, 8)
	if item, ok := firstItem(ev.epcs); ok {
		ids["gtin"] = item.gtin
		ids["serial"] = item.serial
	}
	putNonEmpty(ids, "sscc", firstSSCC(ev.epcs))
	ids["epc_count"] = strconv.Itoa(len(ev.epcs))
	putNonEmpty(ids, "lot", ev.ilmd.lot)
	putNonEmpty(ids, "expiry", ev.ilmd.expiry)
	putNonEmpty(ids, "read_point", ev.readPoint.id())
	putNonEmpty(ids, "biz_location", ev.bizLocation.id())
	key, source := ev.key()
	return envelope.Envelope{
		Domain:         Name,
		EventType:      ev.bizStep,
		IdempotencyKey: key,
		KeySource:      source,
		OrderingKey:    ordering,
		EventTime:      ev.time,
		PartyID:        ev.party,
		EventHashID:    ev.refID,
		Identifiers:    ids,
	}
}

func putNonEmpty(m map[string]string, k, v string) {
	if v != "" {
		m[k] = v
	}
}

// key derives the idempotency key and names its source (see the package
// documentation).
func (ev *event) key() (key, source string) {
	parts := make([]string, 0, 4)
	if ev.eventID != "" {
		parts = append(parts, "eventID", ev.eventID)
		source = "eventID"
	} else {
		parts = append(parts, "eventHashID", ev.hashID)
		source = "eventHashID"
	}
	if ev.corrected {
		parts = append(parts, "errorDeclaration", ev.declared.Format(time.RFC3339Nano))
		source += "+errorDeclaration"
	}
	return domain.Key(Name, parts...), source
}

package dscsa

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gs1"
)

// The EPCIS event types the domain accepts.
const (
	typeObject      = "ObjectEvent"
	typeAggregation = "AggregationEvent"
)

// otherEPCISTypes are the EPCIS 1.2 / 2.0 event and document types the
// domain refuses by name (UNSUPPORTED_EVENT_TYPE), with the reason.
var otherEPCISTypes = map[string]string{
	"TransformationEvent":     "an EPCIS event type the DSCSA domain does not accept",
	"TransactionEvent":        "an EPCIS event type the DSCSA domain does not accept",
	"AssociationEvent":        "an EPCIS event type the DSCSA domain does not accept",
	"QuantityEvent":           "an EPCIS 1.x event type removed in EPCIS 2.0",
	"EPCISDocument":           "an EPCIS document, not one event: publish its events one per message",
	"EPCISQueryDocument":      "an EPCIS query document, not one event: publish its events one per message",
	"EPCISMasterDataDocument": "an EPCIS master-data document, not an event",
}

// maxTypeInDetail bounds how much of an unknown type a detail quotes.
const maxTypeInDetail = 64

// Precheck refuses a document whose "type" is a string naming anything but
// an ObjectEvent or an AggregationEvent with UNSUPPORTED_EVENT_TYPE, before
// schema validation (whose enum error would not name the type). A missing
// or non-string type is left to the schema.
func (Checker) Precheck(doc domain.Doc) error { return precheckType(doc) }

func precheckType(doc domain.Doc) error {
	t, ok := doc["type"].(string)
	if !ok || t == typeObject || t == typeAggregation {
		return nil
	}
	if why, known := otherEPCISTypes[t]; known {
		return codes.Errorf(UnsupportedEventType,
			"type %s is %s (ObjectEvent and AggregationEvent are accepted)", t, why)
	}
	q := t
	if len(q) > maxTypeInDetail {
		q = q[:maxTypeInDetail]
	}
	return codes.Errorf(UnsupportedEventType,
		"type %s is not an EPCIS event type (ObjectEvent and AggregationEvent are accepted)", strconv.QuoteToASCII(q))
}

// ssccPrefix is the EPC pure-identity URN prefix of an SSCC.
const ssccPrefix = "urn:epc:id:sscc:"

// parent is an AggregationEvent's container: an SSCC (a pallet, tote or
// mixed case) or an SGTIN (a homogeneous case). The zero value is "no
// parent".
type parent struct {
	sscc string // 18 digits, or ""
	item epc    // when sscc is ""
}

// id returns the container's normalized identity: the SSCC-18, or
// "<gtin14>.<serial>"; "" when there is none.
func (p parent) id() string {
	switch {
	case p.sscc != "":
		return p.sscc
	case p.item.gtin != "":
		return p.item.id()
	}
	return ""
}

// kind names the container's identifier type ("sscc" or "sgtin").
func (p parent) kind() string {
	switch {
	case p.sscc != "":
		return "sscc"
	case p.item.gtin != "":
		return "sgtin"
	}
	return ""
}

// is reports whether the container is the list entry e.
func (p parent) is(e epc) bool {
	if p.sscc != "" {
		return e.sscc == p.sscc
	}
	return p.item == e
}

// readAggregation reads an AggregationEvent's parentID and childEPCs: a
// parentID is required for ADD and DELETE (EPCIS 2.0, 7.4.3) and, when
// present, must be a valid SSCC or SGTIN; childEPCs are SGTINs, required
// (non-empty) for ADD; an OBSERVE must name a parent or children. A parent
// among its own children, or a child listed twice, is INVALID_AGGREGATION.
func (ev *event) readAggregation(doc domain.Doc) error {
	var cache gtinCache
	s, hasParent := domain.String(doc, "parentID")
	if v, present := doc["parentID"]; present && !hasParent {
		if _, isString := v.(string); !isString {
			return codes.Errorf(InvalidParentID, "parentID must be a string")
		}
	}
	if hasParent {
		p, err := parseParent(s, &cache)
		if err != nil {
			return err
		}
		ev.parent = p
	} else if ev.action == "ADD" || ev.action == "DELETE" {
		return codes.Errorf(InvalidParentID,
			"an AggregationEvent with action %s needs a parentID", ev.action)
	}
	list, _ := domain.Array(doc, "childEPCs")
	if len(list) == 0 {
		switch {
		case ev.action == "ADD":
			return codes.Errorf(InvalidEPC,
				"childEPCs is missing or empty: a DSCSA AggregationEvent ADD must list serialized children")
		case !hasParent:
			return codes.Errorf(InvalidAggregation,
				"an AggregationEvent must name a parentID or childEPCs")
		}
		return nil
	}
	ev.epcs = make([]epc, len(list))
	for i, v := range list {
		s, ok := v.(string)
		if !ok {
			return codes.Errorf(InvalidEPC, "childEPCs[%d]: must be a string", i)
		}
		e, err := parseEPC(where{"childEPCs", i}, s, &cache)
		if err != nil {
			return err
		}
		if hasParent && ev.parent.is(e) {
			return codes.Errorf(InvalidAggregation, "childEPCs[%d]: is the parentID itself", i)
		}
		ev.epcs[i] = e
	}
	return checkDistinct(ev.epcs)
}

// checkDistinct refuses a child listed twice (by normalized identity, so an
// SGTIN URN and its Digital Link are the same child).
func checkDistinct(epcs []epc) error {
	if len(epcs) < 2 {
		return nil
	}
	sorted := slices.Clone(epcs)
	slices.SortFunc(sorted, compareEPC)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return codes.Errorf(InvalidAggregation, "childEPCs lists the same item twice")
		}
	}
	return nil
}

func compareEPC(a, b epc) int {
	if c := cmp.Compare(a.sscc, b.sscc); c != 0 {
		return c
	}
	if c := cmp.Compare(a.gtin, b.gtin); c != 0 {
		return c
	}
	return cmp.Compare(a.serial, b.serial)
}

// parseParent reads a parentID: an SSCC or SGTIN EPC URN, or a GS1
// Digital Link URI with /00/<SSCC-18> or /01/<GTIN-14>/21/<serial>. Every
// fault, check digits included, is INVALID_PARENT_ID; its detail names a
// GS1 key that is not a container (an SGLN, a GRAI...).
func parseParent(s string, cache *gtinCache) (parent, error) {
	s = strings.TrimSpace(s)
	w := where{"parentID", -1}
	if hasPrefixFold(s, ssccPrefix) {
		sscc, err := ssccFromURN(w, InvalidParentID, s[len(ssccPrefix):])
		return parent{sscc: sscc}, err
	}
	if path, ok := digitalLinkPath(s); ok {
		if ai, rest, ok := primaryKey(path); ok && ai == "00" {
			sscc, _, _ := strings.Cut(rest, "/")
			if err := checkSSCC(w, InvalidParentID, sscc); err != nil {
				return parent{}, err
			}
			return parent{sscc: sscc}, nil
		}
	}
	if k, ok := otherKey(s); ok {
		return parent{}, codes.Errorf(InvalidParentID,
			"parentID: %s is not a container: must be an SSCC or an SGTIN (EPC URN or GS1 Digital Link URI)", k)
	}
	if !hasPrefixFold(s, sgtinPrefix) {
		if _, ok := digitalLinkPath(s); !ok {
			return parent{}, codes.Errorf(InvalidParentID,
				"parentID: must be an SSCC or SGTIN EPC URN, or a GS1 Digital Link URI with /00/ or /01/ and /21/")
		}
	}
	e, err := parseEPC(w, s, cache)
	if err != nil {
		return parent{}, codes.Errorf(InvalidParentID, "%s", codes.DetailOf(err))
	}
	return parent{item: e}, nil
}

// ssccFromURN reads "CompanyPrefix.SerialReference" (17 digits together,
// the serial reference beginning with the extension digit) and builds the
// SSCC-18: extension digit + company prefix + rest of the serial reference
// + computed check digit. A fault is code (the field's).
func ssccFromURN(w where, code codes.Code, s string) (string, error) {
	cp, ref, _ := strings.Cut(s, ".")
	if !allDigits(cp) || len(cp) < 6 || len(cp) > 12 || !allDigits(ref) || len(cp)+len(ref) != 17 {
		return "", codes.Errorf(code,
			"%s: SSCC company prefix (6 to 12 digits) + serial reference must be 17 digits", w)
	}
	var b [18]byte
	b[0] = ref[0]
	copy(b[1:], cp)
	copy(b[1+len(cp):], ref[1:])
	b[17] = gs1.CheckDigit(string(b[:17]))
	return string(b[:]), nil
}

// aggregationEnvelope builds an AggregationEvent's envelope: ordered by
// its container (so that a container's packing, shipping, receiving and
// unpacking replay in event-time order), else by its first child.
func (ev *event) aggregationEnvelope() envelope.Envelope {
	ids := make(map[string]string, 8)
	ordering := ev.parent.id()
	if ordering != "" {
		ids["parent_id"] = ordering
		ids["parent_type"] = ev.parent.kind()
	}
	ids["child_count"] = strconv.Itoa(len(ev.epcs))
	if item, ok := firstItem(ev.epcs); ok {
		ids["gtin"] = item.gtin
		ids["serial"] = item.serial
	}
	if ordering == "" && len(ev.epcs) > 0 {
		ordering = orderingEPC(ev.epcs).id()
	}
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

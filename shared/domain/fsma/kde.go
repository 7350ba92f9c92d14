package fsma

import (
	"strings"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
)

// CTE types: the cte_type values and the last token of
// "events.fsma.<cte_type>".
const (
	// Harvesting records a raw agricultural commodity harvested (1.1325(a)).
	Harvesting = "harvesting"
	// Cooling records a raw agricultural commodity cooled before initial
	// packing (1.1325(b)).
	Cooling = "cooling"
	// InitialPacking records the initial packing of a raw agricultural
	// commodity other than food obtained from a fishing vessel (1.1330).
	InitialPacking = "initial_packing"
	// FirstLandBasedReceiving records food from a fishing vessel received
	// on land for the first time (1.1335).
	FirstLandBasedReceiving = "first_land_based_receiving"
	// Shipping records food shipped (1.1340).
	Shipping = "shipping"
	// Receiving records food received (1.1345).
	Receiving = "receiving"
	// Transformation records food transformed into a new food (1.1350).
	Transformation = "transformation"
)

// kind says how the presence of a KDE is judged.
type kind uint8

const (
	text        kind = iota // a non-empty string
	place                   // a location object with a gln, or a name and an address
	amount                  // quantity: a JSON number or a non-empty string
	document                // reference_document with a type and a number
	list                    // a non-empty array
	sourceOrRef             // tlc_source (a place) or tlc_source_reference (text)
	eitherPlace             // one of several location fields naming the same place ("a or b")
)

// kde is one key data element: a field name and how it is judged present.
type kde struct {
	field string
	kind  kind
}

// The KDEs of the table below.
var (
	eventTime          = kde{"event_time", text}
	location           = kde{"location", place}
	productDescription = kde{"product_description", text}
	quantity           = kde{"quantity", amount}
	unitOfMeasure      = kde{"unit_of_measure", text}
	referenceDocument  = kde{"reference_document", document}
	tlcSource          = kde{"tlc_source", place}
	tlcSourceOrRef     = kde{"tlc_source or tlc_source_reference", sourceOrRef}
	subsequentRecip    = kde{"subsequent_recipient", place}
	harvestLocation    = kde{"harvest_location", place}
	harvesterName      = kde{"harvester_business_name", text}
	harvesterPhone     = kde{"harvester_phone", text}
	harvestDate        = kde{"harvest_date", text}
	harvestArea        = kde{"harvest_area", text}
	harvestDateStart   = kde{"harvest_date_start", text}
	harvestDateEnd     = kde{"harvest_date_end", text}
	shipFrom           = kde{"ship_from", place}
	shipTo             = kde{"ship_to", place}
	inputTLCs          = kde{"input_tlcs", list}

	// The one shipped-from location of 1.1340(a)(5) and the one
	// received-at location of 1.1345(a)(5): the schema has two fields for
	// each (location is the CTE's own place), either of which records it.
	shippedFrom = kde{"ship_from or location", eitherPlace}
	receivedAt  = kde{"ship_to or location", eitherPlace}
)

// requiredKDEs is the one table of the KDEs each CTE requires beyond
// supplier_id and traceability_lot_code (see the package comment). Its keys
// are the CTE types. Shipping follows 21 CFR 1.1340(a) and receiving
// 1.1345(a) exactly: one shipped-from and one shipped-to location each.
var requiredKDEs = map[string][]kde{
	Harvesting: {eventTime, location, productDescription, quantity, unitOfMeasure,
		subsequentRecip, referenceDocument},
	Cooling: {eventTime, location, productDescription, quantity, unitOfMeasure,
		harvestLocation, subsequentRecip, referenceDocument},
	InitialPacking: {eventTime, location, tlcSource, productDescription, quantity, unitOfMeasure,
		harvestLocation, harvesterName, harvesterPhone, harvestDate, referenceDocument},
	FirstLandBasedReceiving: {eventTime, location, tlcSource, productDescription, quantity, unitOfMeasure,
		harvestArea, harvestDateStart, harvestDateEnd, referenceDocument},
	Shipping: {eventTime, tlcSourceOrRef, productDescription, quantity, unitOfMeasure,
		shipTo, shippedFrom, referenceDocument},
	Receiving: {eventTime, tlcSourceOrRef, productDescription, quantity, unitOfMeasure,
		shipFrom, receivedAt, referenceDocument},
	Transformation: {eventTime, location, tlcSource, productDescription, quantity, unitOfMeasure,
		inputTLCs, referenceDocument},
}

// CTETypes returns the seven CTE types, in the order of the rule.
func CTETypes() []string {
	return []string{Harvesting, Cooling, InitialPacking, FirstLandBasedReceiving,
		Shipping, Receiving, Transformation}
}

// RequiredKDEs returns the field names of the KDEs a CTE type requires
// beyond supplier_id and traceability_lot_code, as MISSING_KDE details name
// them ("tlc_source or tlc_source_reference" when either will do), or nil
// for an unknown CTE type.
func RequiredKDEs(cteType string) []string {
	kdes, ok := requiredKDEs[cteType]
	if !ok {
		return nil
	}
	out := make([]string, len(kdes))
	for i, k := range kdes {
		out[i] = k.field
	}
	return out
}

// checkKDEs returns MISSING_KDE naming every required KDE of cte that doc
// lacks.
func checkKDEs(cte string, doc domain.Doc) error {
	var missing []string
	for _, k := range requiredKDEs[cte] {
		if gap := k.gap(doc); gap != "" {
			missing = append(missing, gap)
		}
	}
	if missing == nil {
		return nil
	}
	return codes.Errorf(MissingKDE, "%s requires %s", cte, strings.Join(missing, ", "))
}

// gap returns "" when the KDE is present in doc, else the name of what is
// missing.
func (k kde) gap(doc domain.Doc) string {
	switch k.kind {
	case place:
		return placeGap(doc, k.field)
	case amount:
		if !hasQuantity(doc) {
			return k.field
		}
	case document:
		return documentGap(doc)
	case list:
		if a, ok := domain.Array(doc, k.field); !ok || len(a) == 0 {
			return k.field
		}
	case eitherPlace:
		for _, field := range strings.Split(k.field, " or ") {
			if _, ok := domain.Object(doc, field); ok {
				return placeGap(doc, field)
			}
		}
		return k.field
	case sourceOrRef:
		if _, ok := domain.String(doc, fieldTLCSourceRef); ok {
			return ""
		}
		if _, ok := domain.Object(doc, fieldTLCSource); ok {
			return placeGap(doc, fieldTLCSource)
		}
		return k.field
	default:
		if _, ok := domain.String(doc, k.field); !ok {
			return k.field
		}
	}
	return ""
}

// hasQuantity reports whether quantity is a JSON number or a non-empty
// string.
func hasQuantity(doc domain.Doc) bool {
	if _, ok := domain.Number(doc, fieldQuantity); ok {
		return true
	}
	_, ok := domain.String(doc, fieldQuantity)
	return ok
}

// documentGap returns "" when reference_document has a type and a number,
// else the names of what is missing.
func documentGap(doc domain.Doc) string {
	ref, ok := domain.Object(doc, fieldReferenceDocument)
	if !ok {
		return fieldReferenceDocument
	}
	_, hasType := domain.String(ref, "type")
	_, hasNumber := domain.String(ref, "number")
	switch {
	case hasType && hasNumber:
		return ""
	case hasNumber:
		return fieldReferenceDocument + ".type"
	case hasType:
		return fieldReferenceDocument + ".number"
	}
	return fieldReferenceDocument + ".type, " + fieldReferenceDocument + ".number"
}

// quantityText returns quantity as text: the digits of a JSON number, or a
// trimmed string.
func quantityText(doc domain.Doc) (string, bool) {
	if n, ok := domain.Number(doc, fieldQuantity); ok {
		return n.String(), true
	}
	return domain.String(doc, fieldQuantity)
}

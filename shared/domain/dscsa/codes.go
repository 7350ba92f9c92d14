package dscsa

import "github.com/deadletter/deadletter/shared/codes"

// The DSCSA domain's own error codes (GS1 EPCIS 2.0). The codes every
// domain shares are in package codes; these are registered there by
// package registry (Spec().Codes).
const (
	// GTINCheckDigitFailed: a GTIN's GS1 mod-10 check digit is wrong.
	GTINCheckDigitFailed codes.Code = "GTIN_CHECK_DIGIT_FAILED"
	// InvalidGTIN: a GTIN is not 14 digits (e.g. it lost a leading zero).
	InvalidGTIN codes.Code = "INVALID_GTIN"
	// MissingSerial: an EPC yields a GTIN but no serial number.
	MissingSerial codes.Code = "MISSING_SERIAL"
	// MissingExpiry: a commissioning event has no valid expiry date.
	MissingExpiry codes.Code = "MISSING_EXPIRY"
	// InvalidEPC: an EPC is not a well-formed SGTIN or SSCC (EPC URN or
	// GS1 Digital Link URI), or the event lists none.
	InvalidEPC codes.Code = "INVALID_EPC"
	// UnsupportedGS1Key: an EPC list names a GS1 key (or another EPC
	// scheme) the domain does not take there: a GRAI, a GIAI, an SGLN, an
	// LGTIN class...; the detail names the key.
	UnsupportedGS1Key codes.Code = "UNSUPPORTED_GS1_KEY"
	// KeyNotForBizStep: an event names a key its business step does not
	// take (an SSCC in a commissioning event, which takes SGTINs only);
	// the detail names the key, the business step and those that take it.
	KeyNotForBizStep codes.Code = "KEY_NOT_FOR_BIZSTEP"
	// InvalidBizStep: the bizStep is not a CBV business step.
	InvalidBizStep codes.Code = "INVALID_BIZSTEP"
	// InvalidDisposition: the disposition is no CBV disposition but is
	// written as one (a bare word, or a word of the CBV's URN, web URI or
	// compact IRI); a URI of the sender's own is taken.
	InvalidDisposition codes.Code = "INVALID_DISPOSITION"
	// InvalidLocation: a read point or business location is not a valid
	// SGLN URN or Digital Link GLN.
	InvalidLocation codes.Code = "INVALID_LOCATION"
)

// DSCSA EPCIS event-type and aggregation codes.
const (
	// UnsupportedEventType: the EPCIS event type is not one the domain
	// accepts (e.g. TransformationEvent); the detail names it.
	UnsupportedEventType codes.Code = "UNSUPPORTED_EVENT_TYPE"
	// InvalidParentID: an AggregationEvent's parentID is missing where
	// its action needs one, or is not a valid SSCC or SGTIN (URN or GS1
	// Digital Link, check digits included).
	InvalidParentID codes.Code = "INVALID_PARENT_ID"
	// InvalidAggregation: an AggregationEvent's hierarchy is impossible
	// (a container listed among its own children, a child listed twice).
	InvalidAggregation codes.Code = "INVALID_AGGREGATION"
	// MalformedDocument: an EPCIS document (JSON or XML) cannot be read
	// into events: not well-formed, not UTF-8, a DTD, too deep, too many
	// events, or not an EPCISDocument.
	MalformedDocument codes.Code = "MALFORMED_DOCUMENT"
)

// Codes lists the domain's own codes, in documentation order.
func Codes() []codes.Info {
	return []codes.Info{
		{Code: GTINCheckDigitFailed, Meaning: "a GTIN's check digit is wrong"},
		{Code: InvalidGTIN, Meaning: "a GTIN is not 14 digits (e.g. lost a leading zero)"},
		{Code: MissingSerial, Meaning: "an EPC has no serial number"},
		{Code: MissingExpiry, Meaning: "a commissioning event has no valid expiry"},
		{Code: InvalidEPC, Meaning: "an EPC is not a well-formed SGTIN or SSCC (EPC URN or Digital Link URI)"},
		{Code: UnsupportedGS1Key, Meaning: "an EPC list names a GS1 key the domain does not take there (GRAI, GIAI, SGLN, LGTIN...; detail names it)"},
		{Code: KeyNotForBizStep, Meaning: "an event names a key its business step does not take (e.g. an SSCC commissioned)"},
		{Code: InvalidBizStep, Meaning: "the bizStep is not a CBV business step"},
		{Code: InvalidDisposition, Meaning: "the disposition is written as a CBV word but is none (a URI of your own is taken)"},
		{Code: InvalidLocation, Meaning: "a read point or business location is not a valid GLN"},
		{Code: UnsupportedEventType, Meaning: "the EPCIS event type is not accepted by the domain (detail names it)"},
		{Code: InvalidParentID, Meaning: "an aggregation's parentID is missing or not a valid SSCC or SGTIN"},
		{Code: InvalidAggregation, Meaning: "an aggregation's hierarchy is impossible (parent among its children, a child twice)"},
		{Code: MalformedDocument, Meaning: "an EPCIS document cannot be read into events (syntax, encoding, DTD, depth, size)"},
	}
}

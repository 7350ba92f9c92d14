package pharmacy

import "github.com/deadletter/deadletter/shared/codes"

// The pharmacy domain's own error codes (DEA controlled-substance
// inventory). The codes every domain shares are in package codes; these
// are registered there by package registry (Spec().Codes).
const (
	// InvalidNDC: the NDC is in none of the FDA 10-digit layouts (4-4-2,
	// 5-3-2, 5-4-1) nor the 11-digit 5-4-2 form.
	InvalidNDC codes.Code = "INVALID_NDC"
	// InvalidDEANumber: a DEA registration number has the wrong shape or
	// check digit.
	InvalidDEANumber codes.Code = "INVALID_DEA_NUMBER"
	// InvalidDEASchedule: the DEA schedule is not II, IIN, III, IIIN, IV or V.
	InvalidDEASchedule codes.Code = "INVALID_DEA_SCHEDULE"
	// QuantitySignMismatch: the quantity delta's sign contradicts the
	// event type (e.g. a positive dispense).
	QuantitySignMismatch codes.Code = "QUANTITY_SIGN_MISMATCH"
	// MissingCounterparty: a Schedule II transfer names no counterparty.
	MissingCounterparty codes.Code = "MISSING_COUNTERPARTY"
)

// Codes lists the domain's own codes, in documentation order.
func Codes() []codes.Info {
	return []codes.Info{
		{Code: InvalidNDC, Meaning: "the NDC matches no FDA layout"},
		{Code: InvalidDEANumber, Meaning: "a DEA number has the wrong shape or check digit"},
		{Code: InvalidDEASchedule, Meaning: "the DEA schedule is not II, IIN, III, IIIN, IV or V"},
		{Code: QuantitySignMismatch, Meaning: "the quantity delta's sign contradicts the event type"},
		{Code: MissingCounterparty, Meaning: "a Schedule II transfer names no counterparty"},
	}
}

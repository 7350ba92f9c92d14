package pharmacy

import "strings"

// Event types: the last token of "events.pharmacy.<event_type>".
const (
	Receive     = "receive"
	Dispense    = "dispense"
	TransferIn  = "transfer_in"
	TransferOut = "transfer_out"
	Waste       = "waste"
	Return      = "return"
	Adjust      = "adjust"
	Count       = "count"
)

// signRule is what an event type requires of the sign of quantity_delta.
type signRule int

const (
	positive signRule = iota + 1 // > 0
	negative                     // < 0
	nonZero                      // != 0
	anySign                      // anything, 0 included
)

// signRules maps each event type to its rule (see the package comment).
var signRules = map[string]signRule{
	Receive:     positive,
	TransferIn:  positive,
	Return:      positive,
	Dispense:    negative,
	TransferOut: negative,
	Waste:       negative,
	Adjust:      nonZero,
	Count:       anySign,
}

// EventTypes lists the pharmacy event types.
var EventTypes = []string{Receive, Dispense, TransferIn, TransferOut, Waste, Return, Adjust, Count}

// normalizeEventType trims and lower-cases a token; ok reports whether it
// is a pharmacy event type.
func normalizeEventType(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	_, ok := signRules[s]
	return s, ok
}

// allows reports whether the rule accepts a quantity of the given sign.
func (r signRule) allows(sign int) bool {
	switch r {
	case positive:
		return sign > 0
	case negative:
		return sign < 0
	case nonZero:
		return sign != 0
	default:
		return true
	}
}

// String describes the rule for error details.
func (r signRule) String() string {
	switch r {
	case positive:
		return "greater than zero"
	case negative:
		return "less than zero"
	case nonZero:
		return "non-zero"
	default:
		return "any value"
	}
}

// schedules are the accepted dea_schedule values: Schedules II to V, with
// "N" marking the non-narcotic Schedules II and III.
var schedules = map[string]bool{"II": true, "IIN": true, "III": true, "IIIN": true, "IV": true, "V": true}

// scheduleII reports whether a normalized schedule is II or IIN, which
// require a lot and, on transfers, a counterparty.
func scheduleII(s string) bool { return s == "II" || s == "IIN" }

package fsma

import (
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
)

// Limits of a quantity: enough for any real lot, and small enough that a
// downstream system can hold it as an exact decimal.
const (
	maxIntDigits  = 15
	maxFracDigits = 6
)

// dateLayout is the layout of the calendar-date KDEs and of the event date
// in the idempotency key.
const dateLayout = "2006-01-02"

// checkQuantity checks that quantity, when given, is a plain decimal
// greater than zero: INVALID_QUANTITY.
func checkQuantity(doc domain.Doc) error {
	s, ok := quantityText(doc)
	if !ok {
		return nil
	}
	if rule := positiveDecimal(s); rule != "" {
		return codes.Errorf(codes.InvalidQuantity, "quantity: %s", rule)
	}
	return nil
}

// positiveDecimal returns "" when s is a plain decimal greater than zero
// ("40", "12.5", "0.250"): 1 to 15 digits, optionally a point and 1 to 6
// digits; no sign, exponent, spaces or separators. Otherwise it returns the
// rule broken, never the value.
func positiveDecimal(s string) string {
	const rule = "must be a plain decimal: digits, optionally a point and digits (no sign or exponent)"
	if len(s) > 1 && s[0] == '-' && positiveDecimal(s[1:]) == "" {
		return "must be greater than zero"
	}
	intDigits, fracDigits, point, nonZero := 0, 0, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			if point {
				fracDigits++
			} else {
				intDigits++
			}
			nonZero = nonZero || c != '0'
		case c == '.' && !point:
			point = true
		default:
			return rule
		}
	}
	switch {
	case intDigits == 0 || (point && fracDigits == 0):
		return rule
	case intDigits > maxIntDigits:
		return "must have at most 15 digits before the decimal point"
	case fracDigits > maxFracDigits:
		return "must have at most 6 digits after the decimal point"
	case !nonZero:
		return "must be greater than zero"
	}
	return ""
}

// checkDates checks the calendar-date KDEs that doc gives, and that the
// harvest date range of a fishing trip is not reversed.
func checkDates(doc domain.Doc) error {
	for _, field := range dateFields {
		s, ok := domain.String(doc, field)
		if !ok {
			continue
		}
		if _, err := time.Parse(dateLayout, s); err != nil {
			return codes.Errorf(codes.SchemaValidation, "%s: must be a calendar date YYYY-MM-DD", field)
		}
	}
	start, okStart := domain.String(doc, fieldHarvestDateStart)
	end, okEnd := domain.String(doc, fieldHarvestDateEnd)
	// Equal-length ISO dates compare in calendar order as strings.
	if okStart && okEnd && end < start {
		return codes.Errorf(codes.SchemaValidation, "%s: must not be before %s",
			fieldHarvestDateEnd, fieldHarvestDateStart)
	}
	return nil
}

package pharmacy

// Limits of a quantity_delta: enough for any real inventory quantity, and
// small enough that a downstream system can hold it as an exact decimal.
const (
	maxIntDigits  = 15
	maxFracDigits = 6
)

// parseQuantity checks that s is a plain decimal ("-30", "12.5", "+4",
// "0.250"): an optional sign, 1 to 15 digits, optionally a point and 1 to 6
// digits; no exponent, spaces or thousands separators. It returns the sign
// of the value: -1, 0 or +1 ("-0" and "0.000" are 0). The detail names the
// rule broken, never the value.
func parseQuantity(s string) (sign int, detail string, ok bool) {
	const rule = "must be a decimal string: optional sign, digits, optional point and digits"
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
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
			return 0, rule, false
		}
	}
	switch {
	case intDigits == 0 || (point && fracDigits == 0):
		return 0, rule, false
	case intDigits > maxIntDigits:
		return 0, "must have at most 15 digits before the decimal point", false
	case fracDigits > maxFracDigits:
		return 0, "must have at most 6 digits after the decimal point", false
	case !nonZero:
		return 0, "", true
	case neg:
		return -1, "", true
	default:
		return 1, "", true
	}
}

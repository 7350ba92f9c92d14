package pharmacy

// DEA registration number errors returned by ValidateDEA. Their texts name
// rules, never values.
var (
	// ErrDEALength: a DEA number has exactly 9 characters.
	ErrDEALength = deaError("must be 9 characters (2 letters, 7 digits)")
	// ErrDEAType: the first character is not a registrant type letter.
	ErrDEAType = deaError("first character is not a DEA registrant type letter")
	// ErrDEASecond: the second character is neither a letter nor '9'.
	ErrDEASecond = deaError("second character must be a letter or '9'")
	// ErrDEADigits: characters 3 to 9 are not all digits.
	ErrDEADigits = deaError("characters 3 to 9 must be digits")
	// ErrDEACheckDigit: the last digit is not the DEA check digit.
	ErrDEACheckDigit = deaError("check digit mismatch")
)

type deaError string

func (e deaError) Error() string { return string(e) }

// registrantTypes marks the letters a DEA number may start with. DEA's
// registration record layout documents A, B, F and G (practitioners,
// pharmacies, hospitals and clinics, teaching institutions), M (mid-level
// practitioners), P and R (manufacturers, distributors, researchers,
// analytical labs, importers, exporters, reverse distributors, narcotic
// treatment programs) and X (DATA-waived prescribers; no longer issued since
// the DATA waiver ended in 2023, but still found on historical records).
// Verification systems also accept the business-activity letters C, D, E,
// H, J, K, L, S, T and U, which appear as first letters in published lists;
// rejecting a real registrant would quarantine a legitimate inventory
// record, so they are accepted too. N and every other letter are rejected.
var registrantTypes = func() (t [256]bool) {
	for _, c := range "ABCDEFGHJKLMPRSTUX" {
		t[c] = true
	}
	return t
}()

// ValidateDEA checks a DEA registration number, already upper-cased: two
// characters then seven digits. The first character is a registrant type
// letter (see registrantTypes); the second is a letter, normally the
// initial of the registrant's last or business name, or '9' for
// registrants registered under a business address rather than a name. The
// seventh digit is the check digit: the sum of digits 1, 3 and 5 plus twice
// the sum of digits 2, 4 and 6 ends in it. Suffixed forms used for
// supervised prescribers ("-001AB") are not registrant numbers and are
// rejected.
func ValidateDEA(s string) error {
	if len(s) != 9 {
		return ErrDEALength
	}
	if !registrantTypes[s[0]] {
		return ErrDEAType
	}
	if !(s[1] >= 'A' && s[1] <= 'Z') && s[1] != '9' {
		return ErrDEASecond
	}
	var d [7]int
	for i := range d {
		c := s[2+i]
		if c < '0' || c > '9' {
			return ErrDEADigits
		}
		d[i] = int(c - '0')
	}
	sum := d[0] + d[2] + d[4] + 2*(d[1]+d[3]+d[5])
	if sum%10 != d[6] {
		return ErrDEACheckDigit
	}
	return nil
}

// upperASCII upper-cases ASCII letters, allocating only when s has a
// lower-case letter.
func upperASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 'a' && s[i] <= 'z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'a' && b[j] <= 'z' {
					b[j] -= 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

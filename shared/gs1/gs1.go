// Package gs1 implements the GS1 identifier rules shared by the DSCSA and
// FSMA domains: the mod-10 check digit, GTIN-14 / GLN / SSCC validation,
// the names of the GS1 keys and EPC schemes (an EPC URN's scheme, a
// Digital Link primary key) for error details, and the NDC a US drug's
// GTIN carries.
// Identifiers are kept as digit strings: a leading zero is significant and a
// GTIN that lost one is invalid, never padded.
package gs1

import "errors"

// Errors returned by the validators. Callers map them to their domain's
// error codes.
var (
	// ErrLength: the identifier has the wrong number of digits.
	ErrLength = errors.New("gs1: wrong length")
	// ErrNotDigits: the identifier contains a non-digit.
	ErrNotDigits = errors.New("gs1: not all digits")
	// ErrCheckDigit: the last digit is not the mod-10 check digit.
	ErrCheckDigit = errors.New("gs1: check digit mismatch")
)

// CheckDigit computes the GS1 mod-10 check digit of body (all digits but the
// check digit): from the right, digits are weighted 3, 1, 3, ...; the check
// digit brings the weighted sum to a multiple of 10. body must be digits.
func CheckDigit(body string) byte {
	sum := 0
	w := 3
	for i := len(body) - 1; i >= 0; i-- {
		sum += int(body[i]-'0') * w
		w = 4 - w // 3,1,3,1...
	}
	return byte('0' + (10-sum%10)%10)
}

// Digits reports whether s is non-empty and all ASCII digits.
func Digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Validate checks that s is exactly n digits ending in a correct check digit.
func Validate(s string, n int) error {
	if !Digits(s) {
		return ErrNotDigits
	}
	if len(s) != n {
		return ErrLength
	}
	if CheckDigit(s[:n-1]) != s[n-1] {
		return ErrCheckDigit
	}
	return nil
}

// ValidateGTIN14 checks a 14-digit GTIN.
func ValidateGTIN14(s string) error { return Validate(s, 14) }

// ValidateGLN checks a 13-digit Global Location Number.
func ValidateGLN(s string) error { return Validate(s, 13) }

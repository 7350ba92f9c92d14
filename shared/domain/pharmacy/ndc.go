package pharmacy

import (
	"strings"

	"github.com/deadletter/deadletter/shared/gs1"
)

// NDC errors returned by NormalizeNDC. Their texts name rules, never values.
var (
	// ErrNDCAmbiguous: ten digits without hyphens cannot be mapped to NDC-11,
	// since the padded segment depends on the unknown 4-4-2, 5-3-2 or 5-4-1
	// layout.
	ErrNDCAmbiguous = ndcError("10 digits without hyphens are ambiguous (4-4-2, 5-3-2 or 5-4-1 layout unknown)")
	// ErrNDCLayout: the NDC is not three digit segments in a 4-4-2, 5-3-2,
	// 5-4-1 or 5-4-2 layout, nor 11 plain digits.
	ErrNDCLayout = ndcError("must be 4-4-2, 5-3-2, 5-4-1 or 5-4-2 digit segments joined by hyphens, or 11 plain digits")
)

type ndcError string

func (e ndcError) Error() string { return string(e) }

// NormalizeNDC converts a National Drug Code to its 11-digit form (11 plain
// digits, the 5-4-2 HIPAA layout). Accepted inputs: the three 10-digit FDA
// layouts with hyphens, 4-4-2 ("1234-5678-90"), 5-3-2 ("12345-678-90") and
// 5-4-1 ("12345-6789-0"), and the 11-digit 5-4-2 form with hyphens
// ("12345-6789-01") or as 11 plain digits. The short segment is padded with
// one leading zero: 4-4-2 → 0+4-4-2, 5-3-2 → 5-0+3-2, 5-4-1 → 5-4-0+1.
// Ten plain digits return ErrNDCAmbiguous; anything else ErrNDCLayout.
func NormalizeNDC(s string) (string, error) {
	if !strings.Contains(s, "-") {
		switch {
		case !gs1.Digits(s):
			return "", ErrNDCLayout
		case len(s) == 11:
			return s, nil
		case len(s) == 10:
			return "", ErrNDCAmbiguous
		default:
			return "", ErrNDCLayout
		}
	}
	a, rest, _ := strings.Cut(s, "-")
	b, c, ok := strings.Cut(rest, "-")
	if !ok || !gs1.Digits(a) || !gs1.Digits(b) || !gs1.Digits(c) {
		return "", ErrNDCLayout
	}
	switch {
	case len(a) == 4 && len(b) == 4 && len(c) == 2:
		return "0" + a + b + c, nil
	case len(a) == 5 && len(b) == 3 && len(c) == 2:
		return a + "0" + b + c, nil
	case len(a) == 5 && len(b) == 4 && len(c) == 1:
		return a + b + "0" + c, nil
	case len(a) == 5 && len(b) == 4 && len(c) == 2:
		return a + b + c, nil
	default:
		return "", ErrNDCLayout
	}
}

// NDC10Forms returns the 10-digit forms (plain digits, as a drug's GTIN
// carries them: gs1.NDCOfGTIN) an NDC may have: its digits for a 10-digit
// NDC with hyphens (4-4-2, 5-3-2, 5-4-1) or ten plain digits; for an
// NDC-11 (5-4-2 with hyphens, or 11 plain digits) each form whose padding
// gives it (a leading zero of its labeler, product or package segment:
// up to three, since the 11 digits do not say which layout was padded).
// Anything else returns ErrNDCLayout.
func NDC10Forms(s string) ([]string, error) {
	if gs1.Digits(s) && len(s) == 10 {
		return []string{s}, nil
	}
	n11, err := NormalizeNDC(s)
	if err != nil {
		return nil, err
	}
	if d := strings.ReplaceAll(s, "-", ""); len(d) == 10 {
		return []string{d}, nil // a 10-digit layout, known by its hyphens
	}
	var out []string
	for _, pad := range []int{0, 5, 9} { // 4-4-2, 5-3-2, 5-4-1
		if n11[pad] == '0' {
			out = append(out, n11[:pad]+n11[pad+1:])
		}
	}
	if len(out) == 0 {
		return nil, ErrNDCLayout
	}
	return out, nil
}

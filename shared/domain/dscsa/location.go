package dscsa

import (
	"strings"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/gs1"
)

// EPC URN prefixes of locations and parties, matched case-insensitively.
const (
	sglnPrefix = "urn:epc:id:sgln:"
	pglnPrefix = "urn:epc:id:pgln:"
)

// location is a GLN with its optional extension (SGLN extension, Digital
// Link AI 254); an SGLN extension of "0" means none.
type location struct {
	gln string
	ext string
}

// id returns the normalized location: "<GLN>" or "<GLN>.<extension>". The
// GLN has a fixed length, so the first dot always separates the two.
func (l location) id() string {
	if l.ext == "" {
		return l.gln
	}
	return l.gln + "." + l.ext
}

// parseLocation reads a readPoint or bizLocation id: an SGLN EPC URN or a
// GS1 Digital Link URI with /414/<GLN>. Anything else, and any GLN with a
// wrong check digit, is INVALID_LOCATION.
func parseLocation(field, s string) (location, error) {
	s = strings.TrimSpace(s)
	if hasPrefixFold(s, sglnPrefix) {
		return parseSGLN(field, s[len(sglnPrefix):])
	}
	if path, ok := digitalLinkPath(s); ok {
		return parseDigitalLinkLocation(field, path)
	}
	return location{}, codes.Errorf(InvalidLocation,
		"%s: must be an SGLN EPC URN (urn:epc:id:sgln:...) or a GS1 Digital Link URI with /414/", field)
}

// parseSGLN reads "CompanyPrefix.LocationRef.Extension": company prefix
// and location reference together are the 12 digits of the GLN before its
// check digit.
func parseSGLN(field, s string) (location, error) {
	cp, rest, _ := strings.Cut(s, ".")
	ref, ext, hasExt := strings.Cut(rest, ".")
	gln, ok := glnFromParts(cp, ref)
	if !ok {
		return location{}, codes.Errorf(InvalidLocation,
			"%s: SGLN company prefix (6 to 12 digits) + location reference must be 12 digits", field)
	}
	if !hasExt {
		return location{}, codes.Errorf(InvalidLocation,
			"%s: SGLN URN must have an extension (0 for none)", field)
	}
	e, err := decodeExtension(field, ext)
	if err != nil {
		return location{}, err
	}
	if e == "0" {
		e = ""
	}
	return location{gln: gln, ext: e}, nil
}

// parseDigitalLinkLocation reads "/414/<GLN>[/254/<extension>]".
func parseDigitalLinkLocation(field, path string) (location, error) {
	rest, ok := afterAI(path, "414")
	if !ok {
		return location{}, codes.Errorf(InvalidLocation,
			"%s: Digital Link URI has no /414/ GLN primary key", field)
	}
	gln, pairs, _ := strings.Cut(rest, "/")
	if err := gs1.ValidateGLN(gln); err != nil {
		return location{}, codes.Errorf(InvalidLocation,
			"%s: GLN must be 13 digits with a valid check digit", field)
	}
	ext, ok := qualifier(pairs, "254")
	if !ok {
		return location{}, codes.Errorf(InvalidLocation,
			"%s: Digital Link path after the GLN must be AI/value pairs", field)
	}
	if ext == "" {
		return location{gln: gln}, nil
	}
	e, err := decodeExtension(field, ext)
	if err != nil {
		return location{}, err
	}
	return location{gln: gln, ext: e}, nil
}

// decodeExtension percent-decodes a GLN extension and checks it is 1 to
// 20 characters of GS1 set 82.
func decodeExtension(field, s string) (string, error) {
	e, ok := unescape(s)
	if !ok || !validAI82(e, 20) {
		return "", codes.Errorf(InvalidLocation,
			"%s: GLN extension must be 1 to 20 characters of GS1 character set 82", field)
	}
	return e, nil
}

// glnFromParts builds a GLN from an EPC company prefix and location or
// party reference, computing the check digit.
func glnFromParts(cp, ref string) (string, bool) {
	if !allDigits(cp) || len(cp) < 6 || len(cp) > 12 || len(cp)+len(ref) != 12 {
		return "", false
	}
	if ref != "" && !allDigits(ref) {
		return "", false
	}
	var b [13]byte
	copy(b[:], cp)
	copy(b[len(cp):], ref)
	b[12] = gs1.CheckDigit(string(b[:12]))
	return string(b[:]), true
}

// partyGLN returns the GLN of a party identifier given as a PGLN or SGLN
// EPC URN or a Digital Link URI with /417/ or /414/; ok is false for any
// other form or an invalid GLN.
func partyGLN(s string) (string, bool) {
	s = strings.TrimSpace(s)
	switch {
	case hasPrefixFold(s, pglnPrefix):
		cp, ref, _ := strings.Cut(s[len(pglnPrefix):], ".")
		return glnFromParts(cp, ref)
	case hasPrefixFold(s, sglnPrefix):
		cp, rest, _ := strings.Cut(s[len(sglnPrefix):], ".")
		ref, _, _ := strings.Cut(rest, ".")
		return glnFromParts(cp, ref)
	}
	path, ok := digitalLinkPath(s)
	if !ok {
		return "", false
	}
	rest, ok := afterAI(path, "417")
	if !ok {
		if rest, ok = afterAI(path, "414"); !ok {
			return "", false
		}
	}
	gln, _, _ := strings.Cut(rest, "/")
	if gs1.ValidateGLN(gln) != nil {
		return "", false
	}
	return gln, true
}

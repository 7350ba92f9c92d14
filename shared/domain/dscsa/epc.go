package dscsa

import (
	"errors"
	"strconv"
	"strings"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/gs1"
)

// sgtinPrefix is the EPC pure-identity URN prefix of an SGTIN; it is
// matched case-insensitively.
const sgtinPrefix = "urn:epc:id:sgtin:"

// maxSerial is the maximum length of a GS1 serial number (AI 21).
const maxSerial = 20

// epc is one serialized item: its GTIN-14 and its serial number, decoded
// from any percent-escapes.
type epc struct {
	gtin   string
	serial string
}

// id returns the item's normalized identity "<gtin14>.<serial>". The
// GTIN has a fixed length, so the first dot always separates the two.
func (e epc) id() string { return e.gtin + "." + e.serial }

// gtinCache remembers the GTIN rebuilt for the last SGTIN's
// "CompanyPrefix.IndicatorItemRef": the EPCs of one event are mostly of
// one product, so the GTIN string is built once.
type gtinCache struct {
	ref  string
	gtin string
}

// where names a list entry in error details: the list's field name and
// the entry's index ("epcList[3]", "childEPCs[0]"), or a field alone
// ("parentID") when i is negative. It is formatted only on error.
type where struct {
	field string
	i     int
}

func (w where) String() string {
	if w.i < 0 {
		return w.field
	}
	return w.field + "[" + strconv.Itoa(w.i) + "]"
}

// parseEPC reads one entry of an EPC list (named by w) as an SGTIN EPC URN
// or a GS1 Digital Link URI.
func parseEPC(w where, s string, cache *gtinCache) (epc, error) {
	s = strings.TrimSpace(s)
	if hasPrefixFold(s, sgtinPrefix) {
		return parseSGTIN(w, s[len(sgtinPrefix):], cache)
	}
	if path, ok := digitalLinkPath(s); ok {
		return parseDigitalLinkEPC(w, path)
	}
	return epc{}, codes.Errorf(InvalidEPC,
		"%s: must be an SGTIN EPC URN (urn:epc:id:sgtin:...) or a GS1 Digital Link URI with /01/ and /21/", w)
}

// parseSGTIN reads "CompanyPrefix.IndicatorItemRef.Serial" and rebuilds the
// GTIN-14: indicator digit + company prefix + item reference without its
// first digit + computed check digit.
func parseSGTIN(w where, s string, cache *gtinCache) (epc, error) {
	cp, rest, _ := strings.Cut(s, ".")
	ir, serial, hasSerial := strings.Cut(rest, ".")
	if !allDigits(cp) || len(cp) < 6 || len(cp) > 12 {
		return epc{}, codes.Errorf(InvalidEPC,
			"%s: SGTIN company prefix must be 6 to 12 digits", w)
	}
	if !allDigits(ir) || len(cp)+len(ir) != 13 {
		return epc{}, codes.Errorf(InvalidEPC,
			"%s: SGTIN company prefix + indicator/item reference must be 13 digits", w)
	}
	if !hasSerial || serial == "" {
		return epc{}, codes.Errorf(MissingSerial,
			"%s: SGTIN URN has no serial number", w)
	}
	ser, err := decodeSerial(w, serial)
	if err != nil {
		return epc{}, err
	}
	ref := s[:len(cp)+1+len(ir)]
	if ref != cache.ref {
		cache.ref, cache.gtin = ref, sgtinGTIN(cp, ir)
	}
	return epc{gtin: cache.gtin, serial: ser}, nil
}

// sgtinGTIN rebuilds a GTIN-14 from an SGTIN's company prefix and
// indicator/item reference (13 digits together).
func sgtinGTIN(cp, ir string) string {
	var b [14]byte
	b[0] = ir[0]
	copy(b[1:], cp)
	copy(b[1+len(cp):], ir[1:])
	b[13] = gs1.CheckDigit(string(b[:13]))
	return string(b[:])
}

// parseDigitalLinkEPC reads "/01/<GTIN-14>[/22/..][/10/<lot>]/21/<serial>"
// (after an optional path prefix). Other AIs and the query string do not
// take part in the item's identity.
func parseDigitalLinkEPC(w where, path string) (epc, error) {
	rest, ok := afterAI(path, "01")
	if !ok {
		return epc{}, codes.Errorf(InvalidEPC,
			"%s: Digital Link URI has no /01/ GTIN primary key", w)
	}
	gtin, pairs, _ := strings.Cut(rest, "/")
	if err := checkGTIN(w, gtin); err != nil {
		return epc{}, err
	}
	serial, ok := qualifier(pairs, "21")
	if !ok {
		return epc{}, codes.Errorf(InvalidEPC,
			"%s: Digital Link path after the GTIN must be AI/value pairs", w)
	}
	if serial == "" {
		return epc{}, codes.Errorf(MissingSerial,
			"%s: Digital Link URI has no /21/ serial number", w)
	}
	ser, err := decodeSerial(w, serial)
	if err != nil {
		return epc{}, err
	}
	return epc{gtin: gtin, serial: ser}, nil
}

// checkGTIN validates a GTIN-14 carried as such (Digital Link /01/). A
// 13-digit value lost its leading zero and is invalid, never padded.
func checkGTIN(w where, gtin string) error {
	err := gs1.ValidateGTIN14(gtin)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gs1.ErrCheckDigit):
		return codes.Errorf(GTINCheckDigitFailed,
			"%s: GTIN-14 check digit mismatch", w)
	case len(gtin) == 13 && allDigits(gtin):
		return codes.Errorf(InvalidGTIN,
			"%s: GTIN has 13 digits, must be a GTIN-14 (a lost leading zero is not padded)", w)
	default:
		return codes.Errorf(InvalidGTIN,
			"%s: GTIN must be 14 digits", w)
	}
}

// decodeSerial percent-decodes a serial and checks it is 1 to 20
// characters of GS1 set 82.
func decodeSerial(w where, s string) (string, error) {
	ser, ok := unescape(s)
	if !ok {
		return "", codes.Errorf(InvalidEPC,
			"%s: serial number has a malformed percent-escape", w)
	}
	if !validAI82(ser, maxSerial) {
		return "", codes.Errorf(InvalidEPC,
			"%s: serial number must be 1 to 20 characters of GS1 character set 82", w)
	}
	return ser, nil
}

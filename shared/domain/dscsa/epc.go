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

// epc is one entry of an EPC list: a serialized item (an SGTIN: its
// GTIN-14 and its serial number, decoded from any percent-escapes) or a
// logistic unit (an SSCC: its 18 digits, gtin and serial empty).
type epc struct {
	gtin   string
	serial string
	sscc   string
}

// id returns the entry's normalized identity: "<gtin14>.<serial>" of an
// item (the GTIN has a fixed length, so the first dot always separates
// the two), the SSCC-18 of a logistic unit.
func (e epc) id() string {
	if e.sscc != "" {
		return e.sscc
	}
	return e.gtin + "." + e.serial
}

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

// URN prefixes of the EPC forms that are not pure identities of one
// object, matched case-insensitively.
const (
	epcIDPrefix    = "urn:epc:id:"
	epcClassPrefix = "urn:epc:class:"
	epcTagPrefix   = "urn:epc:tag:"
	epcPatPrefix   = "urn:epc:idpat:"
)

// parseEPC reads one entry of an EPC list (named by w): an SGTIN or SSCC
// EPC URN, or a GS1 Digital Link URI with /01/<GTIN>/21/<serial> or
// /00/<SSCC>. Any other GS1 key (a GRAI, a GIAI, an SGLN, an LGTIN class...)
// is UNSUPPORTED_GS1_KEY, naming it; anything else INVALID_EPC.
func parseEPC(w where, s string, cache *gtinCache) (epc, error) {
	s = strings.TrimSpace(s)
	switch {
	case hasPrefixFold(s, sgtinPrefix):
		return parseSGTIN(w, s[len(sgtinPrefix):], cache)
	case hasPrefixFold(s, ssccPrefix):
		sscc, err := ssccFromURN(w, InvalidEPC, s[len(ssccPrefix):])
		return epc{sscc: sscc}, err
	}
	if path, ok := digitalLinkPath(s); ok {
		return parseDigitalLinkEPC(w, path)
	}
	if k, ok := otherKey(s); ok {
		return epc{}, codes.Errorf(UnsupportedGS1Key,
			"%s: %s is not a key the DSCSA domain takes in an EPC list (SGTINs and SSCCs)%s", w, k, keyHint(k))
	}
	switch {
	case hasPrefixFold(s, epcTagPrefix):
		return epc{}, codes.Errorf(InvalidEPC,
			"%s: an EPC tag URN (an RFID tag's encoding) is not an identifier: send its pure identity URN, urn:epc:id:...", w)
	case hasPrefixFold(s, epcPatPrefix):
		return epc{}, codes.Errorf(InvalidEPC, "%s: an EPC pattern names many objects, not one", w)
	case hasPrefixFold(s, epcIDPrefix) || hasPrefixFold(s, epcClassPrefix):
		return epc{}, codes.Errorf(InvalidEPC, "%s: names no EPC scheme the EPC Tag Data Standard defines", w)
	}
	return epc{}, codes.Errorf(InvalidEPC,
		"%s: must be an SGTIN or SSCC EPC URN (urn:epc:id:sgtin:..., urn:epc:id:sscc:...) or a GS1 Digital Link URI with /01/ and /21/, or /00/", w)
}

// otherKey returns the GS1 key (or other EPC scheme) an identifier names
// when it is neither an SGTIN nor an SSCC: an EPC URN of another scheme, an
// EPC class URN, or a Digital Link URI of another primary key than /01/
// and /00/; ok is false when s names none of them.
func otherKey(s string) (k gs1.Key, ok bool) {
	defer func() {
		if k.Abbr == "SGTIN" || k.Abbr == "SSCC" || k.Abbr == "GTIN" {
			k, ok = gs1.Key{}, false
		}
	}()
	scheme := func(rest string) string {
		name, _, _ := strings.Cut(rest, ":")
		return strings.ToLower(name)
	}
	switch {
	case hasPrefixFold(s, epcIDPrefix):
		return gs1.EPCScheme(scheme(s[len(epcIDPrefix):]))
	case hasPrefixFold(s, epcClassPrefix):
		return gs1.EPCClass(scheme(s[len(epcClassPrefix):]))
	}
	if path, ok := digitalLinkPath(s); ok {
		if ai, _, ok := primaryKey(path); ok {
			return gs1.DigitalLinkKey(ai)
		}
	}
	return gs1.Key{}, false
}

// keyHint tells where a key the EPC lists do not take belongs, when the
// event has a place for it.
func keyHint(k gs1.Key) string {
	switch k.Abbr {
	case "LGTIN":
		return ": a lot's quantity belongs in quantityList"
	case "SGLN", "GLN":
		return ": a location belongs in readPoint or bizLocation"
	case "PGLN":
		return ": a party belongs in sourceList or destinationList"
	}
	return ""
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
// or "/00/<SSCC-18>" (after an optional path prefix). Other AIs and the
// query string do not take part in the identity.
func parseDigitalLinkEPC(w where, path string) (epc, error) {
	ai, rest, ok := primaryKey(path)
	switch {
	case !ok:
		return epc{}, codes.Errorf(InvalidEPC,
			"%s: Digital Link URI has no primary key: /01/ GTIN with /21/ serial, or /00/ SSCC", w)
	case ai == "00":
		sscc, _, _ := strings.Cut(rest, "/")
		if err := checkSSCC(w, InvalidEPC, sscc); err != nil {
			return epc{}, err
		}
		return epc{sscc: sscc}, nil
	case ai != "01":
		k, _ := gs1.DigitalLinkKey(ai)
		return epc{}, codes.Errorf(UnsupportedGS1Key,
			"%s: %s is not a key the DSCSA domain takes in an EPC list (SGTINs and SSCCs)%s", w, k, keyHint(k))
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

// checkSSCC validates an SSCC-18 carried as such (Digital Link /00/); a
// fault is code (the field's: INVALID_EPC in a list, INVALID_PARENT_ID as
// a parent).
func checkSSCC(w where, code codes.Code, sscc string) error {
	err := gs1.ValidateSSCC(sscc)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gs1.ErrCheckDigit):
		return codes.Errorf(code, "%s: SSCC check digit mismatch", w)
	}
	return codes.Errorf(code, "%s: SSCC must be 18 digits", w)
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

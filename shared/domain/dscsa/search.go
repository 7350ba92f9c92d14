package dscsa

import (
	"encoding/json"
	"strings"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/gs1"
)

// search finds DSCSA events (domain.Spec.Search) by GTIN (GTIN-8/12/13/14
// → GTIN-14, its check digit not checked, so that an event whose GTIN was
// written with a wrong one is found by it; or an SGTIN EPC URN or GS1
// Digital Link, which also gives the serial), serial alone, SSCC (18
// digits, an SSCC EPC URN or a Digital Link /00/ URI), lot and NDC (the
// 10 digits a drug's GTIN carries: an NDC-11 matches each 10-digit form
// its padding allows). A chain matches a field by its ordering key, its
// listed lot, or any identifier of its payload (payloadIdentifiers:
// every EPC of epcList, childEPCs and parentID, the ILMD lot, the lots of
// LGTIN classes); an item's GTIN and serial given together match one
// item.
var search = domain.Search{
	Fields:         []string{"gtin", "serial", "sscc", "lot", "ndc"},
	Parse:          parseSearch,
	KeyIdentifiers: keyIdentifiers,
	Identifiers:    payloadIdentifiers,
}

func parseSearch(v map[string]string) (domain.Matcher, error) {
	var gtin, serial, sscc string
	if s := v["gtin"]; s != "" {
		if IsItemURI(s) {
			g, ser, err := searchItem(s)
			if err != nil {
				return nil, &domain.SearchError{Field: "gtin", Rule: err.Error()}
			}
			if given := v["serial"]; given != "" && given != ser {
				return nil, &domain.SearchError{Field: "serial", Rule: "differs from the serial of the item URI given as the GTIN"}
			}
			gtin, serial = g, ser
		} else {
			g, ok := gtin14(s)
			if !ok {
				return nil, &domain.SearchError{Field: "gtin", Rule: "not a GTIN: must be 8, 12, 13 or 14 digits"}
			}
			gtin = g
		}
	}
	if s := v["serial"]; s != "" && serial == "" {
		if IsItemURI(s) {
			g, ser, err := searchItem(s)
			if err != nil {
				return nil, &domain.SearchError{Field: "serial", Rule: err.Error()}
			}
			if gtin != "" && gtin != g {
				return nil, &domain.SearchError{Field: "serial", Rule: "the item URI's GTIN differs from the GTIN given"}
			}
			gtin, serial = g, ser
		} else {
			serial = s
		}
	}
	if s := v["sscc"]; s != "" {
		n, err := ParseSSCC(s)
		if err != nil {
			return nil, &domain.SearchError{Field: "sscc", Rule: err.Error()}
		}
		sscc = n
	}
	var ndcs []string
	if s := v["ndc"]; s != "" {
		forms, err := pharmacy.NDC10Forms(s)
		if err != nil {
			return nil, &domain.SearchError{Field: "ndc", Rule: "not an NDC: " + err.Error()}
		}
		ndcs = forms
	}
	lot := v["lot"]
	return func(c domain.Chain) bool {
		var okGTIN, okSerial, okSSCC string
		if g, s, item := strings.Cut(c.OrderingKey, "."); item {
			okGTIN, okSerial = g, s
		} else {
			okSSCC = c.OrderingKey
		}
		switch {
		case gtin != "" && serial != "":
			if c.OrderingKey != gtin+"."+serial && !c.Has("sgtin", gtin+"."+serial) {
				return false
			}
		case gtin != "":
			if okGTIN != gtin && !c.Has("gtin", gtin) {
				return false
			}
		case serial != "":
			if okSerial != serial && !c.Has("serial", serial) {
				return false
			}
		}
		if sscc != "" && okSSCC != sscc && !c.Has("sscc", sscc) {
			return false
		}
		if lot != "" && !c.Has("lot", lot) {
			return false
		}
		return ndcs == nil || ndcMatch(c, okGTIN, ndcs)
	}, nil
}

// ndcMatch reports whether the chain names a GTIN of one of the NDC's
// 10-digit forms: its ordering key's, or one of its payload's.
func ndcMatch(c domain.Chain, okGTIN string, forms []string) bool {
	own, _ := gs1.NDCOfGTIN(okGTIN)
	for _, f := range forms {
		if f == own || c.Has("ndc", f) {
			return true
		}
	}
	return false
}

// searchItem reads an item URI a person searches by, as ParseItem does,
// but takes a GTIN written with a wrong check digit as it is written:
// the search finds the event that carries it.
func searchItem(s string) (gtin, serial string, err error) {
	gtin, serial, err = ParseItem(s)
	if err == nil {
		return gtin, serial, nil
	}
	if _, perr := parseEPC(where{"item", -1}, s, &gtinCache{}); codes.Of(perr) == GTINCheckDigitFailed {
		var ids domain.IdentifierSet
		addEPC(&ids, s, &gtinCache{})
		m := ids.Map()
		if len(m["gtin"]) == 1 && len(m["serial"]) == 1 {
			return m["gtin"][0], m["serial"][0], nil
		}
	}
	return "", "", err
}

// gtin14 reads a GTIN-8, -12, -13 or -14 as the GTIN-14 it is (leading
// zeros); its check digit is not checked (a search finds a GTIN as
// written).
func gtin14(s string) (string, bool) {
	switch len(s) {
	case 8, 12, 13:
		s = strings.Repeat("0", 14-len(s)) + s
	}
	return s, len(s) == 14 && gs1.Digits(s)
}

// keyIdentifiers: an ordering key is "<gtin14>.<serial>", or a
// container's SSCC.
func keyIdentifiers(okey, _ string) map[string]string {
	if okey == "" {
		return nil
	}
	gtin, serial, ok := strings.Cut(okey, ".")
	if !ok { // a container
		return map[string]string{"sscc": okey}
	}
	return map[string]string{"gtin": gtin, "serial": serial}
}

// payloadIdentifiers returns every identifier a DSCSA payload holds
// (domain.Search.Identifiers), valid or not: "gtin" (14 digits; a
// GTIN-8/12/13 written in a Digital Link padded), "serial", "sgtin"
// ("<gtin14>.<serial>" of one item), "sscc" and "ndc" (the 10 digits of
// a drug's GTIN) of every entry of epcList and childEPCs and of parentID,
// "lot" of the ILMD lotNumber (any accepted attribute name), of LGTIN
// classes (quantityList, childQuantityList, epcList) and of Digital Link
// /10/. An identifier is read as written: a GTIN with a wrong check digit,
// an SGTIN whose company prefix is too long, an entry of an event whose
// bizStep is unknown. It never panics on any decoded JSON.
func payloadIdentifiers(doc domain.Doc) map[string][]string {
	var ids domain.IdentifierSet
	var cache gtinCache
	for _, field := range []string{"epcList", "childEPCs"} {
		list, _ := domain.Array(doc, field)
		for _, v := range list {
			if s, ok := v.(string); ok {
				addEPC(&ids, s, &cache)
			}
		}
	}
	if s, ok := doc["parentID"].(string); ok {
		addEPC(&ids, s, &cache)
	}
	for _, field := range []string{"quantityList", "childQuantityList"} {
		list, _ := domain.Array(doc, field)
		for _, v := range list {
			if q, ok := v.(map[string]any); ok {
				if s, ok := q["epcClass"].(string); ok {
					addEPC(&ids, s, &cache)
				}
			}
		}
	}
	ids.Add("lot", lotAsWritten(doc))
	return ids.Map()
}

// lotAsWritten returns the ILMD lot of an event as written (any accepted
// attribute name; a lot sent as a JSON number as its digits), "" when it
// has none.
func lotAsWritten(doc domain.Doc) string {
	ilmd, ok := domain.Object(doc, "ilmd")
	if !ok {
		return ""
	}
	v, _, ok := firstAttr(ilmd, lotKeys)
	if !ok {
		return ""
	}
	if s, ok := attrString(v); ok {
		return s
	}
	if n, ok := v.(json.Number); ok {
		return n.String()
	}
	return ""
}

// addEPC adds the identifiers one EPC, EPC class or Digital Link URI
// names, read as written (see payloadIdentifiers); cache keeps the GTIN
// of the last URN's company prefix and item reference.
func addEPC(ids *domain.IdentifierSet, s string, cache *gtinCache) {
	s = strings.TrimSpace(s)
	item := func(gtin, serial string) {
		ids.Add("gtin", gtin)
		ids.Add("serial", serial)
		if gtin != "" && serial != "" {
			ids.Add("sgtin", gtin+"."+serial)
		}
		if ndc, ok := gs1.NDCOfGTIN(gtin); ok {
			ids.Add("ndc", ndc)
		}
	}
	// The three dot-separated parts of a URN's body, the GTIN of the
	// first two when they are the 13 digits of an SGTIN or LGTIN.
	urnParts := func(body string) (gtin, third string) {
		cp, rest, _ := strings.Cut(body, ".")
		ir, third, _ := strings.Cut(rest, ".")
		if ref := body[:min(len(body), len(cp)+1+len(ir))]; ref == cache.ref {
			gtin = cache.gtin
		} else if allDigits(cp) && allDigits(ir) && len(cp)+len(ir) == 13 {
			gtin = sgtinGTIN(cp, ir)
			cache.ref, cache.gtin = ref, gtin
		}
		return gtin, decoded(third)
	}
	switch {
	case hasPrefixFold(s, sgtinPrefix):
		item(urnParts(s[len(sgtinPrefix):]))
	case hasPrefixFold(s, epcClassPrefix+"lgtin:"):
		gtin, lot := urnParts(s[len(epcClassPrefix+"lgtin:"):])
		item(gtin, "")
		ids.Add("lot", lot)
	case hasPrefixFold(s, ssccPrefix):
		if sscc, err := ssccFromURN(where{}, InvalidEPC, s[len(ssccPrefix):]); err == nil {
			ids.Add("sscc", sscc)
		}
	default:
		path, ok := digitalLinkPath(s)
		if !ok {
			return
		}
		ai, rest, ok := primaryKey(path)
		if !ok {
			return
		}
		key, pairs, _ := strings.Cut(rest, "/")
		switch ai {
		case "00":
			if allDigits(key) {
				ids.Add("sscc", key)
			}
			return
		case "01":
		default:
			return
		}
		gtin, _ := gtin14(key)
		if !allDigits(gtin) {
			gtin = ""
		}
		var serial string
		for pairs != "" {
			var k, v string
			k, pairs, _ = strings.Cut(pairs, "/")
			v, pairs, _ = strings.Cut(pairs, "/")
			switch k {
			case "21":
				if serial == "" {
					serial = decoded(v)
				}
			case "10":
				ids.Add("lot", decoded(v))
			}
		}
		item(gtin, serial)
	}
}

// decoded percent-decodes s, or returns it as written when an escape is
// malformed.
func decoded(s string) string {
	if d, ok := unescape(s); ok {
		return d
	}
	return s
}

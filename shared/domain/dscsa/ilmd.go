package dscsa

import (
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
)

// The ILMD attribute names accepted for lot and expiry, in order of
// precedence: the EPCIS 2.0 JSON-LD compact forms, the CBV URNs, the CBV
// and GS1 Web Vocabulary URIs, and the bare names.
var (
	lotKeys    = attrKeys("lotNumber")
	expiryKeys = append(attrKeys("itemExpirationDate"), attrKeys("expirationDate")...)
)

func attrKeys(name string) []string {
	prefixes := []string{
		"cbvmda:", "urn:epcglobal:cbv:mda:", "urn:epcglobal:cbv:mda#",
		"https://ref.gs1.org/cbv/", "gs1:", "https://gs1.org/voc/",
		"http://gs1.org/voc/", "https://ref.gs1.org/voc/", "",
	}
	keys := make([]string, len(prefixes))
	for i, p := range prefixes {
		keys[i] = p + name
	}
	return keys
}

// lotExpiry is the instance/lot master data deadletter identifies by.
type lotExpiry struct {
	lot    string
	expiry string // YYYY-MM-DD
}

// readILMD returns the lot and expiry of the event's ilmd, each empty when
// absent. A present expiry must be an xsd:date; a present lot must be a
// string (a number would lose leading zeros).
func readILMD(doc domain.Doc) (lotExpiry, error) {
	ilmd, ok := domain.Object(doc, "ilmd")
	if !ok {
		return lotExpiry{}, nil
	}
	var le lotExpiry
	if v, key, ok := firstAttr(ilmd, lotKeys); ok {
		s, isString := attrString(v)
		if !isString {
			return lotExpiry{}, codes.Errorf(codes.MissingLot, "ilmd %s must be a string", attrName(key))
		}
		le.lot = s
	}
	if v, key, ok := firstAttr(ilmd, expiryKeys); ok {
		s, isString := attrString(v)
		if !isString {
			return lotExpiry{}, codes.Errorf(MissingExpiry, "ilmd %s must be a string", attrName(key))
		}
		if s != "" {
			d, valid := xsdDate(s)
			if !valid {
				return lotExpiry{}, codes.Errorf(MissingExpiry,
					"ilmd %s is not a usable date: must be an xsd:date YYYY-MM-DD", attrName(key))
			}
			le.expiry = d
		}
	}
	return le, nil
}

// firstAttr returns the value of the first of keys present in ilmd.
func firstAttr(ilmd domain.Doc, keys []string) (any, string, bool) {
	for _, k := range keys {
		if v, ok := ilmd[k]; ok {
			return v, k, true
		}
	}
	return nil, "", false
}

// attrName returns the local name of an attribute key, for error details.
func attrName(key string) string {
	if i := strings.LastIndexAny(key, ":/#"); i >= 0 {
		return key[i+1:]
	}
	return key
}

// attrString returns a string attribute, trimmed, also when given as a
// JSON-LD value object {"@value": "..."}.
func attrString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x), true
	case map[string]any:
		s, ok := x["@value"].(string)
		return strings.TrimSpace(s), ok
	}
	return "", false
}

// xsdDate validates an xsd:date ("2026-06-30", optionally followed by a
// timezone "Z" or ±hh:mm) and returns its YYYY-MM-DD part.
func xsdDate(s string) (string, bool) {
	if len(s) < 10 {
		return "", false
	}
	d, tz := s[:10], s[10:]
	if _, err := time.Parse(time.DateOnly, d); err != nil {
		return "", false
	}
	if tz != "" && tz != "Z" {
		if _, ok := parseOffset(tz); !ok {
			return "", false
		}
	}
	return d, true
}

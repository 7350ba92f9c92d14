package eventhash

import (
	"strings"

	"github.com/deadletter/deadletter/shared/gs1"
)

// canonicalHost is the host of a canonical GS1 Digital Link URI.
const canonicalHost = "https://id.gs1.org"

// DigitalLink returns the constrained canonical GS1 Digital Link URI of an
// EPC pure-identity URN (sgtin, sscc, sgln, pgln, grai, giai, gsrn, gsrnp,
// gdti), an EPC class URN (lgtin), an EPC pattern URN (sgtin with "*"
// serial) or a GS1 Digital Link URI on any host: on id.gs1.org, the
// primary key with the finest key qualifier only (a serial before a lot;
// no CPV, no data attributes, no query string), a GTIN padded to 14 digits.
// ok is false for any other value.
func DigitalLink(s string) (string, bool) {
	switch {
	case hasPrefixFold(s, "urn:epc:id:"):
		return fromEPC(s[len("urn:epc:id:"):])
	case hasPrefixFold(s, "urn:epc:class:lgtin:"):
		cp, ir, lot, ok := threeParts(s[len("urn:epc:class:lgtin:"):])
		gtin, gok := gtinOf(cp, ir)
		if !ok || !gok || lot == "" {
			return "", false
		}
		return canonicalHost + "/01/" + gtin + "/10/" + webEscape(lot), true
	case hasPrefixFold(s, "urn:epc:idpat:"):
		return fromPattern(s[len("urn:epc:idpat:"):])
	case hasPrefixFold(s, "https://"), hasPrefixFold(s, "http://"):
		return fromWeb(s)
	}
	return "", false
}

func fromEPC(s string) (string, bool) {
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok {
		return "", false
	}
	switch strings.ToLower(scheme) {
	case "sgtin":
		cp, ir, serial, ok := threeParts(rest)
		gtin, gok := gtinOf(cp, ir)
		if !ok || !gok || serial == "" {
			return "", false
		}
		return canonicalHost + "/01/" + gtin + "/21/" + webEscape(serial), true
	case "sscc":
		cp, ref, ok := strings.Cut(rest, ".")
		if !ok || !companyPrefix(cp) || !gs1.Digits(ref) || len(cp)+len(ref) != 17 {
			return "", false
		}
		return canonicalHost + "/00/" + withCheck(ref[:1]+cp+ref[1:]), true
	case "sgln":
		cp, loc, ext, ok := threeParts(rest)
		if !ok || !companyPrefix(cp) || len(cp)+len(loc) != 12 || (loc != "" && !gs1.Digits(loc)) || ext == "" {
			return "", false
		}
		out := canonicalHost + "/414/" + withCheck(cp+loc)
		if ext != "0" {
			out += "/254/" + webEscape(ext)
		}
		return out, true
	case "pgln":
		cp, ref, ok := strings.Cut(rest, ".")
		if !ok || !companyPrefix(cp) || len(cp)+len(ref) != 12 || (ref != "" && !gs1.Digits(ref)) {
			return "", false
		}
		return canonicalHost + "/417/" + withCheck(cp+ref), true
	case "grai":
		cp, asset, serial, ok := threeParts(rest)
		if !ok || !companyPrefix(cp) || len(cp)+len(asset) != 12 || (asset != "" && !gs1.Digits(asset)) || serial == "" {
			return "", false
		}
		return canonicalHost + "/8003/" + withCheck("0"+cp+asset) + webEscape(serial), true
	case "giai":
		cp, ref, ok := strings.Cut(rest, ".")
		if !ok || !companyPrefix(cp) || ref == "" {
			return "", false
		}
		return canonicalHost + "/8004/" + cp + webEscape(ref), true
	case "gsrn", "gsrnp":
		cp, ref, ok := strings.Cut(rest, ".")
		if !ok || !companyPrefix(cp) || !gs1.Digits(ref) || len(cp)+len(ref) != 17 {
			return "", false
		}
		ai := "/8018/"
		if strings.EqualFold(scheme, "gsrnp") {
			ai = "/8017/"
		}
		return canonicalHost + ai + withCheck(cp+ref), true
	case "gdti", "sgcn":
		cp, doc, serial, ok := threeParts(rest)
		if !ok || !companyPrefix(cp) || len(cp)+len(doc) != 12 || (doc != "" && !gs1.Digits(doc)) || serial == "" {
			return "", false
		}
		if strings.EqualFold(scheme, "sgcn") {
			return canonicalHost + "/255/" + withCheck(cp+doc) + serial, true
		}
		return canonicalHost + "/253/" + withCheck(cp+doc) + webEscape(serial), true
	case "cpi":
		cp, tail, ok := strings.Cut(rest, ".")
		i := strings.LastIndexByte(tail, '.')
		if !ok || !companyPrefix(cp) || i <= 0 || !gs1.Digits(tail[i+1:]) {
			return "", false
		}
		return canonicalHost + "/8010/" + webEscape(cp+tail[:i]) + "/8011/" + tail[i+1:], true
	case "ginc":
		cp, ref, ok := strings.Cut(rest, ".")
		if !ok || !companyPrefix(cp) || ref == "" {
			return "", false
		}
		return canonicalHost + "/401/" + cp + webEscape(ref), true
	case "gsin":
		cp, ref, ok := strings.Cut(rest, ".")
		if !ok || !companyPrefix(cp) || !gs1.Digits(ref) || len(cp)+len(ref) != 16 {
			return "", false
		}
		return canonicalHost + "/402/" + withCheck(cp+ref), true
	case "itip":
		parts := strings.SplitN(rest, ".", 5)
		if len(parts) != 5 || len(parts[2]) != 2 || len(parts[3]) != 2 || !gs1.Digits(parts[2]+parts[3]) || parts[4] == "" {
			return "", false
		}
		gtin, ok := gtinOf(parts[0], parts[1])
		if !ok {
			return "", false
		}
		return canonicalHost + "/8006/" + gtin + parts[2] + parts[3] + "/21/" + webEscape(parts[4]), true
	case "upui":
		cp, ir, serial, ok := threeParts(rest)
		gtin, gok := gtinOf(cp, ir)
		if !ok || !gok || serial == "" {
			return "", false
		}
		return canonicalHost + "/01/" + gtin + "/235/" + webEscape(serial), true
	}
	return "", false
}

// fromPattern reads an EPC pattern URN whose last component is "*".
func fromPattern(s string) (string, bool) {
	scheme, rest, ok := strings.Cut(s, ":")
	body, star := strings.CutSuffix(rest, ".*")
	if !ok || !star {
		return "", false
	}
	cp, ref, _ := strings.Cut(body, ".")
	if !companyPrefix(cp) {
		return "", false
	}
	switch strings.ToLower(scheme) {
	case "sgtin", "upui":
		if gtin, ok := gtinOf(cp, ref); ok {
			return canonicalHost + "/01/" + gtin, true
		}
	case "itip":
		parts := strings.Split(body, ".")
		if len(parts) == 4 && len(parts[2]) == 2 && len(parts[3]) == 2 && gs1.Digits(parts[2]+parts[3]) {
			if gtin, ok := gtinOf(parts[0], parts[1]); ok {
				return canonicalHost + "/8006/" + gtin + parts[2] + parts[3], true
			}
		}
	case "grai", "gdti", "sgcn":
		if len(cp)+len(ref) != 12 || (ref != "" && !gs1.Digits(ref)) {
			return "", false
		}
		switch strings.ToLower(scheme) {
		case "grai":
			return canonicalHost + "/8003/" + withCheck("0"+cp+ref), true
		case "gdti":
			return canonicalHost + "/253/" + withCheck(cp+ref), true
		}
		return canonicalHost + "/255/" + withCheck(cp+ref), true
	case "cpi":
		if ref != "" {
			return canonicalHost + "/8010/" + webEscape(cp+ref), true
		}
	}
	return "", false
}

// threeParts splits "a.b.c" at its first two dots (c may hold dots).
func threeParts(s string) (a, b, c string, ok bool) {
	a, rest, ok1 := strings.Cut(s, ".")
	b, c, ok2 := strings.Cut(rest, ".")
	return a, b, c, ok1 && ok2
}

func companyPrefix(cp string) bool {
	return gs1.Digits(cp) && len(cp) >= 6 && len(cp) <= 12
}

// gtinOf rebuilds a GTIN-14 from an EPC company prefix and
// indicator/item reference.
func gtinOf(cp, ir string) (string, bool) {
	if !companyPrefix(cp) || !gs1.Digits(ir) || len(cp)+len(ir) != 13 {
		return "", false
	}
	return withCheck(ir[:1] + cp + ir[1:]), true
}

func withCheck(body string) string { return body + string(gs1.CheckDigit(body)) }

// webEscape percent-encodes the characters an EPC URN may carry bare but a
// Digital Link URI path must escape.
var webEscape = strings.NewReplacer(
	"!", "%21", "(", "%28", ")", "%29", "*", "%2A", "+", "%2B", ",", "%2C", ":", "%3A",
).Replace

// shortNames maps the Digital Link short names of keys and qualifiers to
// their application identifiers.
var shortNames = map[string]string{
	"gtin": "01", "itip": "8006", "cpid": "8010", "gln": "414", "party": "417", "gsrnp": "8017",
	"gsrn": "8018", "gcn": "255", "sscc": "00", "gdti": "253", "ginc": "401", "gsin": "402",
	"grai": "8003", "giai": "8004", "cpv": "22", "lot": "10", "ser": "21",
}

// primaryKeys are the Digital Link primary keys, with the key qualifiers
// kept (finest first) and the digit count of a fixed-length key (0: any).
var primaryKeys = map[string]struct {
	qualifiers []string
	digits     int
}{
	"00": {nil, 18}, "01": {[]string{"21", "10", "235"}, 14}, "253": {nil, 0}, "255": {nil, 0},
	"401": {nil, 0}, "402": {nil, 17}, "414": {[]string{"254"}, 13}, "417": {nil, 13},
	"8003": {nil, 0}, "8004": {nil, 0}, "8006": {[]string{"21", "10"}, 18},
	"8010": {[]string{"8011"}, 0}, "8017": {nil, 18}, "8018": {nil, 18},
}

// fromWeb canonicalizes an http(s) GS1 Digital Link URI.
func fromWeb(s string) (string, bool) {
	_, rest, _ := strings.Cut(s, "://")
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	slash := strings.IndexByte(rest, '/')
	if slash <= 0 {
		return "", false
	}
	path := strings.TrimSuffix(rest[slash+1:], "/")
	for path != "" {
		seg, tail, found := strings.Cut(path, "/")
		if !found {
			return "", false
		}
		ai := seg
		if n, ok := shortNames[ai]; ok {
			ai = n
		}
		pk, ok := primaryKeys[ai]
		value, pairs, _ := strings.Cut(tail, "/")
		if !ok || len(value) < 5 || !gs1.Digits(value[:4]) {
			path = tail
			continue
		}
		if ai == "01" {
			switch len(value) {
			case 13:
				value = "0" + value
			case 12:
				value = "00" + value
			case 8:
				value = "000000" + value
			}
		}
		if pk.digits > 0 && (len(value) != pk.digits || !gs1.Digits(value)) {
			return "", false
		}
		// The key qualifiers kept, finest first; the first occurrence of
		// each AI counts.
		best, bestRank := "", len(pk.qualifiers)
		bestAI := ""
		seen := map[string]bool(nil)
		for pairs != "" {
			k, r1, ok1 := strings.Cut(pairs, "/")
			v, r2, _ := strings.Cut(r1, "/")
			if !ok1 {
				return "", false
			}
			if n, ok := shortNames[k]; ok {
				k = n
			}
			if !seen[k] {
				if seen == nil {
					seen = make(map[string]bool, 4)
				}
				seen[k] = true
				for rank, q := range pk.qualifiers {
					if q == k && rank < bestRank && v != "" {
						best, bestRank, bestAI = v, rank, q
					}
				}
			}
			pairs = r2
		}
		out := canonicalHost + "/" + ai + "/" + value
		if bestAI != "" {
			out += "/" + bestAI + "/" + best
		}
		return out, true
	}
	return "", false
}

// hasPrefixFold reports whether s begins with prefix, ignoring ASCII case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

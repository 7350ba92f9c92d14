package dscsa

import (
	"slices"
	"strings"

	"github.com/deadletter/deadletter/shared/codes"
)

// bizSteps is the CBV 2.0 business-step vocabulary (bare words).
var bizSteps = wordSet(
	"accepting", "arriving", "assembling", "collecting", "commissioning",
	"consigning", "creating_class_instance", "cycle_counting",
	"decommissioning", "departing", "destroying", "disassembling",
	"dispensing", "encoding", "entering_exiting", "holding", "inspecting",
	"installing", "killing", "loading", "other", "packing", "picking",
	"receiving", "removing", "repackaging", "repairing", "replacing",
	"reserving", "retail_selling", "sampling", "sensor_reporting",
	"shipping", "staging_outbound", "stock_taking", "stocking", "storing",
	"transporting", "unloading", "unpacking", "void_shipping",
)

// dispositions is the CBV 2.0 disposition vocabulary (bare words).
var dispositions = wordSet(
	"active", "available", "completeness_inferred", "completeness_verified",
	"conformant", "container_closed", "container_open", "damaged",
	"destroyed", "dispensed", "disposed", "encoded", "expired",
	"in_progress", "in_transit", "inactive", "mismatch_class",
	"mismatch_instance", "mismatch_quantity", "needs_replacement",
	"no_pedigree_match", "non_conformant", "non_sellable_other",
	"partially_dispensed", "recalled", "reserved", "retail_sold",
	"returned", "sellable_accessible", "sellable_not_accessible", "stolen",
	"unavailable", "unknown",
)

// The URI forms a CBV term may take: the CBV 1.x URN, the CBV 2.0 web
// URI, and the compact IRI of the EPCIS 2.0 JSON-LD context.
var (
	bizStepPrefixes = []string{
		"urn:epcglobal:cbv:bizstep:",
		"https://ref.gs1.org/cbv/BizStep-",
		"cbv:BizStep-",
	}
	dispositionPrefixes = []string{
		"urn:epcglobal:cbv:disp:",
		"https://ref.gs1.org/cbv/Disp-",
		"cbv:Disp-",
	}
	bttPrefixes = []string{
		"urn:epcglobal:cbv:btt:",
		"https://ref.gs1.org/cbv/BTT-",
		"cbv:BTT-",
	}
	sdtPrefixes = []string{
		"urn:epcglobal:cbv:sdt:",
		"https://ref.gs1.org/cbv/SDT-",
		"cbv:SDT-",
	}
)

func wordSet(words ...string) map[string]struct{} {
	m := make(map[string]struct{}, len(words))
	for _, w := range words {
		m[w] = struct{}{}
	}
	return m
}

// hasPrefixFold reports whether s begins with prefix, ignoring ASCII case
// (URN schemes and namespace identifiers, and URI hosts, are
// case-insensitive).
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// stripVocab removes the first matching prefix of a CBV term.
func stripVocab(s string, prefixes []string) string {
	for _, p := range prefixes {
		if hasPrefixFold(s, p) {
			return s[len(p):]
		}
	}
	return s
}

// normBizStep returns the bare CBV word of a bizStep given as a bare word,
// a CBV URN, a CBV web URI or a compact IRI; ok is false for anything that
// is not a CBV 2.0 business step (custom URIs cannot name a subject token).
func normBizStep(s string) (string, bool) {
	w := stripVocab(strings.TrimSpace(s), bizStepPrefixes)
	_, ok := bizSteps[w]
	return w, ok
}

// normDisposition returns the bare CBV word of a CBV disposition in any of
// its forms; any other value (EPCIS allows user-defined URIs) is returned
// trimmed but otherwise unchanged.
func normDisposition(s string) string {
	s = strings.TrimSpace(s)
	w := stripVocab(s, dispositionPrefixes)
	if _, ok := dispositions[w]; ok {
		return w
	}
	return s
}

// readDisposition returns the disposition of a document (its bare CBV
// word, or a URI of the sender's own as written, trimmed; "" when it has
// none): INVALID_DISPOSITION for one written as a CBV disposition that is
// none, a bare word (in_transt) or a word in the CBV's own URN, web URI or
// compact IRI (urn:epcglobal:cbv:disp:in-transit), which no reader could
// take for a disposition of the sender's own (EPCIS names those by URIs).
func readDisposition(doc map[string]any) (string, error) {
	d, ok := doc["disposition"].(string)
	if !ok {
		return "", nil
	}
	s := strings.TrimSpace(d)
	w := stripVocab(s, dispositionPrefixes)
	if _, ok := dispositions[w]; ok {
		return w, nil
	}
	if w != s || !strings.Contains(s, ":") {
		return "", codes.Errorf(InvalidDisposition,
			"disposition must be a CBV 2.0 disposition (bare word, urn:epcglobal:cbv:disp: or https://ref.gs1.org/cbv/Disp- form) or a URI of your own")
	}
	return s, nil
}

// normSDT returns the bare word of a source/destination type.
func normSDT(s string) string {
	return stripVocab(strings.TrimSpace(s), sdtPrefixes)
}

// normBTT returns the bare word of a business transaction type given in a
// CBV form (po, desadv, inv...); any other type is returned trimmed.
func normBTT(s string) string {
	return stripVocab(strings.TrimSpace(s), bttPrefixes)
}

// BizSteps returns the CBV 2.0 business steps (bare words, sorted): the
// subject event-type tokens of the domain.
func BizSteps() []string {
	out := make([]string, 0, len(bizSteps))
	for w := range bizSteps {
		out = append(out, w)
	}
	slices.Sort(out)
	return out
}

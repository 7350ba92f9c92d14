package eventhash

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ExactDigest returns the lowercase hex SHA-256 digest of an event's exact
// content (Exact): what the event hash ID leaves out to be
// representation-independent (a quantity's digits beyond a float's, the
// sub-millisecond digits of a time, the structure of an extension element,
// leading zeros of a text) it keeps; what only the representation changes
// it does not.
func ExactDigest(ev map[string]any, ctx any) string {
	sum := sha256.Sum256(Exact(ev, ctx))
	return hex.EncodeToString(sum[:])
}

// Exact returns the exact content of an event (in the EPCIS 2.0 JSON form,
// decoded with numbers as json.Number; ctx as for ID) as canonical bytes
// (an object "{name:value,...}", an array "[...]", a text as its length,
// a colon and its bytes, null "~"): the event's members, every value as
// the event states it, so that two events have the same exact content when they are
// the same event sent as XML or JSON, with their members and lists in
// another order, other namespace prefixes, CBV URNs, bare words, compact
// IRIs or web URIs for one CBV value, EPC URNs or their Digital Link URIs
// on id.gs1.org, another time-zone notation of one instant, or another
// recordTime; and differ when any value differs:
//
//   - member names with their namespace ("{ns}local", as the hash writes
//     them; the EPCIS context's prefixes too);
//   - the members of an object sorted, an array's entries one member each
//     (a list is unordered in EPCIS: the standard sorts it for the hash),
//     so that a one-entry list and its entry are alike;
//   - a number, and the text of a quantity or a sensor value
//     (quantity, value, minValue, maxValue, meanValue, sDev, percRank,
//     percValue: xsd:decimal and xsd:double in the standard, whose value
//     space is the decimal number), as its exact decimal value: 2, 2.0 and
//     2e0 alike, 9007199254740993 and 9007199254740992 not, nor 2 and
//     2.0000000000000001; any other text as it is written, trimmed ("007"
//     stays "007");
//   - eventTime, time, startTime and endTime as the instant in UTC with
//     all their digits; true and false as text, null as null;
//   - an object's "#text" kept as a member (an XML element with
//     attributes, mapped: {"#text":"500"} is not "500");
//   - eventID, recordTime, errorDeclaration, @context and comments left
//     out, as the hash leaves them out.
func Exact(ev map[string]any, ctx any) []byte {
	if ctx == nil {
		ctx = ev["@context"]
	}
	// The exact form needs the prefixes and the offset, not the
	// vocabulary URIs the pre-hash replaces other values by.
	h := &hasher{ns: namespaces(ctx)}
	h.offset, _ = ev["eventTimeZoneOffset"].(string)
	return h.exactObject(make([]byte, 0, 1024), ev, "", true)
}

// exactLeftOut are the members outside the exact content, at any level;
// exactTopLeftOut those of the event itself.
var (
	exactLeftOut    = map[string]bool{"@context": true, "comment": true, "rdfs:comment": true}
	exactTopLeftOut = map[string]bool{"eventID": true, "recordTime": true, "errorDeclaration": true}
)

// decimalMembers are the members whose value space is the decimal number.
var decimalMembers = map[string]bool{
	"quantity": true, "value": true, "minValue": true, "maxValue": true, "meanValue": true,
	"sDev": true, "percRank": true, "percValue": true,
}

// timeMembers are the members whose value is an instant.
var timeMembers = map[string]bool{"eventTime": true, "time": true, "startTime": true, "endTime": true}

// exactSpan locates one member in an object's scratch buffer: its name in
// [name, value), its value in [value, end).
type exactSpan struct{ name, value, end int }

// exactObject appends an object's exact form: its members, each
// "name":value, sorted, an array's entries each a member of the name.
func (h *hasher) exactObject(out []byte, obj map[string]any, scope string, top bool) []byte {
	buf := make([]byte, 0, 64*len(obj))
	spans := make([]exactSpan, 0, len(obj))
	for k, v := range obj {
		if exactLeftOut[k] || top && exactTopLeftOut[k] {
			continue
		}
		inner := scope
		switch k {
		case "bizTransactionList", "sourceList", "destinationList", "sensorElementList", "errorDeclaration", "persistentDisposition":
			inner = k
		}
		name := h.exactKey(k)
		if arr, ok := v.([]any); ok {
			for _, e := range arr {
				start := len(buf)
				buf = appendText(buf, name)
				mid := len(buf)
				buf = h.exactValue(buf, e, inner, k)
				spans = append(spans, exactSpan{start, mid, len(buf)})
			}
			continue
		}
		start := len(buf)
		buf = appendText(buf, name)
		mid := len(buf)
		buf = h.exactValue(buf, v, inner, k)
		spans = append(spans, exactSpan{start, mid, len(buf)})
	}
	slices.SortFunc(spans, func(a, b exactSpan) int {
		if c := bytes.Compare(buf[a.name:a.value], buf[b.name:b.value]); c != 0 {
			return c
		}
		return bytes.Compare(buf[a.value:a.end], buf[b.value:b.end])
	})
	out = append(out, '{')
	for i, sp := range spans {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, buf[sp.name:sp.value]...)
		out = append(out, ':')
		out = append(out, buf[sp.value:sp.end]...)
	}
	return append(out, '}')
}

// exactValue appends one value's exact form; key is its member's name,
// scope the structure it is in.
func (h *hasher) exactValue(b []byte, v any, scope, key string) []byte {
	switch x := v.(type) {
	case map[string]any:
		return h.exactObject(b, x, scope, false)
	case []any:
		// An array in an array: its entries sorted.
		items := make([]string, 0, len(x))
		for _, e := range x {
			items = append(items, string(h.exactValue(nil, e, scope, key)))
		}
		slices.Sort(items)
		b = append(b, '[')
		for i, s := range items {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, s...)
		}
		return append(b, ']')
	case json.Number:
		return appendText(b, exactDecimal(string(x)))
	case float64:
		return appendText(b, exactDecimal(strconv.FormatFloat(x, 'g', -1, 64)))
	case bool:
		return appendText(b, strconv.FormatBool(x))
	case string:
		return appendText(b, h.exactText(strings.TrimSpace(x), scope, key))
	}
	return append(b, '~') // null
}

// appendText appends a text as its byte length, a colon and its bytes
// ("5:Müll"): unambiguous without escaping.
func appendText(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// exactText is a text's exact form: a decimal member's decimal value, an
// instant in UTC, a CBV value as its web URI, a compact IRI expanded, an
// EPC URN as its Digital Link URI; otherwise the text.
func (h *hasher) exactText(s, scope, key string) string {
	switch {
	case decimalMembers[key] && isDecimal(s):
		return exactDecimal(s)
	case timeMembers[key]:
		return exactTime(s, h.offset)
	}
	if vocab := vocabularyOf(scope, key); vocab != "" {
		if _, ok := cbvWords[vocab][s]; ok {
			return vocabBase(vocab) + s
		}
	}
	s = h.expandValue(s)
	if strings.Contains(s, "urn:epcglobal:cbv:") {
		s = urnVocab.Replace(s)
	}
	if len(s) > len("urn:epc:") && strings.EqualFold(s[:len("urn:epc:")], "urn:epc:") {
		if dl, ok := DigitalLink(s); ok {
			return dl
		}
	}
	return s
}

// exactKey writes a member name with its namespace: "{ns}local" for a
// declared prefix or one of the EPCIS context's.
func (h *hasher) exactKey(k string) string {
	p, local, ok := strings.Cut(k, ":")
	if !ok {
		return k
	}
	if ns, ok := h.ns[p]; ok {
		return "{" + ns + "}" + local
	}
	if ns, ok := contextPrefixes[p]; ok {
		return "{" + ns + "}" + local
	}
	return k
}

// exactTime writes an instant in UTC with all its digits ("…T14:15:00Z",
// "…T14:15:00.1175Z"); a time without an offset is read in offset; a text
// that is no time is kept.
func exactTime(s, offset string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		local, lerr := time.Parse("2006-01-02T15:04:05.999999999", s)
		off, ok := parseOffset(strings.TrimSpace(offset))
		if lerr != nil || !ok {
			return s
		}
		t = local.Add(-off)
	}
	return t.UTC().Format("2006-01-02T15:04:05.999999999Z")
}

// exactDecimal writes a decimal number ([+-]digits[.digits][e[+-]digits])
// by its exact value: no sign for zero, no leading zeros, no trailing
// zeros after the point, no exponent for a value whose digits fit in 40
// places ("2", "0.5", "9007199254740993", "2.0000000000000001"), else
// "<digits>e<exponent>". Any other text is kept.
func exactDecimal(s string) string {
	if !isDecimal(s) {
		return s
	}
	neg := false
	switch s[0] {
	case '-':
		neg, s = true, s[1:]
	case '+':
		s = s[1:]
	}
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	exp := 0
	if hasExp {
		if len(strings.TrimLeft(strings.TrimLeft(expText, "+-"), "0")) > 6 {
			return s // an exponent beyond any quantity: kept as written
		}
		e, err := strconv.Atoi(expText)
		if err != nil {
			return s
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		exp++
	}
	if digits == "" {
		return "0"
	}
	var out string
	switch {
	case exp >= 0 && len(digits)+exp <= 40:
		out = digits + strings.Repeat("0", exp)
	case exp < 0 && -exp < len(digits):
		out = digits[:len(digits)+exp] + "." + digits[len(digits)+exp:]
	case exp < 0 && -exp <= 40:
		out = "0." + strings.Repeat("0", -exp-len(digits)) + digits
	default:
		out = digits + "e" + strconv.Itoa(exp)
	}
	if neg {
		return "-" + out
	}
	return out
}

// Package eventhash computes the EPCIS event hash ID of CBV 2.0 (section
// "EPCIS Event Hash ID"): a representation-independent fingerprint of one
// EPCIS event, "ni:///sha-256;<64 hex>?ver=CBV2.0" (RFC 6920), over a
// pre-hash string built from the event's data in the canonical property
// order, so that the same event sent as XML or JSON, with its lists in
// another order, other namespace prefixes, another time-zone notation, CBV
// URNs instead of web URIs or EPC URNs instead of GS1 Digital Link URIs
// gets the same ID, and any change of a value or a field another one.
//
// The input is one event in the EPCIS 2.0 JSON / JSON-LD form, decoded with
// numbers as json.Number (package gate's Decode), and the JSON-LD context
// that declares its namespace prefixes (the event's own "@context", or its
// document's). The pre-hash string is, without separators:
//
//   - eventType=<type>
//   - in this order, when present and not empty: eventTime,
//     eventTimeZoneOffset, certificationInfo, parentID, epcList,
//     inputEPCList, childEPCs, quantityList, childQuantityList,
//     inputQuantityList, outputEPCList, outputQuantityList, action,
//     transformationID, bizStep, disposition, persistentDisposition (set,
//     unset), readPoint (id), bizLocation (id), sensorElementList
//     (sensorMetadata, sensorReport in their own field orders): each
//     "<name>=<value>", a list as its name followed by its sorted entries
//     ("epcListepc=...epc=..."), an object as its name followed by its
//     fields; user extensions of readPoint, bizLocation and the sensor
//     structures at the end of their parent;
//   - then every other field except eventID, recordTime, errorDeclaration
//     and @context, each as a string built the same way, sorted:
//     bizTransactionList, sourceList and destinationList (each entry
//     "type=<type><name>=<value>"), ilmd, and user extensions
//     ("{<namespace>}<local name>=<value>", nested ones within).
//
// Values are trimmed; times in UTC with milliseconds ("…T10:00:30.000Z",
// the third decimal rounded up when the fourth is 5 to 9); CBV URNs and
// CBV bare words of bizStep, disposition, business-transaction and
// source/destination types as CBV web URIs; compact IRIs of a declared (or
// the EPCIS context's) prefix expanded; EPC URNs (sgtin, sscc, sgln, pgln,
// grai, giai, gsrn, gsrnp, gdti, lgtin classes, sgtin patterns) and GS1
// Digital Link URIs on any host as constrained canonical Digital Link
// URIs on id.gs1.org, without query string and with the finest key
// qualifier only; numbers without trailing zeros. Lists are sorted by the
// byte order of their entries' strings.
//
// Where the standard's text and the reference implementation of its
// authors (github.com/RalphTro/epcis-event-hash-generator) differ, the
// published example hashes decide; the package's tests compare with them.
package eventhash

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Version is the CBV version of the algorithm, as the ID names it.
const Version = "CBV2.0"

// Prefix begins every ID this package returns.
const Prefix = "ni:///sha-256;"

// ID returns the event hash ID of ev (SHA-256), with the namespace
// prefixes of ctx (a JSON-LD @context: a string, an object or an array of
// them; nil for the event's own "@context"). It never fails: any JSON
// object has an ID.
func ID(ev map[string]any, ctx any) string {
	if ctx == nil {
		ctx = ev["@context"]
	}
	h := hasher{ns: namespaces(ctx)}
	var b strings.Builder
	h.event(&b, ev)
	d := sha256.New()
	_, _ = io.WriteString(d, b.String())
	var sum [sha256.Size]byte
	var out [len(Prefix) + 2*sha256.Size + len("?ver=") + len(Version)]byte
	n := copy(out[:], Prefix)
	hex.Encode(out[n:], d.Sum(sum[:0]))
	n += 2 * sha256.Size
	n += copy(out[n:], "?ver=")
	copy(out[n:], Version)
	return string(out[:])
}

// Digest returns the lowercase hex SHA-256 digest an event hash ID names
// (the 64 hex digits between Prefix and "?ver="), and whether id is an ID
// this package returns.
func Digest(id string) (string, bool) {
	const n = len(Prefix) + 2*sha256.Size
	if len(id) != n+len("?ver=")+len(Version) || id[:len(Prefix)] != Prefix || id[n:] != "?ver="+Version {
		return "", false
	}
	d := id[len(Prefix):n]
	for i := 0; i < len(d); i++ {
		if c := d[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", false
		}
	}
	return d, true
}

// PreHash returns the pre-hash string of ev (see the package
// documentation).
func PreHash(ev map[string]any, ctx any) string {
	if ctx == nil {
		ctx = ev["@context"]
	}
	h := hasher{ns: namespaces(ctx)}
	var b strings.Builder
	h.event(&b, ev)
	return b.String()
}

// ignored are the fields that never take part in the hash: identifiers
// and times a repository assigns, the JSON-LD context, and an error
// declaration (so that a correction matches the event it corrects).
var ignored = map[string]bool{
	"eventID": true, "recordTime": true, "errorDeclaration": true, "type": true,
	"@context": true, "#text": true, "rdfs:comment": true, "comment": true,
}

// defaultNamespaces are the prefixes the EPCIS 2.0 JSON-LD context
// declares.
var defaultNamespaces = map[string]string{
	"epcis":  "https://ref.gs1.org/epcis/",
	"cbv":    "https://ref.gs1.org/cbv/",
	"cbvmda": "urn:epcglobal:cbv:mda:",
	"gs1":    "https://gs1.org/voc/",
}

// namespaces collects the prefix declarations of a JSON-LD context (nil
// when it declares none).
func namespaces(ctx any) map[string]string {
	var ns map[string]string
	var add func(c any)
	add = func(c any) {
		switch x := c.(type) {
		case []any:
			for _, e := range x {
				add(e)
			}
		case map[string]any:
			for k, v := range x {
				if s, ok := v.(string); ok && !strings.HasPrefix(k, "@") {
					if ns == nil {
						ns = make(map[string]string, 4)
					}
					ns[k] = s
				}
			}
		}
	}
	add(ctx)
	return ns
}

// namespace returns the namespace a prefix stands for: the context's
// declaration, else the EPCIS context's.
func (h *hasher) namespace(prefix string) (string, bool) {
	if ns, ok := h.ns[prefix]; ok {
		return ns, true
	}
	ns, ok := defaultNamespaces[prefix]
	return ns, ok
}

type hasher struct {
	ns map[string]string
	// offset is the event's eventTimeZoneOffset, which places an
	// eventTime written without an offset.
	offset string
}

// field is one step of a canonical property order: a field name, and the
// order of its children when it has some.
type field struct {
	name     string
	children []field
	list     string // for a list of values: the name of each entry
	time     bool   // a timestamp
}

var quantityElement = []field{{name: "epcClass"}, {name: "quantity"}, {name: "uom"}}

var sensorMetadataOrder = []field{
	{name: "time", time: true}, {name: "startTime", time: true}, {name: "endTime", time: true},
	{name: "deviceID"}, {name: "deviceMetadata"}, {name: "rawData"}, {name: "dataProcessingMethod"},
	{name: "bizRules"},
}

var sensorReportOrder = []field{
	{name: "type"}, {name: "exception"}, {name: "deviceID"}, {name: "deviceMetadata"}, {name: "rawData"},
	{name: "dataProcessingMethod"}, {name: "time", time: true}, {name: "microorganism"},
	{name: "chemicalSubstance"}, {name: "value"}, {name: "component"}, {name: "stringValue"},
	{name: "booleanValue"}, {name: "hexBinaryValue"}, {name: "uriValue"}, {name: "minValue"},
	{name: "maxValue"}, {name: "meanValue"}, {name: "sDev"}, {name: "percRank"}, {name: "percValue"},
	{name: "uom"}, {name: "coordinateReferenceSystem"},
}

// eventOrder is the canonical property order of an event.
var eventOrder = []field{
	{name: "eventTime", time: true},
	{name: "eventTimeZoneOffset"},
	{name: "certificationInfo"},
	{name: "parentID"},
	{name: "epcList", list: "epc"},
	{name: "inputEPCList", list: "epc"},
	{name: "childEPCs", list: "epc"},
	{name: "quantityList", list: "quantityElement", children: quantityElement},
	{name: "childQuantityList", list: "quantityElement", children: quantityElement},
	{name: "inputQuantityList", list: "quantityElement", children: quantityElement},
	{name: "outputEPCList", list: "epc"},
	{name: "outputQuantityList", list: "quantityElement", children: quantityElement},
	{name: "action"},
	{name: "transformationID"},
	{name: "bizStep"},
	{name: "disposition"},
	{name: "persistentDisposition", children: []field{{name: "set"}, {name: "unset"}}},
	{name: "readPoint", children: []field{{name: "id"}}},
	{name: "bizLocation", children: []field{{name: "id"}}},
	{name: "sensorElementList", list: "sensorElement", children: []field{
		{name: "sensorMetadata", children: sensorMetadataOrder},
		{name: "sensorReport", children: sensorReportOrder},
	}},
}

// inOrder marks the event fields eventOrder consumes.
var inOrder = func() map[string]bool {
	m := make(map[string]bool, len(eventOrder))
	for _, f := range eventOrder {
		m[f.name] = true
	}
	return m
}()

func (h *hasher) event(b *strings.Builder, ev map[string]any) {
	h.offset, _ = ev["eventTimeZoneOffset"].(string)
	b.Grow(512)
	b.WriteString("eventType=")
	if t, ok := ev["type"].(string); ok {
		b.WriteString(strings.TrimSpace(t))
	}
	for _, f := range eventOrder {
		v, ok := ev[f.name]
		if !ok {
			continue
		}
		b.WriteString(h.ordered(f, v))
	}
	var rest []string
	for k, v := range ev {
		if ignored[k] || inOrder[k] {
			continue
		}
		rest = h.appendGeneric(rest, k, v)
	}
	slices.Sort(rest)
	for _, s := range rest {
		b.WriteString(s)
	}
}

// ordered renders one field of a canonical order with its value.
func (h *hasher) ordered(f field, v any) string {
	switch {
	case f.list != "":
		arr, _ := v.([]any)
		items := make([]string, 0, len(arr))
		for _, e := range arr {
			if s := h.entry(f, e); s != "" {
				items = append(items, s)
			}
		}
		if len(items) == 0 {
			return ""
		}
		slices.Sort(items)
		return f.name + strings.Join(items, "")
	case f.children != nil:
		obj, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		inner := h.object(obj, f.children)
		if inner == "" {
			return ""
		}
		return f.name + inner
	}
	// A plain value, or an array of them (certificationInfo, set).
	if arr, ok := v.([]any); ok {
		items := make([]string, 0, len(arr))
		for _, e := range arr {
			if s := h.plain(f, e); s != "" {
				items = append(items, s)
			}
		}
		slices.Sort(items)
		return strings.Join(items, "")
	}
	return h.plain(f, v)
}

// entry renders one entry of a list field ("epc=...", "quantityElement...",
// "sensorElement...").
func (h *hasher) entry(f field, e any) string {
	if f.children == nil {
		return h.plain(field{name: f.list}, e)
	}
	obj, ok := e.(map[string]any)
	if !ok {
		return ""
	}
	inner := h.object(obj, f.children)
	if inner == "" {
		return ""
	}
	return f.list + inner
}

// object renders an object's fields in the given order, then its user
// extensions, sorted.
func (h *hasher) object(obj map[string]any, order []field) string {
	var b strings.Builder
	for _, f := range order {
		v, ok := obj[f.name]
		if !ok {
			continue
		}
		if f.children != nil {
			// A structure that may repeat (sensorReport).
			var items []string
			for _, e := range asList(v) {
				o, ok := e.(map[string]any)
				if !ok {
					continue
				}
				if inner := h.object(o, f.children); inner != "" {
					items = append(items, f.name+inner)
				}
			}
			slices.Sort(items)
			for _, s := range items {
				b.WriteString(s)
			}
			continue
		}
		b.WriteString(h.ordered(f, v))
	}
	var ext []string
	for k, v := range obj {
		if inFields(order, k) || ignored[k] {
			continue
		}
		ext = h.appendGeneric(ext, k, v)
	}
	slices.Sort(ext)
	for _, s := range ext {
		b.WriteString(s)
	}
	return b.String()
}

func inFields(order []field, name string) bool {
	for _, f := range order {
		if f.name == name {
			return true
		}
	}
	return false
}

func asList(v any) []any {
	if a, ok := v.([]any); ok {
		return a
	}
	return []any{v}
}

// plain renders "<name>=<value>" for a field of a canonical order; "" for
// an empty value or one that is not a scalar.
func (h *hasher) plain(f field, v any) string {
	s, ok := h.scalar(v)
	if !ok {
		return ""
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if f.time {
		s = h.normTime(s)
	} else {
		s = canonValue(h.vocab(f.name, h.expandValue(s)))
	}
	return f.name + "=" + s
}

// scalar returns a JSON scalar as text (numbers as written).
func (h *hasher) scalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}

// appendGeneric appends the strings of a field outside the canonical
// order: one per value (an array gives one per element), an object as its
// name followed by its sorted fields.
func (h *hasher) appendGeneric(out []string, key string, v any) []string {
	if arr, ok := v.([]any); ok {
		switch key {
		case "bizTransactionList":
			return appendNonEmpty(out, h.typedList(key, "bizTransaction", "BTT-", arr))
		case "sourceList":
			return appendNonEmpty(out, h.typedList(key, "source", "SDT-", arr))
		case "destinationList":
			return appendNonEmpty(out, h.typedList(key, "destination", "SDT-", arr))
		}
		name := h.expandKey(key)
		for _, e := range arr {
			out = append(out, h.generic(name, e))
		}
		return out
	}
	return append(out, h.generic(h.expandKey(key), v))
}

func appendNonEmpty(out []string, s string) []string {
	if s == "" {
		return out
	}
	return append(out, s)
}

// generic renders one value of a field outside the canonical order.
func (h *hasher) generic(name string, v any) string {
	if obj, ok := v.(map[string]any); ok {
		var parts []string
		for k, c := range obj {
			if ignored[k] {
				continue
			}
			parts = h.appendGeneric(parts, k, c)
		}
		slices.Sort(parts)
		return name + strings.Join(parts, "")
	}
	s, ok := h.scalar(v)
	if !ok {
		return name
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return name
	}
	return name + "=" + canonValue(h.expandValue(s))
}

// typedList renders bizTransactionList, sourceList or destinationList:
// the list's name, then each entry as "type=<type><member>=<value>",
// sorted.
func (h *hasher) typedList(name, member, vocabPrefix string, arr []any) string {
	items := make([]string, 0, len(arr))
	for _, e := range arr {
		obj, ok := e.(map[string]any)
		if !ok {
			continue
		}
		var b strings.Builder
		b.Grow(160)
		if t, ok := h.scalar(obj["type"]); ok && strings.TrimSpace(t) != "" {
			b.WriteString("type=")
			b.WriteString(canonValue(cbvWord(vocabPrefix, h.expandValue(strings.TrimSpace(t)))))
		}
		if v, ok := h.scalar(obj[member]); ok && strings.TrimSpace(v) != "" {
			b.WriteString(member)
			b.WriteByte('=')
			b.WriteString(canonValue(h.expandValue(strings.TrimSpace(v))))
		}
		if b.Len() > 0 {
			items = append(items, b.String())
		}
	}
	if len(items) == 0 {
		return ""
	}
	slices.Sort(items)
	return name + strings.Join(items, "")
}

// expandKey writes a compact member name "prefix:local" of a declared
// prefix as "{namespace}local".
func (h *hasher) expandKey(k string) string {
	p, local, ok := strings.Cut(k, ":")
	if !ok {
		return k
	}
	if ns, ok := h.namespace(p); ok {
		return "{" + ns + "}" + local
	}
	return k
}

// expandValue expands a compact IRI value of a declared prefix.
func (h *hasher) expandValue(s string) string {
	p, rest, ok := strings.Cut(s, ":")
	if !ok || strings.HasPrefix(rest, "//") {
		return s
	}
	if ns, ok := h.namespace(p); ok {
		return ns + rest
	}
	return s
}

// vocab expands the CBV bare words of the fields whose JSON-LD context
// declares a vocabulary.
func (h *hasher) vocab(name, s string) string {
	switch name {
	case "bizStep":
		return cbvWord("BizStep-", s)
	case "disposition", "set", "unset":
		return cbvWord("Disp-", s)
	case "type", "exception":
		// sensorReport: GS1 Web Vocabulary terms (gs1:Temperature,
		// gs1:ALARM_CONDITION), bare in JSON.
		if !strings.Contains(s, ":") {
			return "https://gs1.org/voc/" + s
		}
	}
	return s
}

// cbvWord returns the CBV web URI of a bare CBV word of the vocabulary
// whose terms begin with prefix ("BizStep-"); anything else unchanged.
func cbvWord(prefix, s string) string {
	if strings.ContainsAny(s, ":/") {
		return s
	}
	if _, ok := cbvWords[prefix][s]; ok {
		return "https://ref.gs1.org/cbv/" + prefix + s
	}
	return s
}

// urnVocab maps the CBV 1.x URN prefixes to their CBV 2.0 web URI
// prefixes.
var urnVocab = [][2]string{
	{"urn:epcglobal:cbv:bizstep:", "https://ref.gs1.org/cbv/BizStep-"},
	{"urn:epcglobal:cbv:disp:", "https://ref.gs1.org/cbv/Disp-"},
	{"urn:epcglobal:cbv:btt:", "https://ref.gs1.org/cbv/BTT-"},
	{"urn:epcglobal:cbv:sdt:", "https://ref.gs1.org/cbv/SDT-"},
	{"urn:epcglobal:cbv:er:", "https://ref.gs1.org/cbv/ER-"},
}

// canonValue applies the value normalizations: CBV URNs as web URIs,
// numbers without trailing zeros, EPC URNs and Digital Link URIs as
// constrained canonical Digital Link URIs.
func canonValue(s string) string {
	if strings.HasPrefix(s, "urn:epcglobal:cbv:") {
		for _, p := range urnVocab {
			if rest, ok := strings.CutPrefix(s, p[0]); ok {
				return p[1] + rest
			}
		}
		return s
	}
	if n, ok := normNumber(s); ok {
		return n
	}
	if dl, ok := DigitalLink(s); ok {
		return dl
	}
	return s
}

// normTime writes an RFC 3339 time in UTC with milliseconds, rounded half
// up; a time without an offset is read in the event's
// eventTimeZoneOffset; a value that does not parse is kept.
func (h *hasher) normTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		local, lerr := time.Parse("2006-01-02T15:04:05.999999999", s)
		off, ok := parseOffset(strings.TrimSpace(h.offset))
		if lerr != nil || !ok {
			return s
		}
		t = local.Add(-off)
	}
	return t.UTC().Round(time.Millisecond).Format("2006-01-02T15:04:05.000Z")
}

// parseOffset reads ±hh:mm.
func parseOffset(s string) (time.Duration, bool) {
	if len(s) != 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':' || !isDecimal(s[1:3]) || !isDecimal(s[4:6]) ||
		strings.ContainsAny(s[1:3]+s[4:6], "+-.") {
		return 0, false
	}
	h, err1 := strconv.Atoi(s[1:3])
	m, err2 := strconv.Atoi(s[4:6])
	if err1 != nil || err2 != nil || h > 14 || m > 59 {
		return 0, false
	}
	d := time.Duration(h)*time.Hour + time.Duration(m)*time.Minute
	if s[0] == '-' {
		d = -d
	}
	return d, true
}

// normNumber writes a decimal number ("600.0", "+1.50", "2e3") without
// trailing zeros, an integral one as an integer; ok is false for anything
// else.
func normNumber(s string) (string, bool) {
	if !isDecimal(s) {
		return "", false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", false
	}
	if f == math.Trunc(f) {
		if math.Abs(f) < 1e18 {
			return strconv.FormatInt(int64(f), 10), true
		}
		return new(big.Float).SetFloat64(f).Text('f', 0), true
	}
	return strconv.FormatFloat(f, 'g', -1, 64), true
}

// isDecimal reports whether s is [+-]digits[.digits][e[+-]digits] (at
// least one digit before or after the point).
func isDecimal(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			exp++
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}

package eventhash

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
)

// LegacyID returns the event hash ID as deadletter computed it before
// 2026-12-07 (its own reading of CBV 2.0, which differs from the reference
// implementation's on sensor data, booleans, numbers of 1e6 and more,
// extensions of namespaces without a trailing "/" and the "#text" of an
// extension): the identity "cbv2-event-hash" that LEDGER entries and key
// states of that time record. It is kept, frozen, only so that those
// records keep validating (package idempotency, HashMatches); nothing new
// is keyed or compared by it.
func LegacyID(ev map[string]any, ctx any) string {
	if ctx == nil {
		ctx = ev["@context"]
	}
	h := v1Hasher{ns: v1NamespacesOf(ctx)}
	var b strings.Builder
	h.event(&b, ev)
	sum := sha256.Sum256([]byte(b.String()))
	return Prefix + hex.EncodeToString(sum[:]) + "?ver=" + Version
}

// v1Ignored are the fields that never take part in the hash: identifiers
// and times a repository assigns, the JSON-LD context, and an error
// declaration (so that a correction matches the event it corrects).
var v1Ignored = map[string]bool{
	"eventID": true, "recordTime": true, "errorDeclaration": true, "type": true,
	"@context": true, "#text": true, "rdfs:comment": true, "comment": true,
}

// v1DefaultNamespaces are the prefixes the EPCIS 2.0 JSON-LD context
// declares.
var v1DefaultNamespaces = map[string]string{
	"epcis":  "https://ref.gs1.org/epcis/",
	"cbv":    "https://ref.gs1.org/cbv/",
	"cbvmda": "urn:epcglobal:cbv:mda:",
	"gs1":    "https://gs1.org/voc/",
}

// v1NamespacesOf collects the prefix declarations of a JSON-LD context (nil
// when it declares none).
func v1NamespacesOf(ctx any) map[string]string {
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
func (h *v1Hasher) namespace(prefix string) (string, bool) {
	if ns, ok := h.ns[prefix]; ok {
		return ns, true
	}
	ns, ok := v1DefaultNamespaces[prefix]
	return ns, ok
}

type v1Hasher struct {
	ns map[string]string
	// offset is the event's eventTimeZoneOffset, which places an
	// eventTime written without an offset.
	offset string
}

// v1Field is one step of a canonical property order: a v1Field name, and the
// order of its children when it has some.
type v1Field struct {
	name     string
	children []v1Field
	list     string // for a list of values: the name of each entry
	time     bool   // a timestamp
}

var v1QuantityElement = []v1Field{{name: "epcClass"}, {name: "quantity"}, {name: "uom"}}

var v1SensorMetadataOrder = []v1Field{
	{name: "time", time: true}, {name: "startTime", time: true}, {name: "endTime", time: true},
	{name: "deviceID"}, {name: "deviceMetadata"}, {name: "rawData"}, {name: "dataProcessingMethod"},
	{name: "bizRules"},
}

var v1SensorReportOrder = []v1Field{
	{name: "type"}, {name: "exception"}, {name: "deviceID"}, {name: "deviceMetadata"}, {name: "rawData"},
	{name: "dataProcessingMethod"}, {name: "time", time: true}, {name: "microorganism"},
	{name: "chemicalSubstance"}, {name: "value"}, {name: "component"}, {name: "stringValue"},
	{name: "booleanValue"}, {name: "hexBinaryValue"}, {name: "uriValue"}, {name: "minValue"},
	{name: "maxValue"}, {name: "meanValue"}, {name: "sDev"}, {name: "percRank"}, {name: "percValue"},
	{name: "uom"}, {name: "coordinateReferenceSystem"},
}

// v1EventOrder is the canonical property order of an event.
var v1EventOrder = []v1Field{
	{name: "eventTime", time: true},
	{name: "eventTimeZoneOffset"},
	{name: "certificationInfo"},
	{name: "parentID"},
	{name: "epcList", list: "epc"},
	{name: "inputEPCList", list: "epc"},
	{name: "childEPCs", list: "epc"},
	{name: "quantityList", list: "v1QuantityElement", children: v1QuantityElement},
	{name: "childQuantityList", list: "v1QuantityElement", children: v1QuantityElement},
	{name: "inputQuantityList", list: "v1QuantityElement", children: v1QuantityElement},
	{name: "outputEPCList", list: "epc"},
	{name: "outputQuantityList", list: "v1QuantityElement", children: v1QuantityElement},
	{name: "action"},
	{name: "transformationID"},
	{name: "bizStep"},
	{name: "disposition"},
	{name: "persistentDisposition", children: []v1Field{{name: "set"}, {name: "unset"}}},
	{name: "readPoint", children: []v1Field{{name: "id"}}},
	{name: "bizLocation", children: []v1Field{{name: "id"}}},
	{name: "sensorElementList", list: "sensorElement", children: []v1Field{
		{name: "sensorMetadata", children: v1SensorMetadataOrder},
		{name: "sensorReport", children: v1SensorReportOrder},
	}},
}

// v1InOrder marks the event fields v1EventOrder consumes.
var v1InOrder = func() map[string]bool {
	m := make(map[string]bool, len(v1EventOrder))
	for _, f := range v1EventOrder {
		m[f.name] = true
	}
	return m
}()

func (h *v1Hasher) event(b *strings.Builder, ev map[string]any) {
	h.offset, _ = ev["eventTimeZoneOffset"].(string)
	b.Grow(512)
	b.WriteString("eventType=")
	if t, ok := ev["type"].(string); ok {
		b.WriteString(strings.TrimSpace(t))
	}
	for _, f := range v1EventOrder {
		v, ok := ev[f.name]
		if !ok {
			continue
		}
		b.WriteString(h.ordered(f, v))
	}
	var rest []string
	for k, v := range ev {
		if v1Ignored[k] || v1InOrder[k] {
			continue
		}
		rest = h.appendGeneric(rest, k, v)
	}
	slices.Sort(rest)
	for _, s := range rest {
		b.WriteString(s)
	}
}

// ordered renders one v1Field of a canonical order with its value.
func (h *v1Hasher) ordered(f v1Field, v any) string {
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

// entry renders one entry of a list v1Field ("epc=...", "v1QuantityElement...",
// "sensorElement...").
func (h *v1Hasher) entry(f v1Field, e any) string {
	if f.children == nil {
		return h.plain(v1Field{name: f.list}, e)
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
func (h *v1Hasher) object(obj map[string]any, order []v1Field) string {
	var b strings.Builder
	for _, f := range order {
		v, ok := obj[f.name]
		if !ok {
			continue
		}
		if f.children != nil {
			// A structure that may repeat (sensorReport).
			var items []string
			for _, e := range v1AsList(v) {
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
		if v1InFields(order, k) || v1Ignored[k] {
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

func v1InFields(order []v1Field, name string) bool {
	for _, f := range order {
		if f.name == name {
			return true
		}
	}
	return false
}

func v1AsList(v any) []any {
	if a, ok := v.([]any); ok {
		return a
	}
	return []any{v}
}

// plain renders "<name>=<value>" for a v1Field of a canonical order; "" for
// an empty value or one that is not a scalar.
func (h *v1Hasher) plain(f v1Field, v any) string {
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
		s = v1CanonValue(h.vocab(f.name, h.expandValue(s)))
	}
	return f.name + "=" + s
}

// scalar returns a JSON scalar as text (numbers as written).
func (h *v1Hasher) scalar(v any) (string, bool) {
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

// appendGeneric appends the strings of a v1Field outside the canonical
// order: one per value (an array gives one per element), an object as its
// name followed by its sorted fields.
func (h *v1Hasher) appendGeneric(out []string, key string, v any) []string {
	if arr, ok := v.([]any); ok {
		switch key {
		case "bizTransactionList":
			return v1AppendNonEmpty(out, h.typedList(key, "bizTransaction", "BTT-", arr))
		case "sourceList":
			return v1AppendNonEmpty(out, h.typedList(key, "source", "SDT-", arr))
		case "destinationList":
			return v1AppendNonEmpty(out, h.typedList(key, "destination", "SDT-", arr))
		}
		name := h.expandKey(key)
		for _, e := range arr {
			out = append(out, h.generic(name, e))
		}
		return out
	}
	return append(out, h.generic(h.expandKey(key), v))
}

func v1AppendNonEmpty(out []string, s string) []string {
	if s == "" {
		return out
	}
	return append(out, s)
}

// generic renders one value of a v1Field outside the canonical order.
func (h *v1Hasher) generic(name string, v any) string {
	if obj, ok := v.(map[string]any); ok {
		var parts []string
		for k, c := range obj {
			if v1Ignored[k] {
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
	return name + "=" + v1CanonValue(h.expandValue(s))
}

// typedList renders bizTransactionList, sourceList or destinationList:
// the list's name, then each entry as "type=<type><member>=<value>",
// sorted.
func (h *v1Hasher) typedList(name, member, vocabPrefix string, arr []any) string {
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
			b.WriteString(v1CanonValue(v1CBVWord(vocabPrefix, h.expandValue(strings.TrimSpace(t)))))
		}
		if v, ok := h.scalar(obj[member]); ok && strings.TrimSpace(v) != "" {
			b.WriteString(member)
			b.WriteByte('=')
			b.WriteString(v1CanonValue(h.expandValue(strings.TrimSpace(v))))
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
func (h *v1Hasher) expandKey(k string) string {
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
func (h *v1Hasher) expandValue(s string) string {
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
func (h *v1Hasher) vocab(name, s string) string {
	switch name {
	case "bizStep":
		return v1CBVWord("BizStep-", s)
	case "disposition", "set", "unset":
		return v1CBVWord("Disp-", s)
	case "type", "exception":
		// sensorReport: GS1 Web Vocabulary terms (gs1:Temperature,
		// gs1:ALARM_CONDITION), bare in JSON.
		if !strings.Contains(s, ":") {
			return "https://gs1.org/voc/" + s
		}
	}
	return s
}

// v1CBVWord returns the CBV web URI of a bare CBV word of the vocabulary
// whose terms begin with prefix ("BizStep-"); anything else unchanged.
func v1CBVWord(prefix, s string) string {
	if strings.ContainsAny(s, ":/") {
		return s
	}
	if _, ok := cbvWords[prefix][s]; ok {
		return "https://ref.gs1.org/cbv/" + prefix + s
	}
	return s
}

// v1URNVocab maps the CBV 1.x URN prefixes to their CBV 2.0 web URI
// prefixes.
var v1URNVocab = [][2]string{
	{"urn:epcglobal:cbv:bizstep:", "https://ref.gs1.org/cbv/BizStep-"},
	{"urn:epcglobal:cbv:disp:", "https://ref.gs1.org/cbv/Disp-"},
	{"urn:epcglobal:cbv:btt:", "https://ref.gs1.org/cbv/BTT-"},
	{"urn:epcglobal:cbv:sdt:", "https://ref.gs1.org/cbv/SDT-"},
	{"urn:epcglobal:cbv:er:", "https://ref.gs1.org/cbv/ER-"},
}

// v1CanonValue applies the value normalizations: CBV URNs as web URIs,
// numbers without trailing zeros, EPC URNs and Digital Link URIs as
// constrained canonical Digital Link URIs.
func v1CanonValue(s string) string {
	if strings.HasPrefix(s, "urn:epcglobal:cbv:") {
		for _, p := range v1URNVocab {
			if rest, ok := strings.CutPrefix(s, p[0]); ok {
				return p[1] + rest
			}
		}
		return s
	}
	if n, ok := v1NormNumber(s); ok {
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
func (h *v1Hasher) normTime(s string) string {
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

// v1NormNumber writes a decimal number ("600.0", "+1.50", "2e3") without
// trailing zeros, an integral one as an integer; ok is false for anything
// else.
func v1NormNumber(s string) (string, bool) {
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

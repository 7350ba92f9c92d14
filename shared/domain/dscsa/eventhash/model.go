package eventhash

import (
	"encoding/json"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
)

// node is one element of the model of an event the pre-hash string is
// built from: a name, a text and children, as the reference
// implementation models an event read from JSON or XML. A pair is an
// entry of bizTransactionList, sourceList or destinationList: its two
// children are the entry's type and its value.
type node struct {
	name, text string
	kids       []*node
	pair       bool
	// literal: from an object with "#text" (an XML element with
	// attributes, mapped), which keeps its name.
	literal bool
	// listed: an entry of a JSON array.
	listed bool
}

// hasher builds one event's pre-hash string.
type hasher struct {
	// ns are the prefixes the event's @context (an array) declares.
	ns map[string]string
	// vocab are the vocabulary web URIs the event's values expand to
	// (bareWords).
	vocab []string
	// offset is the event's eventTimeZoneOffset, which places an
	// eventTime written without an offset.
	offset string
	// reference: the reference implementation's derivation
	// (ReferenceID), not the key's; xml: of an event read from XML.
	reference, xml bool
	// diverges: in KeyID, the event has what ReferenceID derives
	// otherwise (IDs).
	diverges bool
}

func newHasher(ev map[string]any, ctx any) *hasher {
	h := &hasher{ns: namespaces(ctx)}
	h.offset, _ = ev["eventTimeZoneOffset"].(string)
	h.vocab = vocabOf(ev, h.ns)
	return h
}

// namespaces collects the prefix declarations of a JSON-LD context that
// is an array (the objects in it); a context that is a string or a single
// object declares none here, as in the reference implementation.
func namespaces(ctx any) map[string]string {
	arr, ok := ctx.([]any)
	if !ok {
		return nil
	}
	var ns map[string]string
	for _, c := range arr {
		obj, ok := c.(map[string]any)
		if !ok {
			continue
		}
		for k, v := range obj {
			if s, ok := v.(string); ok {
				if ns == nil {
					ns = make(map[string]string, 4)
				}
				ns[k] = s
			}
		}
	}
	return ns
}

// modelIgnored are the members that are no node.
var modelIgnored = map[string]bool{"#text": true, "rdfs:comment": true, "comment": true, "@context": true}

// model returns the event's node, its structure corrected (correct).
func (h *hasher) model(ev map[string]any) *node {
	n := h.object(ev)
	n.name = ""
	if t, ok := ev["type"]; ok {
		n.name = h.text(t)
	}
	if h.xml {
		for _, k := range n.kids {
			if k.name != "ilmd" {
				continue
			}
			if !h.reference {
				h.diverges = h.diverges || hasMasterData(k)
				continue
			}
			xmlMasterData(k)
		}
	}
	return correct(n)
}

// mdaPrefix is how package document names the CBV master data of an XML
// ilmd in JSON; mdaXML is its XML namespace, as the reference names such
// an element read from XML.
const (
	mdaPrefix = "cbvmda:"
	mdaXML    = "{urn:epcglobal:cbv:mda}"
)

// hasMasterData reports whether n or a node under it is named as CBV
// master data.
func hasMasterData(n *node) bool {
	for _, k := range n.kids {
		if strings.HasPrefix(k.name, mdaPrefix) || hasMasterData(k) {
			return true
		}
	}
	return false
}

// xmlMasterData names the CBV master data in an XML event's ilmd n (at
// every level) by its XML namespace, as the reference does, and sorts
// what it renamed again.
func xmlMasterData(n *node) {
	renamed := false
	for _, k := range n.kids {
		if local, ok := strings.CutPrefix(k.name, mdaPrefix); ok {
			k.name, renamed = mdaXML+local, true
		}
		xmlMasterData(k)
	}
	if renamed && !n.pair {
		slices.SortFunc(n.kids, compareNodes)
	}
}

// object models a JSON object: its "#text" its text, each other member a
// child (a list one child per entry), sorted, except in the entries of
// the typed lists.
func (h *hasher) object(obj map[string]any) *node {
	n := &node{}
	if t, ok := obj["#text"]; ok {
		n.text = h.text(t)
		n.literal = true
	}
	for k, v := range obj {
		if modelIgnored[k] || strings.HasPrefix(k, "@xmlns") {
			continue
		}
		key := h.expandKey(k)
		if arr, ok := v.([]any); ok {
			for _, e := range arr {
				c := h.value(e)
				n.kids = append(n.kids, &node{name: key, text: c.text, kids: c.kids, literal: c.literal, listed: true})
			}
			continue
		}
		c := h.value(v)
		c.name = key
		n.kids = append(n.kids, c)
	}
	_, bt := obj["bizTransaction"]
	_, src := obj["source"]
	_, dst := obj["destination"]
	if bt || src || dst {
		// The entry's own order: type first, then its value (the
		// reference keeps the order the members are written in, which a
		// decoded object no longer has), then anything else sorted.
		slices.SortFunc(n.kids, func(a, b *node) int {
			if c := typeFirst(a) - typeFirst(b); c != 0 {
				return c
			}
			return compareNodes(a, b)
		})
		return n
	}
	slices.SortFunc(n.kids, compareNodes)
	return n
}

func typeFirst(n *node) int {
	switch n.name {
	case "type":
		return 0
	case "bizTransaction", "source", "destination":
		return 1
	}
	return 2
}

// value models any JSON value.
func (h *hasher) value(v any) *node {
	switch x := v.(type) {
	case map[string]any:
		return h.object(x)
	case []any:
		n := &node{}
		for _, e := range x {
			n.kids = append(n.kids, h.value(e))
		}
		slices.SortFunc(n.kids, compareNodes)
		return n
	}
	return &node{text: h.text(v)}
}

// text is a scalar's text as the reference writes it: a string with its
// vocabulary word or declared prefix expanded, a number as Python writes
// it, true and false as True and False, null as None.
func (h *hasher) text(v any) string {
	switch x := v.(type) {
	case string:
		return h.expandValue(h.bareWord(x))
	case json.Number:
		return pyNumber(string(x))
	case float64:
		return pyFloat(x)
	case bool:
		if x {
			return "True"
		}
		return "False"
	case nil:
		return "None"
	}
	return ""
}

// compareNodes orders nodes by name, text and children.
func compareNodes(a, b *node) int {
	if c := strings.Compare(a.name, b.name); c != 0 {
		return c
	}
	if c := strings.Compare(a.text, b.text); c != 0 {
		return c
	}
	for i := 0; i < len(a.kids) && i < len(b.kids); i++ {
		if c := compareNodes(a.kids[i], b.kids[i]); c != 0 {
			return c
		}
	}
	return len(a.kids) - len(b.kids)
}

// typedLists are the lists whose entries are pairs.
var typedLists = map[string]bool{"bizTransactionList": true, "sourceList": true, "destinationList": true}

// correct renames the JSON structure to the XML one the canonical order
// names: a member "<x>List" whose value is an array becomes a node
// "<x>List" whose children are its entries named "<x>" (the typed lists'
// entries pairs; an object named so is already the XML structure: an XML
// extension element, mapped), childEPCs
// entries "epc", inputEPC and outputEPC "epc", inputQuantity,
// outputQuantity, childQuantity and a quantity with children
// "quantityElement"; at every level.
func correct(n *node) *node {
	var rest []*node
	var listNames []string
	lists := map[string][]*node{}
	var childEPCs []*node
	for _, k := range n.kids {
		switch {
		case k.pair:
			rest = append(rest, k)
		case k.listed && strings.HasSuffix(k.name, "List"):
			if _, ok := lists[k.name]; !ok {
				listNames = append(listNames, k.name)
			}
			lists[k.name] = append(lists[k.name], &node{name: k.name[:len(k.name)-len("List")], text: k.text, kids: k.kids})
		default:
			rest = append(rest, k)
		}
	}
	for _, name := range listNames {
		entries := lists[name]
		if typedLists[name] {
			pairs := make([]*node, 0, len(entries))
			for _, e := range entries {
				p := &node{pair: true, kids: e.kids}
				if len(p.kids) > 2 {
					p.kids = p.kids[:2]
				}
				pairs = append(pairs, p)
			}
			rest = append(rest, &node{name: name, kids: pairs})
			continue
		}
		rest = append(rest, &node{name: name, kids: entries})
	}
	kept := rest[:0]
	for _, k := range rest {
		if !k.pair && k.name == "childEPCs" {
			childEPCs = append(childEPCs, &node{name: "epc", text: k.text})
			continue
		}
		kept = append(kept, k)
	}
	if childEPCs != nil {
		kept = append(kept, &node{name: "childEPCs", kids: childEPCs})
	}
	for i, k := range kept {
		if !k.pair && !typedLists[k.name] {
			kept[i] = correct(k)
		}
	}
	n.kids = kept
	switch {
	case n.name == "inputEPC" || n.name == "outputEPC":
		n.name = "epc"
	case n.name == "inputQuantity" || n.name == "outputQuantity" || n.name == "childQuantity" ||
		n.name == "quantity" && len(n.kids) > 0 && !n.literal:
		n.name = "quantityElement"
	}
	return n
}

// order is one step of a canonical property order: a field name, and
// whether (and in which order) its children are taken.
type order struct {
	name string
	sub  []order
	// take: the children are gone through (sub may be empty: the typed
	// lists, whose entries no order names).
	take bool
}

func leaf(name string) order { return order{name: name} }

func nested(name string, sub ...order) order { return order{name: name, sub: sub, take: true} }

var quantityOrder = []order{nested("quantityElement", leaf("epcClass"), leaf("quantity"), leaf("uom"))}

// propOrder is the canonical property order of an event.
var propOrder = []order{
	leaf("eventTime"), leaf("eventTimeZoneOffset"), leaf("certificationInfo"), leaf("parentID"),
	nested("epcList", leaf("epc")), nested("inputEPCList", leaf("epc")), nested("childEPCs", leaf("epc")),
	nested("quantityList", quantityOrder...), nested("childQuantityList", quantityOrder...),
	nested("inputQuantityList", quantityOrder...), nested("outputEPCList", leaf("epc")),
	nested("outputQuantityList", quantityOrder...),
	leaf("action"), leaf("transformationID"), leaf("bizStep"), leaf("disposition"),
	nested("persistentDisposition", leaf("set"), leaf("unset")),
	nested("readPoint", leaf("id")), nested("bizLocation", leaf("id")),
	nested("bizTransactionList"), nested("sourceList"), nested("destinationList"),
	nested("sensorElementList", nested("sensorElement",
		nested("sensorMetadata", leaf("time"), leaf("startTime"), leaf("endTime"), leaf("deviceID"),
			leaf("deviceMetadata"), leaf("rawData"), leaf("dataProcessingMethod"), leaf("bizRules")),
		nested("sensorReport", leaf("type"), leaf("exception"), leaf("deviceID"), leaf("deviceMetadata"),
			leaf("rawData"), leaf("dataProcessingMethod"), leaf("time"), leaf("microorganism"),
			leaf("chemicalSubstance"), leaf("value"), leaf("component"), leaf("stringValue"),
			leaf("booleanValue"), leaf("hexBinaryValue"), leaf("uriValue"), leaf("minValue"),
			leaf("maxValue"), leaf("meanValue"), leaf("sDev"), leaf("percRank"), leaf("percValue"),
			leaf("uom"), leaf("coordinateReferenceSystem")))),
}

// notHashed are the event's members outside the hash.
var notHashed = map[string]bool{"recordTime": true, "eventID": true, "type": true, "errorDeclaration": true}

// preHash builds the pre-hash string of an event's node.
func (h *hasher) preHash(ev *node) string {
	var b strings.Builder
	b.Grow(512)
	b.WriteString("eventType=")
	b.WriteString(ev.name)
	b.WriteString(h.inOrder(ev, propOrder))
	var rest []*node
	for _, k := range ev.kids {
		if k.pair || !notHashed[k.name] {
			rest = append(rest, k)
		}
	}
	b.WriteString(h.generic(rest))
	return b.String()
}

// inOrder renders parent's children the order names, in its order (the
// children of one name sorted), then parent's user extensions; it removes
// from parent what it consumed, so that what is left is rendered at the
// end of the event (generic).
func (h *hasher) inOrder(parent *node, ord []order) string {
	ext := userExtensions(parent)
	var b strings.Builder
	for _, o := range ord {
		var vals []string
		for i := 0; i < len(parent.kids); {
			c := parent.kids[i]
			if c.pair || c.name != o.name {
				i++
				continue
			}
			if s := h.inOrderChild(c, o); s != "" {
				vals = append(vals, s)
			}
			if len(c.kids) == 0 {
				parent.kids = slices.Delete(parent.kids, i, i+1)
				continue
			}
			i++
		}
		slices.Sort(vals)
		for _, v := range vals {
			b.WriteString(v)
		}
	}
	if len(ext) > 0 {
		b.WriteString(h.generic(ext))
	}
	return b.String()
}

// userExtensions removes and returns the children of a structure (not
// the event itself) in a namespace whose name ends in "/".
func userExtensions(parent *node) []*node {
	if len(parent.kids) <= 1 {
		return nil
	}
	for _, k := range parent.kids {
		if !k.pair && (strings.Contains(k.name, "eventTime") || strings.Contains(k.name, "action")) {
			return nil
		}
	}
	var ext []*node
	kept := parent.kids[:0]
	for _, k := range parent.kids {
		if !k.pair && strings.Contains(k.name, "{") && strings.Contains(k.name, "/}") {
			ext = append(ext, k)
			continue
		}
		kept = append(kept, k)
	}
	parent.kids = kept
	return ext
}

// inOrderChild renders one child an order names: "<name>=<value>" and its
// children in their order.
func (h *hasher) inOrderChild(c *node, o order) string {
	var grand string
	if o.take {
		grand = h.inOrder(c, o.sub)
	}
	text := strings.TrimSpace(c.text)
	if text != "" {
		lower := strings.ToLower(c.name)
		if strings.Contains(lower, "time") && !strings.Contains(lower, "offset") {
			text = h.normTime(text)
		} else {
			text = canonValue(text)
		}
	}
	if text == "" && grand == "" {
		return ""
	}
	if text != "" {
		return c.name + "=" + text + grand
	}
	return c.name + grand
}

// generic renders nodes outside an order: each "<name>=<value>" followed
// by its children, a pair as its type and value; sorted, except the
// entries of a typed list.
func (h *hasher) generic(nodes []*node) string {
	if len(nodes) == 0 {
		return ""
	}
	vals := make([]string, 0, len(nodes))
	sorted := true
	for _, c := range nodes {
		if c.pair {
			vals = append(vals, h.generic(c.kids))
			continue
		}
		switch c.name {
		case "bizTransaction", "source", "destination":
			sorted = false
		}
		s := c.name
		if text := strings.TrimSpace(c.text); text != "" {
			s += "=" + canonValue(text)
		}
		vals = append(vals, s+h.generic(c.kids))
	}
	if len(nodes) > 1 && sorted {
		slices.Sort(vals)
	}
	return strings.Join(vals, "")
}

// expandKey writes a member name "prefix:local" of a declared prefix as
// "{namespace}local".
func (h *hasher) expandKey(k string) string {
	p, local, ok := strings.Cut(k, ":")
	if !ok {
		return k
	}
	if ns, ok := h.ns[p]; ok {
		return "{" + ns + "}" + local
	}
	return k
}

// expandValue expands a value "prefix:rest" of a declared prefix, or (in
// KeyID) of one of the three the algorithm names (gs1, epcis, cbv: "this
// also holds true for standard CBV values"), which the reference
// implementation (ReferenceID) expands only when the document declares
// them again.
func (h *hasher) expandValue(s string) string {
	p, rest, ok := strings.Cut(s, ":")
	if !ok {
		return s
	}
	if ns, ok := h.ns[p]; ok {
		return ns + rest
	}
	if h.reference {
		return s
	}
	if ns, ok := standardPrefixes[p]; ok && !strings.HasPrefix(rest, "//") {
		h.diverges = true
		return ns + rest
	}
	return s
}

// standardPrefixes are the compact IRI prefixes whose values the
// algorithm expands whether or not the @context declares them.
var standardPrefixes = map[string]string{
	"gs1": "https://gs1.org/voc/", "epcis": "https://ref.gs1.org/epcis/", "cbv": "https://ref.gs1.org/cbv/",
}

// bareWord returns the vocabulary web URI a value stands for: the one
// vocabulary URI of the event (vocabOf) that ends in "-" or "/" followed
// by the value; else the value.
func (h *hasher) bareWord(s string) string {
	found := ""
	for _, u := range h.vocab {
		if len(u) > len(s) && strings.HasSuffix(u, s) && (u[len(u)-len(s)-1] == '-' || u[len(u)-len(s)-1] == '/') {
			if found != "" {
				return s
			}
			found = u
		}
	}
	if found == "" {
		return s
	}
	return found
}

// contextPrefixes are the prefixes the EPCIS 2.0 JSON-LD context declares.
var contextPrefixes = map[string]string{
	"epcis": "https://ref.gs1.org/epcis/", "cbv": "https://ref.gs1.org/cbv/", "cbvmda": "urn:epcglobal:cbv:mda:",
	"gs1": "https://gs1.org/voc/", "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
	"owl": "http://www.w3.org/2002/07/owl#", "xsd": "http://www.w3.org/2001/XMLSchema#",
	"dcterms": "http://purl.org/dc/terms/",
}

// vocabOf returns the CBV and GS1 vocabulary web URIs an event's values
// expand to in JSON-LD (the terms of the EPCIS context's vocabulary-typed
// members, their compact and full IRIs, and any value that is such a URI),
// without repeats.
func vocabOf(ev map[string]any, ns map[string]string) []string {
	var out []string
	add := func(u string) {
		if (strings.HasPrefix(u, "https://ref.gs1.org/cbv") || strings.HasPrefix(u, "https://gs1.org/voc")) && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	var walk func(v any, scope, key string)
	walk = func(v any, scope, key string) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if k == "@context" {
					continue
				}
				inner := scope
				switch k {
				case "bizTransactionList", "sourceList", "destinationList", "sensorElementList", "errorDeclaration", "persistentDisposition":
					inner = k
				}
				walk(c, inner, k)
			}
		case []any:
			for _, e := range x {
				walk(e, scope, key)
			}
		case string:
			s := strings.TrimSpace(x)
			if vocab := vocabularyOf(scope, key); vocab != "" {
				if _, ok := cbvWords[vocab][s]; ok {
					add(vocabBase(vocab) + s)
					return
				}
				if p, rest, ok := strings.Cut(s, ":"); ok && !strings.HasPrefix(rest, "//") {
					if base, ok := ns[p]; ok {
						add(base + rest)
						return
					}
					if base, ok := contextPrefixes[p]; ok {
						add(base + rest)
						return
					}
				}
			}
			add(s)
		}
	}
	walk(ev, "", "")
	return out
}

// vocabularyOf names the vocabulary (a key of cbvWords) of a member by the
// structure it is in and its name; "" when the EPCIS context does not type
// it as a vocabulary.
func vocabularyOf(scope, key string) string {
	switch {
	case key == "bizStep" && scope == "":
		return "BizStep-"
	case key == "disposition" && scope == "", (key == "set" || key == "unset") && scope == "persistentDisposition":
		return "Disp-"
	case key == "type" && scope == "bizTransactionList":
		return "BTT-"
	case key == "type" && (scope == "sourceList" || scope == "destinationList"):
		return "SDT-"
	case key == "type" && scope == "sensorElementList":
		return "gs1:"
	case key == "exception" && scope == "sensorElementList":
		return "gs1:exception"
	case key == "component" && scope == "sensorElementList":
		return "Comp-"
	case key == "reason" && scope == "errorDeclaration":
		return "ER-"
	}
	return ""
}

// vocabBase is the web URI prefix of a vocabulary's terms.
func vocabBase(vocab string) string {
	if strings.HasPrefix(vocab, "gs1:") {
		return "https://gs1.org/voc/"
	}
	return "https://ref.gs1.org/cbv/" + vocab
}

// urnVocab maps the CBV 1.x URN prefixes to their CBV 2.0 web URI
// prefixes.
var urnVocab = strings.NewReplacer(
	"urn:epcglobal:cbv:bizstep:", "https://ref.gs1.org/cbv/BizStep-",
	"urn:epcglobal:cbv:disp:", "https://ref.gs1.org/cbv/Disp-",
	"urn:epcglobal:cbv:btt:", "https://ref.gs1.org/cbv/BTT-",
	"urn:epcglobal:cbv:sdt:", "https://ref.gs1.org/cbv/SDT-",
	"urn:epcglobal:cbv:er:", "https://ref.gs1.org/cbv/ER-",
)

// canonValue applies the value normalizations: CBV URNs as web URIs,
// numbers as Python writes them, EPC URNs and Digital Link URIs as
// constrained canonical Digital Link URIs.
func canonValue(s string) string {
	if strings.Contains(s, "urn:epcglobal:cbv:") {
		s = urnVocab.Replace(s)
	}
	if n, ok := normNumber(s); ok {
		return n
	}
	if dl, ok := DigitalLink(s); ok {
		return dl
	}
	return s
}

// normTime writes a time in UTC with milliseconds, its microseconds
// rounded half to even; a time without an offset is read in the event's
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
	t = t.UTC()
	us := t.Nanosecond() / 1000
	ms, rem := us/1000, us%1000
	if rem > 500 || rem == 500 && ms%2 == 1 {
		ms++
	}
	t = t.Truncate(time.Second).Add(time.Duration(ms) * time.Millisecond)
	return t.Format("2006-01-02T15:04:05.000Z")
}

// normNumber writes a decimal number ("600.0", "+1.50", "2e3") as Python
// writes the float it reads (an integral one as an integer); ok is false
// for anything else (and for one out of a float's range).
func normNumber(s string) (string, bool) {
	if !isDecimal(s) {
		return "", false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", false
	}
	return pyNumberText(f), true
}

// pyNumberText is a float as an integer when it is integral, else as
// Python's repr.
func pyNumberText(f float64) string {
	if f == math.Trunc(f) {
		if math.Abs(f) < 1e18 {
			return strconv.FormatInt(int64(f), 10)
		}
		return new(big.Float).SetFloat64(f).Text('f', 0)
	}
	return pyFloat(f)
}

// pyNumber is a JSON number as Python's json module reads and str writes
// it: an integer (no fraction or exponent) exactly, anything else as a
// float.
func pyNumber(s string) string {
	if !strings.ContainsAny(s, ".eE") {
		if strings.Trim(s, "-0") == "" && s != "" {
			return "0"
		}
		return s
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		return s
	}
	return pyFloat(f)
}

// pyFloat is Python's repr of a float: the shortest digits that read back
// as f, fixed-point from 1e-4 up to 1e16 (with ".0" when integral),
// scientific outside ("1e+16", "1.5e-07").
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	x, _ := strconv.Atoi(exp)
	if f == 0 || x >= -4 && x < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsAny(s, ".") {
			s += ".0"
		}
		return s
	}
	sign := "+"
	if x < 0 {
		sign, x = "-", -x
	}
	xs := strconv.Itoa(x)
	if len(xs) < 2 {
		xs = "0" + xs
	}
	return mant + "e" + sign + xs
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

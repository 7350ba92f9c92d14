package document

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"io"
	"maps"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/deadletter/deadletter/shared/codes"
)

// The EPCIS XML namespaces.
const (
	nsEPCIS12 = "urn:epcglobal:epcis:xsd:1"
	nsEPCIS20 = "urn:epcglobal:epcis:xsd:2"
	nsQuery12 = "urn:epcglobal:epcis-query:xsd:1"
	nsQuery20 = "urn:epcglobal:epcis-query:xsd:2"
)

// epcisContext is the EPCIS 2.0 JSON-LD context every mapped event names.
const epcisContext = "https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld"

// knownNamespaces are the XML namespaces whose JSON-LD form the EPCIS 2.0
// context declares, with its prefix (the CBV master-data namespace is
// "urn:epcglobal:cbv:mda" in XML and "urn:epcglobal:cbv:mda:" in JSON-LD).
var knownNamespaces = map[string]string{
	"urn:epcglobal:cbv:mda":  "cbvmda",
	"urn:epcglobal:cbv:mda:": "cbvmda",
	"https://gs1.org/voc/":   "gs1",
}

// elem is one parsed XML element.
type elem struct {
	name  xml.Name
	attrs []xml.Attr
	text  string
	kids  []*elem
}

// xmlState is what the first pass over an XML document leaves the
// second: every namespace's prefix, as the document first declared it.
type xmlState struct {
	prefixes map[string]string // namespace URI -> prefix
	// base is the length of the byte-order mark and white space before
	// the document's first '<'.
	base int
}

// frame is one open element of the walk.
type frame struct {
	local string
	// holder: the event list, or an EPCIS 1.2 extension wrapper in it,
	// whose children are events.
	holder bool
	// capture receives the element's text (a header value).
	capture *string
	text    strings.Builder
}

// eventContainers are the elements between the root and its event list.
var eventContainers = map[string]bool{"EPCISBody": true, "QueryResults": true, "resultsBody": true}

// xmlWalk is one pass over an XML document.
type xmlWalk struct {
	in   io.Reader // the document from its first '<'
	base int       // offset of in in the document
	// build, in the second pass, builds each event's tree and hands the
	// mapped event to fn.
	build bool
	fn    func(Event) error
	m     mapper

	prefixes  map[string]string
	root      *elem
	doctype   bool // a bare DOCTYPE met
	listFound bool
	count     int
	// header values (first pass).
	created, sbdhCreated, id, sender, receiver string
}

// checkXML is the first pass over an EPCIS 1.2 or 2.0 XML document (or
// query document): well-formedness, limits, structure, the event count
// and the header, holding no event.
func checkXML(in io.Reader, base int, info *Info) (*xmlState, error) {
	w := &xmlWalk{in: in, base: base, prefixes: map[string]string{}}
	if err := w.run(); err != nil {
		return nil, err
	}
	if w.root == nil {
		return nil, codes.Errorf(dscsa.MalformedDocument, "document has no root element")
	}
	switch w.root.name.Space {
	case nsEPCIS12, nsEPCIS20, nsQuery12, nsQuery20:
	default:
		return nil, codes.Errorf(dscsa.MalformedDocument, "root element is not in an EPCIS 1.2 or 2.0 namespace")
	}
	if w.root.name.Local != "EPCISDocument" && w.root.name.Local != "EPCISQueryDocument" {
		return nil, codes.Errorf(dscsa.MalformedDocument, "root element must be EPCISDocument or EPCISQueryDocument")
	}
	if !w.listFound {
		return nil, codes.Errorf(dscsa.MalformedDocument, "EPCISBody has no EventList")
	}
	info.Count = w.count
	info.ID, info.Sender, info.Receiver = headerText(w.id), headerText(w.sender), headerText(w.receiver)
	if info.Created = headerTime(w.created); info.Created.IsZero() {
		info.Created = headerTime(w.sbdhCreated)
	}
	return &xmlState{prefixes: w.prefixes, base: base}, nil
}

// scanXML is the second pass: it maps each event and hands it to fn.
func scanXML(in io.Reader, st *xmlState, fn func(Event) error) error {
	br := bufio.NewReaderSize(in, 64<<10)
	if _, err := br.Discard(st.base); err != nil {
		return err
	}
	w := &xmlWalk{in: br, base: st.base, prefixes: map[string]string{}, build: true, fn: fn}
	w.m.prefixes = maps.Clone(st.prefixes)
	return w.run()
}

// headerPaths are the SBDH values kept, by the local names of their
// last elements.
func (w *xmlWalk) headerTarget(stack []*frame, local string) *string {
	n := len(stack)
	if n < 2 || w.build {
		return nil
	}
	parent, grand := stack[n-1].local, stack[n-2].local
	switch {
	case local == "Identifier" && parent == "Sender" && grand == "StandardBusinessDocumentHeader" && w.sender == "":
		return &w.sender
	case local == "Identifier" && parent == "Receiver" && grand == "StandardBusinessDocumentHeader" && w.receiver == "":
		return &w.receiver
	case local == "InstanceIdentifier" && parent == "DocumentIdentification" && w.id == "":
		return &w.id
	case local == "CreationDateAndTime" && parent == "DocumentIdentification" && w.sbdhCreated == "":
		return &w.sbdhCreated
	}
	return nil
}

// run walks the document's tokens.
func (w *xmlWalk) run() error {
	dec := xml.NewDecoder(w.in)
	dec.Strict = true
	// No CharsetReader: a document declaring another encoding than UTF-8
	// is refused. No Entity map: only the five predefined entities.
	var stack []*frame
	var ev []*elem // the event being built, and its open elements
	evStart, evLevel := 0, -1
	for {
		off := int(dec.InputOffset())
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return xmlFail(dec, err)
		}
		switch t := tok.(type) {
		case xml.Directive:
			// A bare <!DOCTYPE name> before the root (as GS1's own
			// examples carry) declares nothing; anything that could
			// declare an entity is refused.
			if w.root != nil || w.doctype || !bareDoctype(t) {
				return codes.Errorf(dscsa.MalformedDocument, "document has a DTD or other directive (refused: no entities are expanded)")
			}
			w.doctype = true
		case xml.StartElement:
			if len(stack) >= MaxDepth {
				return codes.Errorf(dscsa.MalformedDocument, "document nests deeper than %d", MaxDepth)
			}
			var attrs []xml.Attr
			for _, a := range t.Attr {
				switch {
				case a.Name.Space == "xmlns":
					if _, ok := w.prefixes[a.Value]; !ok {
						w.prefixes[a.Value] = a.Name.Local
					}
				case a.Name.Space == "" && a.Name.Local == "xmlns":
				default:
					attrs = append(attrs, a)
				}
			}
			f := &frame{local: t.Name.Local}
			switch {
			case len(stack) == 0:
				if w.root == nil {
					w.root = &elem{name: t.Name}
					for _, a := range attrs {
						if a.Name.Space == "" && a.Name.Local == "creationDate" {
							w.created = a.Value
						}
					}
				}
			case evLevel >= 0:
				// Inside an event.
			case stack[len(stack)-1].holder && !(t.Name.Space == "" && (t.Name.Local == "extension" || t.Name.Local == "baseExtension")):
				// An event starts.
				if w.count == MaxEvents {
					return codes.Errorf(dscsa.MalformedDocument, "document has more than %d events", MaxEvents)
				}
				evLevel, evStart = len(stack), off
				ev = ev[:0]
			case stack[len(stack)-1].holder:
				f.holder = true // an EPCIS 1.2 extension wrapper in the list
			case !w.listFound && t.Name.Local == "EventList" && len(stack) <= 4 && w.underContainers(stack):
				w.listFound, f.holder = true, true
			default:
				f.capture = w.headerTarget(stack, t.Name.Local)
			}
			stack = append(stack, f)
			if w.build && evLevel >= 0 {
				e := &elem{name: t.Name, attrs: attrs}
				if len(ev) > 0 {
					parent := ev[len(ev)-1]
					parent.kids = append(parent.kids, e)
				}
				ev = append(ev, e)
			}
		case xml.EndElement:
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if f.capture != nil {
				*f.capture = f.text.String()
			}
			if w.build && evLevel >= 0 {
				e := ev[len(ev)-1]
				if len(ev) > 1 {
					ev = ev[:len(ev)-1]
				}
				if len(stack) == evLevel {
					if err := w.emit(e, evStart, int(dec.InputOffset())); err != nil {
						return err
					}
				}
			}
			if len(stack) == evLevel {
				evLevel = -1
				w.count++
			}
		case xml.CharData:
			switch {
			case w.build && evLevel >= 0:
				ev[len(ev)-1].text += string(t)
			case len(stack) > 0 && stack[len(stack)-1].capture != nil && stack[len(stack)-1].text.Len() < maxHeaderText:
				stack[len(stack)-1].text.Write(t)
			}
		}
	}
}

// bareDoctype reports whether a directive is a document type declaration
// that names the root element and nothing else ("DOCTYPE project"): no
// internal subset ('['), no external identifier (SYSTEM, PUBLIC), so no
// entity and no markup declaration can come with it.
func bareDoctype(d xml.Directive) bool {
	rest, ok := bytes.CutPrefix(d, []byte("DOCTYPE"))
	if !ok || len(rest) == 0 || !isXMLSpace(rest[0]) {
		return false
	}
	name := bytes.TrimRight(bytes.TrimLeft(rest, " \t\r\n"), " \t\r\n")
	return isXMLName(name)
}

func isXMLSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// isXMLName reports whether b is an XML Name (letters, digits, '_', ':',
// '-', '.', and any non-ASCII character; not beginning with a digit, '-'
// or '.'): one token, so nothing follows the name.
func isXMLName(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for i, r := range string(b) {
		switch {
		case r == '_' || r == ':' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= 0x80 && r != utf8.RuneError:
		case i > 0 && (r >= '0' && r <= '9' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}

// underContainers reports whether every element between the root and the
// top of stack is an event container (EPCISBody, QueryResults,
// resultsBody).
func (w *xmlWalk) underContainers(stack []*frame) bool {
	for _, f := range stack[1:] {
		if !eventContainers[f.local] {
			return false
		}
	}
	return true
}

// emit maps a built event and hands it over.
func (w *xmlWalk) emit(e *elem, start, end int) error {
	b, err := json.Marshal(w.m.event(e))
	if err != nil {
		return codes.Errorf(dscsa.MalformedDocument, "event %d cannot be mapped to JSON", w.count)
	}
	return w.fn(Event{Index: w.count, Offset: w.base + start, Length: end - start, Data: b})
}

func xmlFail(dec *xml.Decoder, err error) error {
	line, col := dec.InputPos()
	detail := "document is not well-formed XML"
	if strings.Contains(err.Error(), "CharsetReader") {
		detail = "document declares an encoding other than UTF-8"
	}
	return codes.Errorf(dscsa.MalformedDocument, "%s (line %d, column %d)", detail, line, col)
}

// unwrapExtensions replaces the EPCIS 1.2 <extension> (and <baseExtension>)
// wrappers among elements by their children, recursively.
func unwrapExtensions(kids []*elem) []*elem {
	var out []*elem
	for _, k := range kids {
		if k.name.Space == "" && (k.name.Local == "extension" || k.name.Local == "baseExtension") {
			out = append(out, unwrapExtensions(k.kids)...)
			continue
		}
		out = append(out, k)
	}
	return out
}

// mapper maps XML events to the EPCIS 2.0 JSON form.
type mapper struct {
	prefixes map[string]string // namespace URI -> prefix
	used     map[string]string // prefix -> namespace URI, of one event
	// ilmd: the event's ilmd is being mapped.
	ilmd bool
}

// plain reports whether an element's attributes are dropped: those of
// the CBV master data in ilmd (lot, expiry), whose values the domain
// reads as strings (an xsi:type on them is the only attribute they take).
func (m *mapper) plain(k *elem) bool {
	return m.ilmd && knownNamespaces[k.name.Space] == "cbvmda"
}

// xmlText is an element's or attribute's text as the event's value:
// trimmed, and a value that begins with the compact IRI prefix "gs1:" or
// "cbv:" (which an XML document cannot declare for values: GS1's examples
// write sensor types so) with them expanded, as the reference
// implementation of the event hash reads XML.
func xmlText(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "gs1:") {
		s = strings.ReplaceAll(s, "gs1:", "https://gs1.org/voc/")
	}
	if strings.HasPrefix(s, "cbv:") {
		s = strings.ReplaceAll(s, "cbv:", "https://ref.gs1.org/cbv/")
	}
	return s
}

// leaf maps an element without children: its text, or, when it has
// attributes (an xsi:type, an xsi:nil), an object of its text ("#text")
// and its attributes, so that they stay part of the event (and of its
// hash) as they are in the XML.
func (m *mapper) leaf(k *elem) any {
	if len(k.attrs) == 0 || m.plain(k) {
		return xmlText(k.text)
	}
	obj := map[string]any{"#text": xmlText(k.text)}
	m.addAttrs(obj, k)
	return obj
}

// addAttrs adds an element's attributes to its object: a namespaced one
// as "prefix:local".
func (m *mapper) addAttrs(obj map[string]any, k *elem) {
	if m.plain(k) {
		return
	}
	for _, a := range k.attrs {
		addValue(obj, m.key(a.Name), xmlText(a.Value))
	}
}

func (m *mapper) event(e *elem) map[string]any {
	m.used = map[string]string{}
	ev := map[string]any{"type": e.name.Local}
	for _, k := range unwrapExtensions(e.kids) {
		if k.name.Space != "" {
			m.addExt(ev, k)
			continue
		}
		switch name := k.name.Local; name {
		case "epcList", "childEPCs", "inputEPCList", "outputEPCList":
			ev[name] = texts(k.kids)
		case "quantityList", "childQuantityList", "inputQuantityList", "outputQuantityList":
			var list []any
			for _, q := range k.kids {
				list = append(list, m.quantity(q))
			}
			ev[name] = nonNil(list)
		case "readPoint", "bizLocation":
			ev[name] = m.object(k)
		case "bizTransactionList":
			ev[name] = typedList(k, "bizTransaction")
		case "sourceList":
			ev[name] = typedList(k, "source")
		case "destinationList":
			ev[name] = typedList(k, "destination")
		case "ilmd":
			m.ilmd = true
			ev[name] = m.object(k)
			m.ilmd = false
		case "persistentDisposition":
			pd := map[string]any{}
			for _, s := range k.kids {
				l, _ := pd[s.name.Local].([]any)
				pd[s.name.Local] = append(l, xmlText(s.text))
			}
			ev[name] = pd
		case "errorDeclaration":
			ed := m.object(k)
			if c, ok := ed["correctiveEventIDs"].(map[string]any); ok {
				ed["correctiveEventIDs"] = asArray(c["correctiveEventID"])
			}
			ev[name] = ed
		case "sensorElementList":
			var list []any
			for _, s := range k.kids {
				list = append(list, m.sensorElement(s))
			}
			ev[name] = nonNil(list)
		case "certificationInfo":
			addValue(ev, name, m.leaf(k))
		default:
			ev[name] = m.leaf(k)
		}
	}
	m.unclash(ev)
	ctx := []any{epcisContext}
	if len(m.used) > 0 {
		decl := map[string]any{}
		for p, ns := range m.used {
			decl[p] = ns
		}
		ctx = append(ctx, decl)
	}
	ev["@context"] = ctx
	return ev
}

// unclash renames, in the member names of a mapped event, a prefix the
// event's @context would declare when one of its values begins with that
// prefix and a colon (an XML value "example:someSensorProperty" is a URI
// of the scheme "example", never a compact IRI: declaring "example" would
// make it one).
func (m *mapper) unclash(ev map[string]any) {
	if len(m.used) == 0 {
		return
	}
	clash := map[string]bool{}
	var scan func(v any)
	scan = func(v any) {
		switch x := v.(type) {
		case string:
			if p, _, ok := strings.Cut(x, ":"); ok {
				if _, used := m.used[p]; used {
					clash[p] = true
				}
			}
		case []any:
			for _, e := range x {
				scan(e)
			}
		case map[string]any:
			for _, e := range x {
				scan(e)
			}
		}
	}
	scan(ev)
	if len(clash) == 0 {
		return
	}
	rename := map[string]string{}
	for p := range clash {
		n := p
		for i := 1; ; i++ {
			n = p + "-" + strconv.Itoa(i)
			if _, taken := m.used[n]; !taken && !clash[n] {
				break
			}
		}
		rename[p] = n
		m.used[n] = m.used[p]
		delete(m.used, p)
	}
	var rekey func(v any) any
	rekey = func(v any) any {
		switch x := v.(type) {
		case []any:
			for i, e := range x {
				x[i] = rekey(e)
			}
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				if p, local, ok := strings.Cut(k, ":"); ok && rename[p] != "" {
					k = rename[p] + ":" + local
				}
				out[k] = rekey(e)
			}
			return out
		}
		return v
	}
	renamed := rekey(ev).(map[string]any)
	clear(ev)
	for k, v := range renamed {
		ev[k] = v
	}
}

func nonNil(l []any) []any {
	if l == nil {
		return []any{}
	}
	return l
}

func texts(kids []*elem) []any {
	out := make([]any, 0, len(kids))
	for _, k := range kids {
		out = append(out, xmlText(k.text))
	}
	return out
}

func asArray(v any) []any {
	if a, ok := v.([]any); ok {
		return a
	}
	if v == nil {
		return []any{}
	}
	return []any{v}
}

// addValue sets m[k] = v, or appends v to an array when k repeats.
func addValue(m map[string]any, k string, v any) {
	old, ok := m[k]
	if !ok {
		m[k] = v
		return
	}
	if a, ok := old.([]any); ok {
		m[k] = append(a, v)
		return
	}
	m[k] = []any{old, v}
}

// quantity maps a quantityElement; the quantity is a JSON number.
func (m *mapper) quantity(q *elem) map[string]any {
	out := map[string]any{}
	for _, k := range q.kids {
		v := xmlText(k.text)
		if k.name.Local == "quantity" && len(k.attrs) == 0 {
			if _, err := strconv.ParseFloat(v, 64); err == nil {
				out["quantity"] = json.Number(v)
				continue
			}
		}
		if k.name.Space != "" {
			m.addExt(out, k)
			continue
		}
		out[k.name.Local] = m.leaf(k)
	}
	return out
}

// typedList maps <x type="...">value</x> entries to {"type", x}.
func typedList(list *elem, member string) []any {
	out := []any{}
	for _, k := range list.kids {
		e := map[string]any{member: strings.TrimSpace(k.text)}
		for _, a := range k.attrs {
			if a.Name.Local == "type" {
				e["type"] = xmlText(a.Value)
			}
		}
		out = append(out, e)
	}
	return out
}

// sensorElement maps a sensorElement: sensorMetadata and sensorReport
// attributes become members, other children extensions.
func (m *mapper) sensorElement(s *elem) map[string]any {
	out := map[string]any{}
	var reports []any
	for _, k := range s.kids {
		switch {
		case k.name.Space == "" && k.name.Local == "sensorMetadata":
			out["sensorMetadata"] = m.attrObject(k)
		case k.name.Space == "" && k.name.Local == "sensorReport":
			reports = append(reports, m.attrObject(k))
		default:
			m.addExt(out, k)
		}
	}
	if reports != nil {
		out["sensorReport"] = reports
	}
	return out
}

// attrObject maps an element whose data are its attributes.
func (m *mapper) attrObject(e *elem) map[string]any {
	out := map[string]any{}
	for _, a := range e.attrs {
		if a.Name.Space != "" {
			out[m.key(a.Name)] = xmlText(a.Value)
			continue
		}
		out[a.Name.Local] = xmlText(a.Value)
	}
	for _, k := range e.kids {
		m.addExt(out, k)
	}
	return out
}

// object maps an element with children: unqualified children as plain
// members, namespaced ones as "prefix:local" extensions.
func (m *mapper) object(e *elem) map[string]any {
	out := map[string]any{}
	for _, k := range unwrapExtensions(e.kids) {
		if k.name.Space != "" {
			m.addExt(out, k)
			continue
		}
		addValue(out, k.name.Local, m.value(k))
	}
	return out
}

// addExt adds a namespaced (extension) element as "prefix:local".
func (m *mapper) addExt(out map[string]any, k *elem) {
	addValue(out, m.key(k.name), m.value(k))
}

// value maps an element to its text (its attributes kept, see leaf), or
// an object of its children (and attributes).
func (m *mapper) value(k *elem) any {
	if len(k.kids) == 0 {
		return m.leaf(k)
	}
	obj := map[string]any{}
	m.addAttrs(obj, k)
	for _, c := range k.kids {
		name := c.name.Local
		if c.name.Space != "" {
			name = m.key(c.name)
		}
		addValue(obj, name, m.value(c))
	}
	return obj
}

// key names a namespaced element "prefix:local", with the prefix the
// document declared for its namespace (or a generated one), and records
// the declaration for the event's @context.
func (m *mapper) key(n xml.Name) string {
	if n.Space == "" {
		return n.Local
	}
	if p, ok := knownNamespaces[n.Space]; ok {
		// Declared by the EPCIS 2.0 JSON-LD context itself.
		return p + ":" + n.Local
	}
	p, ok := m.prefixes[n.Space]
	if !ok || p == "" {
		p = "ns" + strconv.Itoa(len(m.prefixes)+1)
		m.prefixes[n.Space] = p
	}
	m.used[p] = n.Space
	return p + ":" + n.Local
}

package document

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"strconv"
	"strings"

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

// readXML reads the events of an EPCIS 1.2 or 2.0 XML document (or query
// document) and maps each to the EPCIS 2.0 JSON form.
func readXML(data []byte) ([][]byte, error) {
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	// No CharsetReader: a document declaring another encoding than UTF-8
	// is refused. No Entity map: only the five predefined entities.
	prefixes := map[string]string{} // namespace URI -> prefix declared for it
	var stack []*elem
	var root *elem
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, xmlFail(dec, err)
		}
		switch t := tok.(type) {
		case xml.Directive:
			return nil, codes.Errorf(codes.MalformedDocument, "document has a DTD or other directive (refused: no entities are expanded)")
		case xml.StartElement:
			if len(stack) >= MaxDepth {
				return nil, codes.Errorf(codes.MalformedDocument, "document nests deeper than %d", MaxDepth)
			}
			e := &elem{name: t.Name}
			for _, a := range t.Attr {
				switch {
				case a.Name.Space == "xmlns":
					if _, ok := prefixes[a.Value]; !ok {
						prefixes[a.Value] = a.Name.Local
					}
				case a.Name.Space == "" && a.Name.Local == "xmlns":
				default:
					e.attrs = append(e.attrs, a)
				}
			}
			if len(stack) > 0 {
				parent := stack[len(stack)-1]
				parent.kids = append(parent.kids, e)
			} else if root == nil {
				root = e
			}
			stack = append(stack, e)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text += string(t)
			}
		}
	}
	if root == nil {
		return nil, codes.Errorf(codes.MalformedDocument, "document has no root element")
	}
	switch root.name.Space {
	case nsEPCIS12, nsEPCIS20, nsQuery12, nsQuery20:
	default:
		return nil, codes.Errorf(codes.MalformedDocument, "root element is not in an EPCIS 1.2 or 2.0 namespace")
	}
	if root.name.Local != "EPCISDocument" && root.name.Local != "EPCISQueryDocument" {
		return nil, codes.Errorf(codes.MalformedDocument, "root element must be EPCISDocument or EPCISQueryDocument")
	}
	list := findEventList(root)
	if list == nil {
		return nil, codes.Errorf(codes.MalformedDocument, "EPCISBody has no EventList")
	}
	m := mapper{prefixes: prefixes}
	var out [][]byte
	for _, e := range unwrapExtensions(list.kids) {
		if len(out) == MaxEvents {
			return nil, codes.Errorf(codes.MalformedDocument, "document has more than %d events", MaxEvents)
		}
		b, err := json.Marshal(m.event(e))
		if err != nil {
			return nil, codes.Errorf(codes.MalformedDocument, "event %d cannot be mapped to JSON", len(out))
		}
		out = append(out, b)
	}
	return out, nil
}

func xmlFail(dec *xml.Decoder, err error) error {
	line, col := dec.InputPos()
	detail := "document is not well-formed XML"
	if strings.Contains(err.Error(), "CharsetReader") {
		detail = "document declares an encoding other than UTF-8"
	}
	return codes.Errorf(codes.MalformedDocument, "%s (line %d, column %d)", detail, line, col)
}

// findEventList returns EPCISBody/EventList, or (query documents)
// EPCISBody/QueryResults/resultsBody/EventList.
func findEventList(root *elem) *elem {
	var walk func(e *elem, depth int) *elem
	walk = func(e *elem, depth int) *elem {
		for _, k := range e.kids {
			if k.name.Local == "EventList" {
				return k
			}
			switch k.name.Local {
			case "EPCISBody", "QueryResults", "resultsBody":
				if depth < 4 {
					if l := walk(k, depth+1); l != nil {
						return l
					}
				}
			}
		}
		return nil
	}
	return walk(root, 0)
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
			ev[name] = m.object(k)
		case "persistentDisposition":
			pd := map[string]any{}
			for _, s := range k.kids {
				l, _ := pd[s.name.Local].([]any)
				pd[s.name.Local] = append(l, strings.TrimSpace(s.text))
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
			addValue(ev, name, strings.TrimSpace(k.text))
		default:
			ev[name] = strings.TrimSpace(k.text)
		}
	}
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

func nonNil(l []any) []any {
	if l == nil {
		return []any{}
	}
	return l
}

func texts(kids []*elem) []any {
	out := make([]any, 0, len(kids))
	for _, k := range kids {
		out = append(out, strings.TrimSpace(k.text))
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
		v := strings.TrimSpace(k.text)
		if k.name.Local == "quantity" {
			if _, err := strconv.ParseFloat(v, 64); err == nil {
				out["quantity"] = json.Number(v)
				continue
			}
		}
		if k.name.Space != "" {
			m.addExt(out, k)
			continue
		}
		out[k.name.Local] = v
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
				e["type"] = strings.TrimSpace(a.Value)
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
			out[m.key(a.Name)] = strings.TrimSpace(a.Value)
			continue
		}
		out[a.Name.Local] = strings.TrimSpace(a.Value)
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

// value maps an element to its text, or an object of its children.
func (m *mapper) value(k *elem) any {
	if len(k.kids) == 0 {
		return strings.TrimSpace(k.text)
	}
	obj := map[string]any{}
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

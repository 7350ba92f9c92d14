package document

import (
	"bytes"
	"encoding/json"
	"errors"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/deadletter/deadletter/shared/codes"
)

// jsonDocTypes are the document types whose events are read.
var jsonDocTypes = map[string]bool{"EPCISDocument": true, "EPCISQueryDocument": true}

// jsonState is what the first pass of a JSON document leaves the second:
// the document's @context.
type jsonState struct {
	ctx jsontext.Value
}

// checkJSON is the first pass over an EPCIS 2.0 JSON document: its
// structure, its event count (epcisBody's eventList,
// queryResults.resultsBody.eventList, or event) and its header, holding
// no event.
func checkJSON(in io.Reader, info *Info) (*jsonState, error) {
	r := jsonReader{dec: newDecoder(in)}
	st := &jsonState{}
	var typ, id, created string
	var header any
	err := r.document(func(name string) error {
		var err error
		switch name {
		case "@context":
			var v jsontext.Value
			if v, err = r.dec.ReadValue(); err == nil {
				if !v.IsValid() {
					// Spliced into every event: its fault would be
					// every event's.
					return codes.Errorf(dscsa.MalformedDocument, "@context has a duplicate member name or an invalid escape")
				}
				st.ctx = bytes.Clone(v)
			}
		case "type":
			typ, err = r.str()
		case "id":
			id, err = r.str()
		case "creationDate":
			created, err = r.str()
		case "epcisHeader":
			var v jsontext.Value
			if v, err = r.dec.ReadValue(); err == nil {
				_ = json.Unmarshal(v, &header)
			}
		default:
			return r.dec.SkipValue()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !jsonDocTypes[typ] {
		return nil, codes.Errorf(dscsa.MalformedDocument, "type must be EPCISDocument or EPCISQueryDocument")
	}
	if r.sources == 0 {
		return nil, codes.Errorf(dscsa.MalformedDocument, "epcisBody has no eventList")
	}
	if r.sources > 1 {
		return nil, codes.Errorf(dscsa.MalformedDocument, "epcisBody has more than one event list")
	}
	info.Count = r.count
	info.ID = headerText(id)
	info.Created = headerTime(created)
	if sbdh := findMember(header, "StandardBusinessDocumentHeader", 4); sbdh != nil {
		info.Sender = headerText(textOf(memberPath(sbdh, "Sender", "Identifier")))
		info.Receiver = headerText(textOf(memberPath(sbdh, "Receiver", "Identifier")))
		if v := headerText(textOf(memberPath(sbdh, "DocumentIdentification", "InstanceIdentifier"))); v != "" {
			info.ID = v
		}
		if info.Created.IsZero() {
			info.Created = headerTime(textOf(memberPath(sbdh, "DocumentIdentification", "CreationDateAndTime")))
		}
	}
	return st, nil
}

// scanJSON is the second pass: it hands each event to fn.
func scanJSON(in io.Reader, st *jsonState, fn func(Event) error) error {
	r := jsonReader{dec: newDecoder(in), emit: func(v jsontext.Value, end int, index int) error {
		return fn(Event{Index: index, Offset: end - len(v), Length: len(v), Data: withContext(bytes.Clone(v), st.ctx)})
	}}
	return r.document(func(string) error { return r.dec.SkipValue() })
}

// newDecoder reads a document. Duplicate member names and invalid
// escapes (a lone surrogate) are let through here: inside an event they
// are that event's fault, which the gate codes (DUPLICATE_KEY,
// MALFORMED_JSON) while the other events go on; in the document's own
// objects the reader refuses a duplicate name itself (memberSet.add). The
// bytes are checked for UTF-8 beside the decoder (utf8Reader).
func newDecoder(in io.Reader) *jsontext.Decoder {
	return jsontext.NewDecoder(in, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
}

type jsonReader struct {
	dec *jsontext.Decoder
	// emit, in the second pass, receives each event's value and the
	// offset of its end.
	emit func(v jsontext.Value, end, index int) error
	// count is the events met; sources the event lists.
	count, sources int
}

// document walks the top-level object: member names other than
// epcisBody go to member, which reads their value.
func (r *jsonReader) document(member func(name string) error) error {
	if r.dec.PeekKind() != '{' {
		return codes.Errorf(dscsa.MalformedDocument, "document is not a JSON object")
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return r.fail(err)
	}
	var seen memberSet
	for r.dec.PeekKind() != '}' {
		name, err := r.name()
		if err != nil {
			return err
		}
		if err := seen.add("document", name); err != nil {
			return err
		}
		if name == "epcisBody" {
			err = r.body()
		} else if err = member(name); err != nil && !isCoded(err) {
			err = r.fail(err)
		}
		if err != nil {
			return err
		}
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return r.fail(err)
	}
	if _, err := r.dec.ReadToken(); !errors.Is(err, io.EOF) {
		return codes.Errorf(dscsa.MalformedDocument, "document has data after its JSON object")
	}
	return nil
}

// isCoded reports whether err already carries a code (or is fn's).
func isCoded(err error) bool { return codes.Of(err) == dscsa.MalformedDocument }

// fail codes a syntax error by byte offset.
func (r *jsonReader) fail(error) error {
	return codes.Errorf(dscsa.MalformedDocument, "document is not well-formed JSON (at byte offset %d)", r.dec.InputOffset())
}

func (r *jsonReader) name() (string, error) {
	tok, err := r.dec.ReadToken()
	if err != nil {
		return "", r.fail(err)
	}
	return tok.String(), nil
}

// str reads a value, returning it when it is a string.
func (r *jsonReader) str() (string, error) {
	tok, err := r.dec.ReadToken()
	if err != nil {
		return "", err
	}
	switch tok.Kind() {
	case '"':
		return tok.String(), nil
	case '{', '[':
		// Not a string: skip the rest of the value.
		if err := r.dec.SkipValue(); err != nil {
			return "", err
		}
	}
	return "", nil
}

// body reads epcisBody and its events.
func (r *jsonReader) body() error {
	if r.dec.PeekKind() != '{' {
		return codes.Errorf(dscsa.MalformedDocument, "epcisBody is not an object")
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return r.fail(err)
	}
	var seen memberSet
	for r.dec.PeekKind() != '}' {
		name, err := r.name()
		if err != nil {
			return err
		}
		if err := seen.add("epcisBody", name); err != nil {
			return err
		}
		switch name {
		case "eventList":
			err = r.list()
		case "event":
			r.sources++
			err = r.event()
		case "queryResults":
			err = r.path(name, "resultsBody", "eventList")
		default:
			if err := r.dec.SkipValue(); err != nil {
				return r.fail(err)
			}
		}
		if err != nil {
			return err
		}
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return r.fail(err)
	}
	return nil
}

// path descends through objects by member names to an event list: the
// value at the decoder is the object named of, which holds names[0]; with
// no names left, it is the event list. A member met twice on the way is
// refused (which of the two would be read is ambiguous).
func (r *jsonReader) path(of string, names ...string) error {
	if len(names) == 0 {
		return r.list()
	}
	if r.dec.PeekKind() != '{' {
		return codes.Errorf(dscsa.MalformedDocument, "%s is not an object", of)
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return r.fail(err)
	}
	var seen memberSet
	for r.dec.PeekKind() != '}' {
		name, err := r.name()
		if err != nil {
			return err
		}
		if err := seen.add(of, name); err != nil {
			return err
		}
		if name == names[0] {
			if err := r.path(name, names[1:]...); err != nil {
				return err
			}
			continue
		}
		if err := r.dec.SkipValue(); err != nil {
			return r.fail(err)
		}
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return r.fail(err)
	}
	return nil
}

// memberSet is the member names met in one object of the document's own
// structure (not of an event: an event's duplicate names are the gate's
// DUPLICATE_KEY, that event's alone).
type memberSet map[string]bool

// add records a member name, refusing one met before.
func (n *memberSet) add(of, name string) error {
	if *n == nil {
		*n = make(memberSet, 8)
	}
	if (*n)[name] {
		return codes.Errorf(dscsa.MalformedDocument, "%s has a duplicate member name", of)
	}
	(*n)[name] = true
	return nil
}

// list reads an event list.
func (r *jsonReader) list() error {
	if r.dec.PeekKind() != '[' {
		return codes.Errorf(dscsa.MalformedDocument, "eventList is not an array")
	}
	r.sources++
	if _, err := r.dec.ReadToken(); err != nil {
		return r.fail(err)
	}
	for r.dec.PeekKind() != ']' {
		if r.count == MaxEvents {
			return codes.Errorf(dscsa.MalformedDocument, "document has more than %d events", MaxEvents)
		}
		if r.dec.StackDepth() > MaxDepth {
			return codes.Errorf(dscsa.MalformedDocument, "document nests deeper than %d", MaxDepth)
		}
		if err := r.event(); err != nil {
			return err
		}
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return r.fail(err)
	}
	return nil
}

// event reads one event: skipped in the first pass, emitted in the second.
func (r *jsonReader) event() error {
	index := r.count
	r.count++
	if r.emit == nil {
		if err := r.dec.SkipValue(); err != nil {
			return r.fail(err)
		}
		return nil
	}
	v, err := r.dec.ReadValue()
	if err != nil {
		return r.fail(err)
	}
	return r.emit(v, int(r.dec.InputOffset()), index)
}

// withContext returns an event object's bytes, with ctx spliced in as its
// first member when the event is a non-empty object without an @context
// of its own. Other values (not an object) are returned as they are, for
// the gate to refuse.
func withContext(ev, ctx jsontext.Value) []byte {
	if len(ctx) == 0 || ev.Kind() != '{' || hasMember(ev, "@context") {
		return ev
	}
	body := bytes.TrimLeft(ev[1:], " \t\r\n")
	out := make([]byte, 0, len(ev)+len(ctx)+16)
	out = append(out, `{"@context":`...)
	out = append(out, ctx...)
	if len(body) > 0 && body[0] != '}' {
		out = append(out, ',')
	}
	return append(out, body...)
}

// hasMember reports whether a JSON object has a top-level member name.
func hasMember(obj jsontext.Value, name string) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.ReadToken(); err != nil {
		return false
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return false
		}
		if tok.String() == name {
			return true
		}
		if err := dec.SkipValue(); err != nil {
			return false
		}
	}
	return false
}

// localName is a JSON-LD member name without its prefix ("sbdh:Sender"
// → "Sender").
func localName(k string) string {
	if i := strings.LastIndexByte(k, ':'); i >= 0 {
		return k[i+1:]
	}
	return k
}

// findMember finds, depth first, the value of a member whose local name
// is name, at most depth objects down.
func findMember(v any, name string, depth int) any {
	m, ok := v.(map[string]any)
	if !ok || depth < 0 {
		return nil
	}
	for k, x := range m {
		if localName(k) == name {
			return x
		}
	}
	for _, x := range m {
		if f := findMember(x, name, depth-1); f != nil {
			return f
		}
	}
	return nil
}

// memberPath follows members by local name (the first element of an
// array on the way).
func memberPath(v any, names ...string) any {
	for _, name := range names {
		if a, ok := v.([]any); ok && len(a) > 0 {
			v = a[0]
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = nil
		for k, x := range m {
			if localName(k) == name {
				v = x
				break
			}
		}
	}
	return v
}

// textOf is a header value's text: a string, or an object's "#text",
// "@value" or "value" (an SBDH identifier with its Authority), or an
// array's first element's.
func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		if len(x) > 0 {
			return textOf(x[0])
		}
	case map[string]any:
		for _, k := range []string{"#text", "@value", "value"} {
			if s, ok := x[k].(string); ok {
				return s
			}
		}
	}
	return ""
}

package document

import (
	"bytes"
	"errors"
	"io"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/deadletter/deadletter/shared/codes"
)

// jsonDocTypes are the document types whose events are read.
var jsonDocTypes = map[string]bool{"EPCISDocument": true, "EPCISQueryDocument": true}

// readJSON reads the events of an EPCIS 2.0 JSON document: epcisBody's
// eventList, queryResults.resultsBody.eventList, or event.
func readJSON(data []byte) ([][]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	r := jsonReader{dec: dec}
	if dec.PeekKind() != '{' {
		return nil, codes.Errorf(codes.MalformedDocument, "document is not a JSON object")
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, r.fail(err)
	}
	var ctx jsontext.Value
	var typ string
	var events []jsontext.Value
	for dec.PeekKind() != '}' {
		name, err := r.name()
		if err != nil {
			return nil, err
		}
		switch name {
		case "@context":
			v, err := dec.ReadValue()
			if err != nil {
				return nil, r.fail(err)
			}
			ctx = bytes.Clone(v)
		case "type":
			tok, err := dec.ReadToken()
			if err != nil {
				return nil, r.fail(err)
			}
			if tok.Kind() == '"' {
				typ = tok.String()
			}
		case "epcisBody":
			if events, err = r.body(); err != nil {
				return nil, err
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return nil, r.fail(err)
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, r.fail(err)
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, codes.Errorf(codes.MalformedDocument, "document has data after its JSON object")
	}
	if !jsonDocTypes[typ] {
		return nil, codes.Errorf(codes.MalformedDocument, "type must be EPCISDocument or EPCISQueryDocument")
	}
	if events == nil {
		return nil, codes.Errorf(codes.MalformedDocument, "epcisBody has no eventList")
	}
	out := make([][]byte, len(events))
	for i, ev := range events {
		out[i] = withContext(ev, ctx)
	}
	return out, nil
}

type jsonReader struct {
	dec *jsontext.Decoder
}

// fail codes a syntax error by byte offset.
func (r *jsonReader) fail(error) error {
	return codes.Errorf(codes.MalformedDocument, "document is not well-formed JSON (at byte offset %d)", r.dec.InputOffset())
}

func (r *jsonReader) name() (string, error) {
	tok, err := r.dec.ReadToken()
	if err != nil {
		return "", r.fail(err)
	}
	return tok.String(), nil
}

// body reads epcisBody and returns its events (nil when it has none).
func (r *jsonReader) body() ([]jsontext.Value, error) {
	if r.dec.PeekKind() != '{' {
		return nil, codes.Errorf(codes.MalformedDocument, "epcisBody is not an object")
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return nil, r.fail(err)
	}
	var events []jsontext.Value
	for r.dec.PeekKind() != '}' {
		name, err := r.name()
		if err != nil {
			return nil, err
		}
		switch name {
		case "eventList":
			if events, err = r.list(); err != nil {
				return nil, err
			}
		case "event":
			v, err := r.dec.ReadValue()
			if err != nil {
				return nil, r.fail(err)
			}
			events = []jsontext.Value{bytes.Clone(v)}
		case "queryResults":
			if events, err = r.path("resultsBody", "eventList"); err != nil {
				return nil, err
			}
		default:
			if err := r.dec.SkipValue(); err != nil {
				return nil, r.fail(err)
			}
		}
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return nil, r.fail(err)
	}
	return events, nil
}

// path descends through objects by member names to an event list.
func (r *jsonReader) path(names ...string) ([]jsontext.Value, error) {
	if len(names) == 1 {
		return r.list()
	}
	if r.dec.PeekKind() != '{' {
		return nil, codes.Errorf(codes.MalformedDocument, "%s is not an object", names[0])
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return nil, r.fail(err)
	}
	var events []jsontext.Value
	for r.dec.PeekKind() != '}' {
		name, err := r.name()
		if err != nil {
			return nil, err
		}
		if name == names[0] {
			if events, err = r.path(names[1:]...); err != nil {
				return nil, err
			}
			continue
		}
		if err := r.dec.SkipValue(); err != nil {
			return nil, r.fail(err)
		}
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return nil, r.fail(err)
	}
	return events, nil
}

// list reads an event list, each event kept as its own bytes.
func (r *jsonReader) list() ([]jsontext.Value, error) {
	if r.dec.PeekKind() != '[' {
		return nil, codes.Errorf(codes.MalformedDocument, "eventList is not an array")
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return nil, r.fail(err)
	}
	events := []jsontext.Value{}
	for r.dec.PeekKind() != ']' {
		if len(events) == MaxEvents {
			return nil, codes.Errorf(codes.MalformedDocument, "document has more than %d events", MaxEvents)
		}
		if r.dec.StackDepth() > MaxDepth {
			return nil, codes.Errorf(codes.MalformedDocument, "document nests deeper than %d", MaxDepth)
		}
		v, err := r.dec.ReadValue()
		if err != nil {
			return nil, r.fail(err)
		}
		events = append(events, bytes.Clone(v))
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return nil, r.fail(err)
	}
	return events, nil
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

package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/codes"
)

// Decode parses a payload as exactly one UTF-8 JSON object into a Doc,
// numbers kept as json.Number: the one decoder of events, whose result the
// gate checks, the domains' rules read and content identities hash. It is
// strict where encoding/json is lenient: an object with a duplicate member
// name is rejected (DUPLICATE_KEY), because two systems reading "the same"
// event could otherwise see different values. Other
// errors are coded INVALID_UTF8, MALFORMED_JSON or NOT_AN_OBJECT; details
// give byte offsets, never payload text.
func Decode(data []byte) (Doc, error) {
	if !utf8.Valid(data) {
		return nil, codes.Errorf(codes.InvalidUTF8, "payload is not valid UTF-8")
	}
	d := decoders.Get().(*decoder)
	defer decoders.Put(d)
	d.r.Reset(data)
	d.dec.Reset(&d.r)
	if d.dec.PeekKind() != '{' {
		if err := d.dec.SkipValue(); err != nil {
			return nil, syntaxError(err)
		}
		return nil, codes.Errorf(codes.NotAnObject, "payload is JSON but not an object")
	}
	v, err := d.value()
	if err != nil {
		return nil, syntaxError(err)
	}
	if _, err := d.dec.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, codes.Errorf(codes.MalformedJSON, "payload has data after the JSON value")
	}
	return v.(map[string]any), nil
}

// decoder is a pooled jsontext decoder; decoding events is the hot path.
type decoder struct {
	r   bytes.Reader
	dec *jsontext.Decoder
}

var decoders = sync.Pool{New: func() any {
	d := &decoder{}
	d.dec = jsontext.NewDecoder(&d.r)
	return d
}}

// knownNames interns the member names the schemas declare: events repeat
// the same few dozen. Only those are interned, so the table is bounded by
// the schemas, never by what publishers send (an interning table of every
// name ever seen let any publisher grow the heap without limit).
var knownNames = sync.OnceValue(func() map[string]string {
	names := map[string]string{}
	files, _ := fs.Glob(schemas.FS, "*.schema.json")
	for _, f := range files {
		b, err := fs.ReadFile(schemas.FS, f)
		if err != nil {
			continue
		}
		var v any
		if json.Unmarshal(b, &v) == nil {
			collectNames(v, names)
		}
	}
	return names
})

// collectNames adds to names every key of every "properties" object and
// every entry of every "required" list in a decoded schema.
func collectNames(v any, names map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			switch k {
			case "properties":
				if props, ok := c.(map[string]any); ok {
					for name := range props {
						names[name] = name
					}
				}
			case "required":
				if req, ok := c.([]any); ok {
					for _, r := range req {
						if s, ok := r.(string); ok {
							names[s] = s
						}
					}
				}
			}
			collectNames(c, names)
		}
	case []any:
		for _, c := range v {
			collectNames(c, names)
		}
	}
}

func (d *decoder) value() (any, error) {
	switch d.dec.PeekKind() {
	case '{':
		if _, err := d.dec.ReadToken(); err != nil {
			return nil, err
		}
		m := make(map[string]any)
		for d.dec.PeekKind() != '}' {
			name, err := d.str(true)
			if err != nil {
				return nil, err
			}
			v, err := d.value()
			if err != nil {
				return nil, err
			}
			m[name] = v
		}
		_, err := d.dec.ReadToken()
		return m, err
	case '[':
		if _, err := d.dec.ReadToken(); err != nil {
			return nil, err
		}
		a := []any{}
		for d.dec.PeekKind() != ']' {
			v, err := d.value()
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := d.dec.ReadToken()
		return a, err
	case '"':
		return d.str(false)
	case '0':
		v, err := d.dec.ReadValue()
		return json.Number(v), err
	default:
		tok, err := d.dec.ReadToken()
		if err != nil {
			return nil, err
		}
		if k := tok.Kind(); k == 't' || k == 'f' {
			return tok.Bool(), nil
		}
		return nil, nil // null
	}
}

// str reads a string value (or member name, interned).
func (d *decoder) str(intern bool) (string, error) {
	v, err := d.dec.ReadValue()
	if err != nil {
		return "", err
	}
	if len(v) < 2 || v[0] != '"' {
		return "", errors.New("expected a string")
	}
	raw := v[1 : len(v)-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		u, err := jsontext.AppendUnquote(nil, v)
		return string(u), err
	}
	if !intern {
		return string(raw), nil
	}
	if s, ok := knownNames()[string(raw)]; ok {
		return s, nil
	}
	return string(raw), nil
}

func syntaxError(err error) error {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		if errors.Is(se.Err, jsontext.ErrDuplicateName) {
			return codes.Errorf(codes.DuplicateKey, "duplicate object member name at byte %d", se.ByteOffset)
		}
		return codes.Errorf(codes.MalformedJSON, "payload is not valid JSON: syntax error at byte %d", se.ByteOffset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return codes.Errorf(codes.MalformedJSON, "payload is not valid JSON: unexpected end of input")
	}
	return codes.Errorf(codes.MalformedJSON, "payload is not valid JSON: %s", "decode error")
}

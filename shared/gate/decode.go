package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
)

// Decode parses a payload as exactly one UTF-8 JSON object, numbers kept as
// json.Number. It is strict where encoding/json is lenient: an object with a
// duplicate member name is rejected (DUPLICATE_KEY), because two systems
// reading "the same" event could otherwise see different values. Other
// errors are coded INVALID_UTF8, MALFORMED_JSON or NOT_AN_OBJECT; details
// give byte offsets, never payload text.
func Decode(data []byte) (domain.Doc, error) {
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

// names interns object member names: events repeat the same few dozen.
var names sync.Map

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
	if s, ok := names.Load(string(raw)); ok {
		return s.(string), nil
	}
	s := string(raw)
	names.Store(s, s)
	return s, nil
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

package endpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/deadletter/deadletter/shared/api"
)

// Validator is a request type that checks its own enums and ranges after
// decoding. Validate returns an *api.Error (api.BadField) naming the
// offending member, or any error, reported as BAD_REQUEST.
type Validator interface {
	Validate() error
}

// Decode decodes a request body into v strictly: exactly one JSON value,
// no member v's type does not name (at any depth), no trailing data; an
// empty (or blank) body leaves v as it is (the zero request). It then
// calls v's Validate, when it has one. Errors are *api.Error with code
// BAD_REQUEST naming the offending member (a dotted path); they never
// echo a value of the body.
func Decode(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) > 0 {
		if err := decodeStrict(data, v); err != nil {
			return describe(data, v, err)
		}
	}
	if val, ok := v.(Validator); ok {
		if err := val.Validate(); err != nil {
			if api.AsError(err) != nil {
				return err
			}
			return api.Wrap(api.ErrBadRequest, err, err.Error())
		}
	}
	return nil
}

// errTrailing is a body with more than one JSON value.
var errTrailing = errors.New("trailing data after the JSON value")

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errTrailing
	}
	return nil
}

// describe turns a decoding error of data into v into a BAD_REQUEST naming
// the member at fault, found by decoding the members one by one (the
// standard decoder names neither an unknown member's path nor the member
// whose UnmarshalJSON failed, and its messages quote values).
func describe(data []byte, v any, err error) error {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF):
		return api.Wrap(api.ErrBadRequest, err, "the request is not valid JSON")
	case errors.Is(err, errTrailing):
		return api.Wrap(api.ErrBadRequest, err, "the request holds more than one JSON value")
	}
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return api.Wrap(api.ErrBadRequest, err, "the request cannot be decoded")
	}
	field, msg := locate(data, t, "")
	if field == "" {
		return api.Wrap(api.ErrBadRequest, err, "the request is not a JSON object of this endpoint's request")
	}
	return &api.Error{Code: api.ErrBadRequest, Field: field, Message: msg, Err: err}
}

// locate returns the path of the first member of data (decoded as type t)
// that is unknown or does not decode, and what is wrong with it.
func locate(data []byte, t reflect.Type, prefix string) (field, msg string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		var members map[string]json.RawMessage
		if json.Unmarshal(data, &members) != nil {
			return "", ""
		}
		fields := jsonFields(t)
		// Report members in the body's order.
		for _, name := range memberOrder(data) {
			raw, ok := members[name]
			if !ok {
				continue
			}
			ft, known := fields[name]
			path := prefix + name
			if !known {
				return path, "unknown member"
			}
			if err := decodeStrict(raw, reflect.New(ft).Interface()); err != nil {
				if f, m := locate(raw, ft, path+"."); f != "" {
					return f, m
				}
				return path, "not a valid " + typeName(ft)
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "", ""
		}
		var elems []json.RawMessage
		if json.Unmarshal(data, &elems) != nil {
			return "", ""
		}
		base := strings.TrimSuffix(prefix, ".")
		for i, raw := range elems {
			if err := decodeStrict(raw, reflect.New(t.Elem()).Interface()); err != nil {
				path := base + "[" + strconv.Itoa(i) + "]"
				if f, m := locate(raw, t.Elem(), path+"."); f != "" {
					return f, m
				}
				return path, "not a valid " + typeName(t.Elem())
			}
		}
	}
	return "", ""
}

// jsonFields maps the JSON member names of struct type t (embedded
// structs' included) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// memberOrder returns the member names of the JSON object data in order.
func memberOrder(data []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return names
		}
		name, _ := tok.(string)
		names = append(names, name)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return names
		}
	}
	return names
}

// typeName names a Go type in a request's words.
func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.PkgPath() == "time" && t.Name() == "Time":
		return "RFC 3339 time"
	case t.PkgPath() == "time" && t.Name() == "Duration":
		return "duration"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "base64 string"
		}
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return t.String()
}

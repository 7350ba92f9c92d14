package api

import (
	"bytes"
	"encoding/json"
	"io"
)

// ExportRecordJSON returns the one form in which an export carries a
// stored record, the form ExportPageDigest hashes and the JSONL writer
// (export.Writer, through EncodeExportLine) writes: compact JSON
// with '&', '<' and '>' as themselves and U+2028 and U+2029 escaped, which
// is how the quarantine store writes records (encoding/json without HTML
// escaping). It undoes only what JSON encoders do on the way (HTML escapes
// \u0026, \u003c, \u003e in any case of hex, raw U+2028/U+2029,
// whitespace between tokens), so a record that went through any of them
// hashes the same as the stored one, and exports written before this form
// was fixed (whose records were HTML-escaped) still verify. raw must be one
// JSON value; raw itself is returned when it is already in that form.
func ExportRecordJSON(raw []byte) []byte {
	var out []byte // nil until something changes
	changed := func(i int) {
		if out == nil {
			out = make([]byte, i, len(raw))
			copy(out, raw[:i])
		}
	}
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if !inString {
			switch c {
			case ' ', '\t', '\n', '\r':
				changed(i)
				continue
			case '"':
				inString = true
			}
			if out != nil {
				out = append(out, c)
			}
			continue
		}
		switch {
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(raw):
			if r, ok := htmlEscape(raw[i+1:]); ok {
				changed(i)
				out = append(out, r)
				i += 5
				continue
			}
			if out != nil {
				out = append(out, c, raw[i+1])
			}
			i++
			continue
		case c == 0xE2 && i+2 < len(raw) && raw[i+1] == 0x80 && (raw[i+2] == 0xA8 || raw[i+2] == 0xA9):
			changed(i)
			out = append(out, `\u202`...)
			out = append(out, '8'+raw[i+2]-0xA8)
			i += 2
			continue
		}
		if out != nil {
			out = append(out, c)
		}
	}
	if out == nil {
		return raw
	}
	return out
}

// htmlEscape reads b, the bytes after a backslash in a JSON string: the
// character of \u0026, \u003c or \u003e (hex in any case).
func htmlEscape(b []byte) (byte, bool) {
	if len(b) < 5 || b[0] != 'u' || b[1] != '0' || b[2] != '0' {
		return 0, false
	}
	switch string(bytes.ToLower(b[3:5])) {
	case "26":
		return '&', true
	case "3c":
		return '<', true
	case "3e":
		return '>', true
	}
	return 0, false
}

// EncodeExportLine writes l as one JSONL line of an export in its one
// form: no HTML escaping, and every record of a chain as
// ExportRecordJSON, byte for byte what ExportPageDigest hashed.
func EncodeExportLine(w io.Writer, l ExportLine) error {
	if c := l.Chain; c != nil {
		cc := *c
		cc.Records = make([]ExportRecord, len(c.Records))
		for i, r := range c.Records {
			r.Record = ExportRecordJSON(r.Record)
			cc.Records[i] = r
		}
		l.Chain = &cc
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(l)
}

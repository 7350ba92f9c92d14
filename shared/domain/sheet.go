package domain

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// CellKind is the type of a spreadsheet column's cells (package
// exportsheet writes them).
type CellKind uint8

// Cell kinds.
const (
	// KindText cells are strings.
	KindText CellKind = iota
	// KindInteger cells are int64.
	KindInteger
	// KindNumber cells are float64.
	KindNumber
	// KindTime cells are time.Time in UTC, written to the millisecond.
	KindTime
	// KindDate cells are time.Time at midnight UTC, written as a date.
	KindDate
)

// Column is one column of a sheet: its name (unique in the sheet) and the
// kind of its cells (a cell that does not read as its kind stays text).
type Column struct {
	Name string
	Kind CellKind
}

// Sheet is a domain's own sheet of a spreadsheet export (Spec.Sheet): the
// key fields an inspector asks about, as typed columns. An export makes
// one Sheet per domain present, adds each of the domain's events with
// Row, then asks for the Columns.
type Sheet interface {
	// Row returns the cells of the row of a decoded event (a JSON object;
	// eventType is what Identify derives, maybe ""), by column name: nil,
	// string, int64, float64 or time.Time; a cell left out is empty.
	Row(doc Doc, eventType string) map[string]any
	// Columns returns the sheet's columns, in order, once every row was
	// added.
	Columns() []Column
}

// FixedSheet is a Sheet whose columns are the same in every export.
type FixedSheet struct {
	// Cols are the columns.
	Cols []Column
	// Cells returns the cells of an event's row, one per column in order
	// (nil or "" for an empty cell).
	Cells func(doc Doc, eventType string) []any
}

// Row returns the cells Cells gives, by column name, the empty ones left out.
func (s FixedSheet) Row(doc Doc, eventType string) map[string]any {
	vals := map[string]any{}
	for i, v := range s.Cells(doc, eventType) {
		if v != nil && v != "" && i < len(s.Cols) {
			vals[s.Cols[i].Name] = v
		}
	}
	return vals
}

// Columns returns Cols.
func (s FixedSheet) Columns() []Column { return s.Cols }

// CellText is a payload value as text: a string as is, a number as
// written, an array of strings joined by "; ", anything else its compact
// JSON.
func CellText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				b, _ := json.Marshal(x)
				return string(b)
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, "; ")
	default:
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(x)
		return strings.TrimSpace(b.String())
	}
}

// CellTime reads an RFC 3339 date-time with an offset as a UTC time; nil
// when v is not one.
func CellTime(v any) any {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	t, err := ParseTime("", strings.TrimSpace(s))
	if err != nil {
		return nil
	}
	return t
}

// CellDate reads a YYYY-MM-DD date; nil when v is not one.
func CellDate(v any) any {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	t, err := time.Parse(time.DateOnly, strings.TrimSpace(s))
	if err != nil {
		return nil
	}
	return t
}

// CellNumber reads a JSON number, or a string holding a decimal number;
// nil otherwise.
func CellNumber(v any) any {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = strings.TrimSpace(x)
	default:
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || s == "" || strings.ContainsAny(s, "xXpPiInN_") {
		return nil
	}
	return f
}

// CellOr is the typed cell v, or raw as text (CellText) when raw did not
// read as its kind.
func CellOr(v, raw any) any {
	if v != nil {
		return v
	}
	return CellText(raw)
}

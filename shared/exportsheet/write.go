package exportsheet

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"
)

// WriteCSV writes the builder's one table (Table) as CSV.
func (b *Builder) WriteCSV(w io.Writer) error {
	header, rows := b.Table()
	return WriteCSV(w, header, rows)
}

// WriteXLSX writes the builder's sheets (Sheets) as XLSX.
func (b *Builder) WriteXLSX(w io.Writer) error { return WriteXLSX(w, b.Sheets()) }

// WriteCSV writes the spreadsheet as CSV (RFC 4180), every cell made
// inert for a spreadsheet (InertCell). It rewrites the cells of rows.
func WriteCSV(w io.Writer, header []string, rows [][]string) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := csv.NewWriter(bw)
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, r := range rows {
		for i := range r {
			r[i] = InertCell(r[i])
		}
		if err := cw.Write(r); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return bw.Flush()
}

// InertCell keeps a spreadsheet from running a cell as a formula (CSV
// injection: payload values come from publishers): a value that starts
// with '=', '+', '-', '@', a tab or a carriage return, and is not a
// number, gets a leading apostrophe. XLSX cells are written as strings
// and need none.
func InertCell(v string) string {
	if v == "" || !strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return v
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return v
	}
	return "'" + v
}

// Cell text bounds of the XLSX format (ECMA-376, and what Excel opens).
const (
	// MaxCellChars is the most UTF-16 code units of a cell's text.
	MaxCellChars = excelize.TotalCellChars
	// maxColumnWidth and minColumnWidth bound a fitted column (characters).
	maxColumnWidth = 60
	minColumnWidth = 8
	// fitRows is how many rows a column's width is fitted to.
	fitRows = 1000
)

// cutNote ends a cell's text cut at MaxCellChars.
const cutNote = " … [cut: %d characters; the JSONL export holds the whole value]"

// XLSXText is s as an XLSX cell's text: a control character XML 1.0 cannot
// hold (U+0000 to U+001F but tab, line feed and carriage return) shown as
// its Unicode control picture (U+2400 + c), U+FFFE and U+FFFF and invalid
// UTF-8 as U+FFFD, and text past MaxCellChars UTF-16 code units cut with a
// note saying so.
func XLSXText(s string) string {
	clean := true
	for _, r := range s {
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0xFFFE || r == 0xFFFF || r == utf8.RuneError {
			clean = false
			break
		}
	}
	if !clean {
		var b strings.Builder
		b.Grow(len(s))
		for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
			switch {
			case r < 0x20 && r != '\t' && r != '\n' && r != '\r':
				b.WriteRune(0x2400 + r)
			case r == 0xFFFE || r == 0xFFFF:
				b.WriteRune(utf8.RuneError)
			default:
				b.WriteRune(r)
			}
		}
		s = b.String()
	}
	if len(s) <= MaxCellChars { // bytes ≥ UTF-16 units
		return s
	}
	units := 0
	for _, r := range s {
		units += utf16.RuneLen(r)
	}
	if units <= MaxCellChars {
		return s
	}
	note := fmt.Sprintf(cutNote, units)
	keep, n := 0, 0
	for i, r := range s {
		if n+utf16.RuneLen(r) > MaxCellChars-len(note) {
			keep = i
			break
		}
		n += utf16.RuneLen(r)
	}
	return s[:keep] + note
}

// XLSX cell formats.
const (
	timeFormat = "yyyy-mm-dd hh:mm:ss.000"
	dateFormat = "yyyy-mm-dd"
)

// WriteXLSX writes sheets as an XLSX workbook, a worksheet per sheet: each
// a table (sort and filter on every header; an empty sheet gets one empty
// row, as a table needs), its header row frozen, its columns fitted to
// their header and first rows, its cells typed (text through XLSXText,
// numbers, and times and dates as date cells in UTC).
func WriteXLSX(w io.Writer, sheets []Sheet) error {
	f := excelize.NewFile()
	defer func() { _ = f.Close() }()
	tf, df := timeFormat, dateFormat
	timeStyle, err := f.NewStyle(&excelize.Style{CustomNumFmt: &tf})
	if err != nil {
		return err
	}
	dateStyle, err := f.NewStyle(&excelize.Style{CustomNumFmt: &df})
	if err != nil {
		return err
	}
	for i, s := range sheets {
		if i == 0 {
			if err := f.SetSheetName("Sheet1", s.Name); err != nil {
				return err
			}
		} else if _, err := f.NewSheet(s.Name); err != nil {
			return err
		}
		if err := writeSheet(f, s, timeStyle, dateStyle); err != nil {
			return fmt.Errorf("sheet %s: %w", s.Name, err)
		}
	}
	return f.Write(w)
}

// writeSheet writes one sheet with a stream writer.
func writeSheet(f *excelize.File, s Sheet, timeStyle, dateStyle int) error {
	sw, err := f.NewStreamWriter(s.Name)
	if err != nil {
		return err
	}
	for i, c := range s.Columns {
		if err := sw.SetColWidth(i+1, i+1, columnWidth(c, s.Rows, i)); err != nil {
			return err
		}
	}
	if err := sw.SetPanes(&excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}); err != nil {
		return err
	}
	row := make([]any, len(s.Columns))
	for i, c := range s.Columns {
		row[i] = XLSXText(c.Name)
	}
	if err := sw.SetRow("A1", row); err != nil {
		return err
	}
	for r, vals := range s.Rows {
		for i, v := range vals {
			row[i] = xlsxCell(v, s.Columns[i].Kind, timeStyle, dateStyle)
		}
		name, err := excelize.CoordinatesToCellName(1, r+2)
		if err != nil {
			return err
		}
		if err := sw.SetRow(name, row); err != nil {
			return err
		}
	}
	last, err := excelize.CoordinatesToCellName(len(s.Columns), max(len(s.Rows), 1)+1)
	if err != nil {
		return err
	}
	if err := sw.AddTable(&excelize.Table{Range: "A1:" + last, Name: s.Table, StyleName: "TableStyleLight9"}); err != nil {
		return err
	}
	return sw.Flush()
}

// xlsxCell is the stream writer's value of cell v of a column of kind k.
func xlsxCell(v any, k Kind, timeStyle, dateStyle int) any {
	switch x := v.(type) {
	case string:
		return XLSXText(x)
	case time.Time:
		style := timeStyle
		if k == Date {
			style = dateStyle
		}
		return excelize.Cell{StyleID: style, Value: x.UTC()}
	}
	return v // nil, int64, float64
}

// columnWidth fits column i (characters): its header and the text of its
// first fitRows cells, within minColumnWidth..maxColumnWidth.
func columnWidth(c Column, rows [][]any, i int) float64 {
	w := utf8.RuneCountInString(c.Name) + 2 // the filter button
	switch c.Kind {
	case Time:
		w = max(w, len(timeLayout))
	case Date:
		w = max(w, len(time.DateOnly)+1)
	}
	for _, r := range rows[:min(len(rows), fitRows)] {
		n := 0
		switch x := r[i].(type) {
		case string:
			line, _, _ := strings.Cut(x, "\n")
			n = utf8.RuneCountInString(line)
		case int64, float64:
			n = len(CSVText(x, c.Kind))
		}
		w = max(w, n+1)
	}
	return float64(min(max(w, minColumnWidth), maxColumnWidth))
}

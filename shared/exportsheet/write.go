package exportsheet

import (
	"bufio"
	"encoding/csv"
	"io"
	"strconv"
	"strings"

	"github.com/xuri/excelize/v2"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/record"
)

// ChainHasLot reports whether a record of the chain carries the FSMA
// traceability lot code lot.
func ChainHasLot(c api.ExportChain, lot string) bool {
	for _, er := range c.Records {
		r, err := record.Parse(er.Record)
		if err != nil {
			continue
		}
		if doc := payloadDoc(r.Payload); doc != nil && cell(doc["traceability_lot_code"]) == lot {
			return true
		}
	}
	return false
}

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

// WriteXLSX writes the spreadsheet as one XLSX sheet with an auto-filter
// made a table (each header sorts and filters) and the header row frozen.
func WriteXLSX(w io.Writer, header []string, rows [][]string) error {
	f := excelize.NewFile()
	defer func() { _ = f.Close() }()
	const sheet = "Sheet1"
	sw, err := f.NewStreamWriter(sheet)
	if err != nil {
		return err
	}
	if err := sw.SetPanes(&excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}); err != nil {
		return err
	}
	row := make([]any, len(header))
	for i, h := range header {
		row[i] = h
	}
	if err := sw.SetRow("A1", row); err != nil {
		return err
	}
	for r, vals := range rows {
		row := make([]any, len(vals))
		for i, v := range vals {
			row[i] = v
		}
		cell, err := excelize.CoordinatesToCellName(1, r+2)
		if err != nil {
			return err
		}
		if err := sw.SetRow(cell, row); err != nil {
			return err
		}
	}
	last, err := excelize.CoordinatesToCellName(len(header), len(rows)+1)
	if err != nil {
		return err
	}
	// A table: each header gets the sort and filter button.
	if err := sw.AddTable(&excelize.Table{Range: "A1:" + last, Name: "Export", StyleName: "TableStyleLight9"}); err != nil {
		return err
	}
	if err := sw.Flush(); err != nil {
		return err
	}
	return f.Write(w)
}

package exportsheet

import (
	"archive/zip"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"github.com/deadletter/deadletter/shared/domain/dscsa/eventhash"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
)

// TestInertCell: a cell that a spreadsheet would run as a formula is made
// inert; numbers, negative ones included, and other text are kept.
func TestInertCell(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"formula", `=HYPERLINK("http://x","y")`, `'=HYPERLINK("http://x","y")`},
		{"plus", "+1+cmd|' /C calc'!A0", "'+1+cmd|' /C calc'!A0"},
		{"minus expression", "-2+3", "'-2+3"},
		{"at", "@SUM(A1:A2)", "'@SUM(A1:A2)"},
		{"tab", "\t=1", "'\t=1"},
		{"negative number", "-30", "-30"},
		{"signed number", "+4.5", "+4.5"},
		{"text", "SUP-00417", "SUP-00417"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := InertCell(tc.in); got != tc.want {
				t.Errorf("InertCell(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestWriteCSVIsInert: WriteCSV writes a formula-like payload value inert.
func TestWriteCSVIsInert(t *testing.T) {
	var b strings.Builder
	if err := WriteCSV(&b, []string{"product_description"}, [][]string{{`=HYPERLINK("http://x","y")`}}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "product_description\n\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"\n"; got != want {
		t.Fatalf("WriteCSV wrote %q, want %q", got, want)
	}
}

// TestXLSXText: text an XLSX cell cannot hold is shown, not dropped, and
// text past the cell limit is cut with a note.
func TestXLSXText(t *testing.T) {
	long := strings.Repeat("中", MaxCellChars+10)
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "Müller & Söhne <Großhandel>", "Müller & Söhne <Großhandel>"},
		{"controls", "a\x00b\x01c\x1fd\te\nf\rg", "a\u2400b\u2401c\u241fd\te\nf\rg"},
		{"non-characters", "x\uFFFEy\uFFFF", "x\uFFFDy\uFFFD"},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb"},
		{"long", long, strings.Repeat("中", MaxCellChars-len(fmt.Sprintf(cutNote, MaxCellChars+10))) + fmt.Sprintf(cutNote, MaxCellChars+10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := XLSXText(tc.in); got != tc.want {
				t.Errorf("XLSXText(%.40q) = %.80q…, want %.80q…", tc.in, got, tc.want)
			}
		})
	}
}

// chainOf returns a one-record exported chain of domain dom whose payload
// is doc.
func chainOf(tb testing.TB, n int, dom, eventType, doc string) api.ExportChain {
	tb.Helper()
	at := time.Date(2025, 3, 13, 2, 30, 0, 123e6, time.UTC).Add(time.Duration(n) * time.Minute)
	id := fmt.Sprintf("%s_%032d", dom, n)
	r := record.FromFailure(record.Failure{
		Class: record.ClassExhausted, Code: codes.DownstreamUnavailable, Detail: "downstream 503", Domain: dom,
		Subject: "events." + dom + "." + eventType, Stream: "EVENTS", Seq: uint64(n + 1), Deliveries: 5,
		Published: at, Payload: []byte(doc), FailedAt: at,
		Envelope: &envelope.Envelope{Domain: dom, EventType: eventType, IdempotencyKey: id, EventTime: at},
	}, at)
	if err := record.Seal(&r); err != nil {
		tb.Fatal(err)
	}
	b, err := record.Marshal(r)
	if err != nil {
		tb.Fatal(err)
	}
	return api.ExportChain{DLQID: id, Domain: dom, Records: []api.ExportRecord{{Seq: uint64(n + 1), Record: b}}}
}

// sheetEvents are one event per domain (and FSMA CTEs whose KDEs include
// event_time, the record's own column name), with the text of the trade.
func sheetEvents(tb testing.TB) []api.ExportChain {
	tb.Helper()
	var controls strings.Builder
	for c := rune(0); c < 0x20; c++ {
		controls.WriteRune(c)
	}
	enc := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return []api.ExportChain{
		chainOf(tb, 0, "pharmacy", "transfer_out", `{"transaction_id":"INV-2025-0183","registrant_dea":"BW4829137","ndc":"55150-123-10",`+
			`"lot":"C4410B","expiry":"2026-09-30","quantity_delta":"-20.5","unit":"EA","event_type":"transfer_out","dea_schedule":"II",`+
			`"occurred_at":"2025-03-14T10:42:10.250-05:00","actor_id":"Pharmacie Saint-Étienne","counterparty_dea":"RK5612088"}`),
		chainOf(tb, 1, "dscsa", "commissioning", dscsaExample),
		chainOf(tb, 2, "fsma", "shipping", `{"supplier_id":"SUP-00417","cte_type":"shipping","traceability_lot_code":"00860001000030-RL250312A",`+
			`"tlc_source":{"gln":"0860001000030"},"product_description":"Romaine & kale <fresh> `+strings.Trim(enc(controls.String()), `"`)+`",`+
			`"quantity":600,"unit_of_measure":"cases","ship_from":{"name":"Müller & Söhne <Großhandel>","address":"Hauptstraße 1, 80331 München"},`+
			`"ship_to":{"gln":"0614141000012"},"event_time":"2025-03-13T02:30:00Z","reference_document":{"type":"BOL","number":"BOL-778120"},`+
			`"example:note":`+enc(strings.Repeat("long & <text> ", 9000))+`}`),
		chainOf(tb, 3, "fsma", "transformation", `{"supplier_id":"SUP-00417","cte_type":"transformation","traceability_lot_code":"TLC-中文-🥬",`+
			`"location":{"gln":"0860001000030"},"tlc_source":{"gln":"0860001000030"},"product_description":"Salad mix","quantity":"12.5",`+
			`"unit_of_measure":"kg","input_tlcs":["TLC-1","TLC-2"],"event_time":"2025-03-14T08:00:00.999+01:00",`+
			`"reference_document":{"type":"WO","number":"WO-1"}}`),
		// Invalid: a location that is not an object still shows.
		chainOf(tb, 4, "fsma", "harvesting", `{"supplier_id":"SUP-00417","cte_type":"harvesting","traceability_lot_code":"TLC-H1",`+
			`"location":"Farm X, Salinas","event_time":"yesterday"}`),
	}
}

// TestSheetsAreWellFormed writes the sheets of all three domains (with
// their chain columns: a source document, corrections) as XLSX
// (to $EXPORT_CHECK_OUT too when set, for make export-check) and reads the file back as an independent reader would: every XML part
// parses with encoding/xml; then excelize, opening the bytes afresh, finds
// per sheet one table whose columns are the header cells, unique ignoring
// case, a frozen header row, fitted widths, and typed cells (numbers,
// date-time cells in UTC to the millisecond, dates).
func TestSheetsAreWellFormed(t *testing.T) {
	var b Builder
	for _, c := range sheetEvents(t) {
		b.Add(c)
	}
	for _, c := range chainColumnChains(t) { // after the first rows checked below
		b.Add(c)
	}
	var file bytes.Buffer
	if err := b.WriteXLSX(&file); err != nil {
		t.Fatal(err)
	}
	if out := os.Getenv("EXPORT_CHECK_OUT"); out != "" { // make export-check: LibreOffice reads it next
		if err := os.WriteFile(out, file.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	zr, err := zip.NewReader(bytes.NewReader(file.Bytes()), int64(file.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for _, zf := range zr.File {
		if !strings.HasSuffix(zf.Name, ".xml") && !strings.HasSuffix(zf.Name, ".rels") {
			continue
		}
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(rc)
		for {
			if _, err := dec.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s is not well-formed XML: %v", zf.Name, err)
			}
		}
		_ = rc.Close()
	}
	x, err := excelize.OpenReader(bytes.NewReader(file.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = x.Close() }()
	if got, want := x.GetSheetList(), []string{"records", "pharmacy", "dscsa", "fsma"}; !slices.Equal(got, want) {
		t.Fatalf("sheets %v, want %v", got, want)
	}
	type want struct {
		col  string
		kind excelize.CellType
		val  string // the formatted value, "" not checked
	}
	for _, tc := range []struct {
		sheet string
		rows  int
		cells []want // in the first data row
	}{
		{"records", 13, []want{{"record_index", excelize.CellTypeUnset, "0"}, {"recorded_at", excelize.CellTypeUnset, "2025-03-13 02:30:00.123"}}},
		{"pharmacy", 7, []want{{"pharmacy.ndc11", excelize.CellTypeInlineString, "55150012310"}, {"pharmacy.quantity", excelize.CellTypeUnset, "-20.5"},
			{"pharmacy.expiry", excelize.CellTypeUnset, "2026-09-30"}, {"pharmacy.occurred_at", excelize.CellTypeUnset, "2025-03-14 15:42:10.250"},
			{"pharmacy.registrant_dea", excelize.CellTypeInlineString, "BW4829137"}, {"pharmacy.counterparty_dea", excelize.CellTypeInlineString, "RK5612088"},
			{"pharmacy.dea_schedule", excelize.CellTypeInlineString, "II"}}},
		{"dscsa", 3, []want{{"dscsa.gtin", excelize.CellTypeInlineString, "10614141073464"}, {"dscsa.serial", excelize.CellTypeInlineString, "2017"},
			{"dscsa.epc_count", excelize.CellTypeUnset, "2"}, {"dscsa.lot", excelize.CellTypeInlineString, "L-2024 & <A>"},
			{"dscsa.expiry", excelize.CellTypeUnset, "2026-12-31"}, {"dscsa.event_time", excelize.CellTypeUnset, "2024-06-03 06:00:00.500"},
			{"dscsa.business_step", excelize.CellTypeInlineString, "commissioning"}, {"dscsa.read_point", excelize.CellTypeInlineString, ""},
			{"dscsa.business_location", excelize.CellTypeInlineString, ""}, {"dscsa.event_hash_id", excelize.CellTypeInlineString, dscsaHashID(t)}}},
		{"fsma", 3, []want{{"fsma.event_time", excelize.CellTypeUnset, "2025-03-13 02:30:00.000"}, {"fsma.quantity", excelize.CellTypeUnset, "600"},
			{"fsma.ship_from.name", excelize.CellTypeInlineString, "Müller & Söhne <Großhandel>"}, {"fsma.ship_to.gln", excelize.CellTypeInlineString, "0614141000012"},
			{"fsma.reference_document.number", excelize.CellTypeInlineString, "BOL-778120"}, {"fsma.traceability_lot_code", excelize.CellTypeInlineString, "00860001000030-RL250312A"},
			{"fsma.input_tlcs", excelize.CellTypeUnset, ""}, {"fsma.location.gln", excelize.CellTypeUnset, ""}}},
	} {
		t.Run(tc.sheet, func(t *testing.T) {
			rows, err := x.GetRows(tc.sheet)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != tc.rows+1 {
				t.Fatalf("%d rows, want a header and %d", len(rows), tc.rows)
			}
			header := rows[0]
			seen := map[string]bool{}
			for _, h := range header {
				if h == "" || seen[strings.ToLower(h)] {
					t.Errorf("header %q empty or repeated (ignoring case): %q", h, header)
				}
				seen[strings.ToLower(h)] = true
			}
			tables, err := x.GetTables(tc.sheet)
			if err != nil || len(tables) != 1 {
				t.Fatalf("tables: %v, %v; want one", tables, err)
			}
			if last, _ := excelize.CoordinatesToCellName(len(header), tc.rows+1); tables[0].Range != "A1:"+last {
				t.Errorf("table range %s, want A1:%s", tables[0].Range, last)
			}
			panes, err := x.GetPanes(tc.sheet)
			if err != nil || !panes.Freeze || panes.YSplit != 1 {
				t.Errorf("panes %+v, %v: the header row is not frozen", panes, err)
			}
			for i := range header {
				name, _ := excelize.ColumnNumberToName(i + 1)
				if w, err := x.GetColWidth(tc.sheet, name); err != nil || w < minColumnWidth || w > maxColumnWidth {
					t.Errorf("column %s width %v, %v", header[i], w, err)
				}
			}
			for _, c := range tc.cells {
				i := slices.Index(header, c.col)
				if i < 0 {
					t.Errorf("no column %q in %q", c.col, header)
					continue
				}
				ref, _ := excelize.CoordinatesToCellName(i+1, 2)
				v, _ := x.GetCellValue(tc.sheet, ref)
				typ, _ := x.GetCellType(tc.sheet, ref)
				if strings.Count(c.val, ":") == 2 { // a date-time cell: its serial, to the millisecond, and its format
					v = dateTimeOf(t, x, tc.sheet, ref)
				}
				if c.val != "" && (v != c.val || typ != c.kind) {
					t.Errorf("%s (%s) = %q of type %v, want %q of type %v", c.col, ref, v, typ, c.val, c.kind)
				}
				if c.val == "" && c.kind == excelize.CellTypeInlineString && v == "" {
					t.Errorf("%s (%s) is empty", c.col, ref)
				}
			}
		})
	}
	t.Run("the text of the trade", func(t *testing.T) {
		rows, _ := x.GetRows("fsma")
		for _, c := range []string{"fsma.location", "fsma.location.gln", "fsma.subsequent_recipient"} {
			if !slices.Contains(rows[0], c) {
				t.Errorf("no column %q in %q", c, rows[0])
			}
		}
		all := fmt.Sprint(rows)
		for _, s := range []string{"Romaine & kale <fresh> \u2400\u2401", "TLC-中文-🥬", "TLC-1; TLC-2", "[cut: ", "Farm X, Salinas", "yesterday"} {
			if !strings.Contains(all, s) {
				t.Errorf("the fsma sheet lacks %q", s)
			}
		}
		dscsaRows, _ := x.GetRows("dscsa")
		if !strings.Contains(fmt.Sprint(dscsaRows), sourceDocument.ID) {
			t.Errorf("the dscsa sheet lacks the source document id %q", sourceDocument.ID)
		}
	})
}

// TestCSVColumnsUnique: the CSV of all three domains has unique column
// names, the record's event_time apart from the FSMA KDE's, and its
// times in UTC to the millisecond.
func TestCSVColumnsUnique(t *testing.T) {
	var b Builder
	for _, c := range sheetEvents(t) {
		b.Add(c)
	}
	var out bytes.Buffer
	if err := b.WriteCSV(&out); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	header := rows[0]
	seen := map[string]bool{}
	for _, h := range header {
		if seen[strings.ToLower(h)] {
			t.Errorf("column %q twice", h)
		}
		seen[strings.ToLower(h)] = true
	}
	for _, c := range []string{"event_time", "fsma.event_time", "dscsa.event_time", "pharmacy.occurred_at", "fsma.ship_from.name", "dscsa.gtin"} {
		if !seen[c] {
			t.Errorf("no column %q", c)
		}
	}
	if !strings.HasPrefix(strings.Join(header, ","), "dlq_id,domain,record_index,") {
		t.Errorf("header %q", header)
	}
	i := slices.Index(header, "pharmacy.occurred_at")
	if got := rows[1][i]; got != "2025-03-14T15:42:10.250Z" {
		t.Errorf("pharmacy.occurred_at = %q, want 2025-03-14T15:42:10.250Z", got)
	}
}

// dateTimeOf reads the cell ref as a date-time cell: its serial as a UTC
// time to the millisecond, formatted as the cell's number format says
// (excelize's own formatter leaves fractions of a second out).
func dateTimeOf(tb testing.TB, x *excelize.File, sheet, ref string) string {
	tb.Helper()
	raw, err := x.GetCellValue(sheet, ref, excelize.Options{RawCellValue: true})
	if err != nil {
		tb.Fatal(err)
	}
	serial, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		tb.Fatalf("%s!%s holds %q, not a date-time serial", sheet, ref, raw)
	}
	// Days since 1899-12-30 (the 1900 date system, after 1900-03-01).
	at := time.Date(1899, 12, 30, 0, 0, 0, 0, time.UTC).Add(time.Duration(serial * 86400 * float64(time.Second)))
	id, err := x.GetCellStyle(sheet, ref)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := x.GetStyle(id)
	if err != nil || st.CustomNumFmt == nil || *st.CustomNumFmt != timeFormat {
		tb.Fatalf("%s!%s: style %+v, %v; want the number format %q", sheet, ref, st, err, timeFormat)
	}
	return at.Round(time.Millisecond).Format("2006-01-02 15:04:05.000")
}

// dscsaExample is the DSCSA event of the test chains: trade text in its
// lot, a Digital Link with a query string among its EPCs.
const dscsaExample = `{"type":"ObjectEvent","eventID":"urn:uuid:6f0c1a52-3b7e-4d0e-9a43-0d1c2b3a4f5e","eventTime":"2024-06-03T08:00:00.5+02:00","eventTimeZoneOffset":"+02:00",` +
	`"epcList":["urn:epc:id:sgtin:0614141.107346.2017","https://id.gs1.org/01/00614141073467/21/2018?lot=A&x=<y>"],` +
	`"action":"ADD","bizStep":"commissioning","disposition":"active","readPoint":{"id":"urn:epc:id:sgln:0614141.07346.1234"},` +
	`"bizLocation":{"id":"urn:epc:id:sgln:0614141.07346.0"},"ilmd":{"cbvmda:lotNumber":"L-2024 & <A>","cbvmda:itemExpirationDate":"2026-12-31"}}`

// dscsaHashID is dscsaExample's CBV 2.0 event hash ID, computed by the
// domain's own package: the sheet shows the standard hash, not the eventID.
func dscsaHashID(tb testing.TB) string {
	tb.Helper()
	var ev map[string]any
	if err := json.Unmarshal([]byte(dscsaExample), &ev); err != nil {
		tb.Fatal(err)
	}
	return eventhash.ID(ev, nil)
}

// Package exportsheet is the one owner of the spreadsheet forms of an
// inspection export (audit.export pages): the rows of its records
// (Builder) and the CSV and XLSX writers (WriteCSV, WriteXLSX, with cells
// made inert for a spreadsheet); the auditor selects an export's chains by
// every filter (lot included). dlqctl export and the console's Audit page both write with it; the JSONL
// form is shared/export's Writer.
//
// An XLSX export has a "records" sheet (one row per stored record: the
// failure, the chain's status after the record and the record's seal) and
// one sheet per domain present, named after the domain, with the key
// fields an inspector asks about as typed columns (each domain declares
// its sheet in its package: domain.Spec.Sheet) (numbers as numbers,
// times as UTC date-time cells to the millisecond, dates as date cells):
// pharmacy (registrant, transaction id, event type, NDC and NDC-11, lot,
// expiry, quantity, unit, schedule, counterparty, occurred at; and from
// the chain's records the correcting person: who wrote the latest
// correction, who approved it, when), dscsa (from the record's provenance
// the source document's instance id and the event's position in it, event
// i of n; then event time, business step, action, disposition, GTIN and
// serial of the first EPC, EPC count and list, lot, expiry, read point,
// business location, event hash ID) and fsma (supplier, traceability lot code, CTE
// type, every KDE of the CTE types present and the other fields the events
// carry, location and reference-document objects flattened into one column
// per member, as in the FDA's FSMA 204 sortable spreadsheet). Each sheet is
// a table (sort and filter on every header) with unique column names, its
// header row frozen and its columns fitted. A CSV export is one table: the
// records' columns, then the columns of each domain present prefixed with
// the domain ("fsma.event_time" is the KDE, "event_time" the record's).
package exportsheet

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/record"
)

// Kind is the type of a column's cells (the domains' sheets declare theirs:
// domain.CellKind).
type Kind = domain.CellKind

// Column kinds.
const (
	// Text cells are strings.
	Text = domain.KindText
	// Integer cells are int64.
	Integer = domain.KindInteger
	// Number cells are float64.
	Number = domain.KindNumber
	// Time cells are time.Time in UTC, written to the millisecond.
	Time = domain.KindTime
	// Date cells are time.Time at midnight UTC, written as a date.
	Date = domain.KindDate
)

// Column is one column of a sheet: its name (unique in the sheet) and the
// kind of its cells (a cell that does not read as its kind stays text).
type Column = domain.Column

// Sheet is one table of an export: a name (an XLSX sheet's), a table name,
// its columns, and per row one cell per column: nil (empty), string,
// int64, float64 or time.Time.
type Sheet struct {
	Name    string
	Table   string
	Columns []Column
	Rows    [][]any
}

// recordColumns are the columns of every row of the records sheet (and the
// first columns of a CSV export): one row per stored record, with the
// event's key fields, the failure, the chain's status after the record and
// the record's seal.
var recordColumns = []Column{
	{Name: "dlq_id", Kind: Text}, {Name: "domain", Kind: Text}, {Name: "record_index", Kind: Integer}, {Name: "kind", Kind: Text}, {Name: "quarantine_seq", Kind: Integer},
	{Name: "status", Kind: Text}, {Name: "class", Kind: Text}, {Name: "error_code", Kind: Text}, {Name: "error_detail", Kind: Text}, {Name: "party_id", Kind: Text},
	{Name: "event_type", Kind: Text}, {Name: "idempotency_key", Kind: Text}, {Name: "ordering_key", Kind: Text}, {Name: "event_time", Kind: Time},
	{Name: "first_seen", Kind: Time}, {Name: "recorded_at", Kind: Time}, {Name: "redrive_count", Kind: Integer}, {Name: "actor", Kind: Text}, {Name: "reason", Kind: Text},
	{Name: "payload_sha256", Kind: Text}, {Name: "audit_hash", Kind: Text}, {Name: "prev_hash", Kind: Text},
}

// leadColumns are the record columns a domain sheet starts with.
var leadColumns = []string{"dlq_id", "record_index", "kind", "status", "class", "error_code", "recorded_at"}

// exportRow is one record's row: the record columns' cells, its domain,
// the cells of the domain's chain columns (chainColumns) and those of the
// domain's columns (nil when the payload is not a JSON object of a known
// domain).
type exportRow struct {
	base   []any
	domain string
	chain  []any
	vals   map[string]any
}

// Builder turns chains into a spreadsheet, a page at a time: one row per
// record (see the package doc for the sheets and columns). Only the rows'
// cells are kept, not the chains.
type Builder struct {
	rows []exportRow
	// sheets are the domain sheets (domain.Spec.Sheet) of the domains
	// with rows that have domain cells.
	sheets map[string]domain.Sheet
}

// Add adds the rows of one chain.
func (b *Builder) Add(c api.ExportChain) {
	if b.sheets == nil {
		b.sheets = map[string]domain.Sheet{}
	}
	var recs []record.Record
	var facts chainFacts
	for _, er := range c.Records {
		r, err := record.Parse(er.Record)
		if err != nil {
			continue // verify-export reports it
		}
		recs = append(recs, r)
		st, _ := record.Fold(recs)
		facts.st = st
		facts.next(r)
		doc := payloadDoc(st.Payload)
		env := envelopeOf(c.Domain, doc)
		var evTime any
		if st.EventTime != nil {
			evTime = st.EventTime.UTC()
		}
		row := exportRow{domain: c.Domain, base: []any{
			c.DLQID, c.Domain, int64(r.Index), string(r.Kind), int64(er.Seq), string(st.Status),
			string(st.Class), string(st.ErrorCode), st.ErrorDetail, firstNonEmpty(st.PartyID, env.PartyID),
			env.EventType, firstNonEmpty(st.IdempotencyKey, env.IdempotencyKey), firstNonEmpty(st.OrderingKey, env.OrderingKey),
			evTime, st.FirstSeen.UTC(), r.QuarantinedAt.UTC(),
			int64(st.RedriveCount), r.Actor, r.Reason, payloadHash(st.Payload), r.AuditHash, r.PrevHash,
		}}
		if doc != nil {
			if sh := b.sheet(c.Domain); sh != nil {
				row.vals = sh.Row(doc, env.EventType)
				row.chain = chainCells(c.Domain, &facts)
			}
		}
		b.rows = append(b.rows, row)
	}
}

// sheet returns the export's sheet of dom, nil for a domain without a
// sheet of its own.
func (b *Builder) sheet(dom string) domain.Sheet {
	if sh, ok := b.sheets[dom]; ok {
		return sh
	}
	spec, ok := registry.Lookup(dom)
	if !ok || spec.Sheet == nil {
		return nil
	}
	sh := spec.Sheet()
	b.sheets[dom] = sh
	return sh
}

// columnsOf returns the domain columns of dom (unprefixed): its chain
// columns, then its sheet's.
func (b *Builder) columnsOf(dom string) []Column {
	var cols []Column
	for _, c := range chainColumns[dom] {
		cols = append(cols, c.Column)
	}
	return append(cols, b.sheets[dom].Columns()...)
}

// domainCells returns r's cells of the columns columnsOf(r.domain) gives
// (cols), in order.
func (r exportRow) domainCells(cols []Column) []any {
	out := make([]any, 0, len(cols))
	out = append(out, r.chain...)
	for _, c := range cols[len(r.chain):] {
		out = append(out, r.vals[c.Name])
	}
	return out
}

// present returns the domains with rows that have domain cells, in the
// registry's order.
func (b *Builder) present() []string {
	var out []string
	for _, dom := range registry.Names() {
		if _, ok := b.sheets[dom]; ok {
			out = append(out, dom)
		}
	}
	return out
}

// Sheets returns the records sheet and one sheet per domain present (see
// the package doc). Domain columns are named "<domain>.<field>", as in the
// CSV.
func (b *Builder) Sheets() []Sheet {
	rec := Sheet{Name: "records", Table: "records_table", Columns: slices.Clone(recordColumns), Rows: make([][]any, len(b.rows))}
	for i, r := range b.rows {
		rec.Rows[i] = r.base
	}
	sheets := []Sheet{rec}
	lead := make([]int, len(leadColumns))
	for i, n := range leadColumns {
		lead[i] = slices.IndexFunc(recordColumns, func(c Column) bool { return c.Name == n })
	}
	for _, dom := range b.present() {
		cols := b.columnsOf(dom)
		s := Sheet{Name: dom, Table: dom + "_table"}
		for _, i := range lead {
			s.Columns = append(s.Columns, recordColumns[i])
		}
		for _, c := range cols {
			s.Columns = append(s.Columns, Column{Name: dom + "." + c.Name, Kind: c.Kind})
		}
		for _, r := range b.rows {
			if r.domain != dom || r.vals == nil {
				continue
			}
			row := make([]any, 0, len(s.Columns))
			for _, i := range lead {
				row = append(row, r.base[i])
			}
			row = append(row, r.domainCells(cols)...)
			s.Rows = append(s.Rows, row)
		}
		sheets = append(sheets, s)
	}
	for i := range sheets {
		uniqueNames(sheets[i].Columns)
	}
	return sheets
}

// Table returns the one table of a CSV export: the records' columns, then
// the columns of each domain present, prefixed with the domain; cells as
// text (CSVText).
func (b *Builder) Table() (header []string, rows [][]string) {
	cols := slices.Clone(recordColumns)
	type group struct {
		dom  string
		cols []Column
	}
	var groups []group
	for _, dom := range b.present() {
		g := group{dom, b.columnsOf(dom)}
		groups = append(groups, g)
		for _, c := range g.cols {
			cols = append(cols, Column{Name: dom + "." + c.Name, Kind: c.Kind})
		}
	}
	uniqueNames(cols)
	header = make([]string, len(cols))
	for i, c := range cols {
		header[i] = c.Name
	}
	rows = make([][]string, len(b.rows))
	for i, r := range b.rows {
		row := make([]string, 0, len(cols))
		for j, v := range r.base {
			row = append(row, CSVText(v, recordColumns[j].Kind))
		}
		for _, g := range groups {
			var cells []any
			if r.domain == g.dom && r.vals != nil {
				cells = r.domainCells(g.cols)
			}
			for i, c := range g.cols {
				var v any
				if cells != nil {
					v = cells[i]
				}
				row = append(row, CSVText(v, c.Kind))
			}
		}
		rows[i] = row
	}
	return header, rows
}

// CSVText is a cell as CSV text: a time in UTC to the millisecond
// (RFC 3339), a date as YYYY-MM-DD, numbers as Go formats them.
func CSVText(v any, k Kind) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case time.Time:
		if k == Date {
			return x.UTC().Format(time.DateOnly)
		}
		return x.UTC().Format(timeLayout)
	}
	return ""
}

// timeLayout writes a time in UTC to the millisecond.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// uniqueNames makes the column names unique, ignoring case (as a
// spreadsheet table requires): a repeated name gets " (2)", " (3)"...
func uniqueNames(cols []Column) {
	seen := map[string]bool{}
	for i := range cols {
		name := cols[i].Name
		for n := 2; seen[strings.ToLower(name)]; n++ {
			name = cols[i].Name + " (" + strconv.Itoa(n) + ")"
		}
		seen[strings.ToLower(name)] = true
		cols[i].Name = name
	}
}

// payloadDoc decodes a payload that is a JSON object (nil otherwise).
func payloadDoc(p *record.Payload) domain.Doc {
	if p == nil {
		return nil
	}
	b, err := p.Bytes()
	if err != nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc domain.Doc
	if dec.Decode(&doc) != nil {
		return nil
	}
	return doc
}

// envelopeOf derives the identity of doc by its domain's rules.
func envelopeOf(dom string, doc domain.Doc) (env struct{ EventType, PartyID, IdempotencyKey, OrderingKey string }) {
	spec, ok := registry.Lookup(dom)
	if !ok || doc == nil {
		return env
	}
	e := spec.Checker.Identify(doc)
	env.EventType, env.PartyID, env.IdempotencyKey, env.OrderingKey = e.EventType, e.PartyID, e.IdempotencyKey, e.OrderingKey
	return env
}

func payloadHash(p *record.Payload) string {
	if p == nil {
		return ""
	}
	return p.SHA256
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

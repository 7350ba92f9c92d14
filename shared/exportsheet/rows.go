// Package exportsheet is the one owner of the spreadsheet forms of an
// inspection export (audit.export pages): the rows of its records
// (Builder), the CSV and XLSX writers (WriteCSV, WriteXLSX, with cells made
// inert for a spreadsheet) and the FSMA 204 lot filter (ChainHasLot).
// dlqctl export and the console's Audit page both write with it; the JSONL
// form is shared/export's Writer.
//
// An XLSX export has a "records" sheet (one row per stored record: the
// failure, the chain's status after the record and the record's seal) and
// one sheet per domain present, named after the domain, with the key
// fields an inspector asks about as typed columns (numbers as numbers,
// times as UTC date-time cells to the millisecond, dates as date cells):
// pharmacy (registrant, transaction id, event type, NDC and NDC-11, lot,
// expiry, quantity, unit, schedule, counterparty, occurred at), dscsa
// (event time, business step, action, disposition, GTIN and serial of the
// first EPC, EPC count and list, lot, expiry, read point, business
// location, event hash ID) and fsma (supplier, traceability lot code, CTE
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
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/fsma"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/record"
)

// Kind is the type of a column's cells.
type Kind uint8

// Column kinds.
const (
	// Text cells are strings.
	Text Kind = iota
	// Integer cells are int64.
	Integer
	// Number cells are float64.
	Number
	// Time cells are time.Time in UTC, written to the millisecond.
	Time
	// Date cells are time.Time at midnight UTC, written as a date.
	Date
)

// Column is one column of a sheet: its name (unique in the sheet) and the
// kind of its cells (a cell that does not read as its kind stays text).
type Column struct {
	Name string
	Kind Kind
}

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
	{"dlq_id", Text}, {"domain", Text}, {"record_index", Integer}, {"kind", Text}, {"quarantine_seq", Integer},
	{"status", Text}, {"class", Text}, {"error_code", Text}, {"error_detail", Text}, {"party_id", Text},
	{"event_type", Text}, {"idempotency_key", Text}, {"ordering_key", Text}, {"event_time", Time},
	{"first_seen", Time}, {"recorded_at", Time}, {"redrive_count", Integer}, {"actor", Text}, {"reason", Text},
	{"payload_sha256", Text}, {"audit_hash", Text}, {"prev_hash", Text},
}

// leadColumns are the record columns a domain sheet starts with.
var leadColumns = []string{"dlq_id", "record_index", "kind", "status", "class", "error_code", "recorded_at"}

// exportRow is one record's row: the record columns' cells, its domain and
// the cells of the domain's columns (nil when the payload is not a JSON
// object of a known domain).
type exportRow struct {
	base   []any
	domain string
	vals   map[string]any
}

// domainCols are the columns a domain's rows use, in order of first use.
type domainCols struct {
	names []string
	kinds map[string]Kind
}

func (d *domainCols) add(name string, k Kind) {
	if d.kinds == nil {
		d.kinds = map[string]Kind{}
	}
	if _, ok := d.kinds[name]; !ok {
		d.names = append(d.names, name)
		d.kinds[name] = k
	}
}

// Builder turns chains into a spreadsheet, a page at a time: one row per
// record (see the package doc for the sheets and columns). Only the rows'
// cells are kept, not the chains.
type Builder struct {
	rows []exportRow
	cols map[string]*domainCols
	// FSMA: the CTE types present, and the members seen per object field.
	ctes    map[string]bool
	members map[string][]string
	plain   map[string]bool // fields seen with a value that is not an object
}

// Add adds the rows of one chain.
func (b *Builder) Add(c api.ExportChain) {
	if b.cols == nil {
		b.cols, b.ctes, b.members, b.plain = map[string]*domainCols{}, map[string]bool{}, map[string][]string{}, map[string]bool{}
	}
	var recs []record.Record
	for _, er := range c.Records {
		r, err := record.Parse(er.Record)
		if err != nil {
			continue // verify-export reports it
		}
		recs = append(recs, r)
		st, _ := record.Fold(recs)
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
			if cols := b.domainCols(c.Domain); cols != nil {
				row.vals = map[string]any{}
				b.domainRow(c.Domain, doc, env.EventType, cols, row.vals)
			}
		}
		b.rows = append(b.rows, row)
	}
}

// domainCols returns the columns of dom, nil for a domain without a sheet.
func (b *Builder) domainCols(dom string) *domainCols {
	switch dom {
	case pharmacy.Name, dscsa.Name, fsma.Name:
	default:
		return nil
	}
	if b.cols[dom] == nil {
		b.cols[dom] = &domainCols{}
	}
	return b.cols[dom]
}

// domainRow fills vals with the domain columns of doc.
func (b *Builder) domainRow(dom string, doc domain.Doc, eventType string, cols *domainCols, vals map[string]any) {
	set := func(name string, k Kind, v any) {
		cols.add(name, k)
		if v != nil && v != "" {
			vals[name] = v
		}
	}
	switch dom {
	case pharmacy.Name:
		ndc := text(doc["ndc"])
		var ndc11 any
		if n, err := pharmacy.NormalizeNDC(ndc); err == nil {
			ndc11 = n
		}
		set("registrant_dea", Text, text(doc["registrant_dea"]))
		set("transaction_id", Text, text(doc["transaction_id"]))
		set("event_type", Text, text(doc["event_type"]))
		set("ndc", Text, ndc)
		set("ndc11", Text, ndc11)
		set("lot", Text, text(doc["lot"]))
		set("expiry", Date, orText(dateCell(doc["expiry"]), doc["expiry"]))
		set("quantity", Number, orText(numberCell(doc["quantity_delta"]), doc["quantity_delta"]))
		set("unit", Text, text(doc["unit"]))
		set("dea_schedule", Text, text(doc["dea_schedule"]))
		set("counterparty_dea", Text, text(doc["counterparty_dea"]))
		set("occurred_at", Time, orText(timeCell(doc["occurred_at"]), doc["occurred_at"]))
		set("actor_id", Text, text(doc["actor_id"]))
	case dscsa.Name:
		spec, _ := registry.Lookup(dom)
		env := spec.Checker.Identify(doc)
		var ids map[string]string
		hashID := env.EventHashID // derived for every event that parses, valid or not
		if env.EventType != "" {
			if full, err := spec.Checker.Check(env.EventType, doc); err == nil {
				ids = full.Identifiers
			}
		}
		gtin, serial, _ := strings.Cut(env.OrderingKey, ".")
		var evTime, epcCount any
		if !env.EventTime.IsZero() {
			evTime = env.EventTime.UTC()
		}
		epcs, _ := domain.Array(doc, "epcList")
		if len(epcs) > 0 {
			epcCount = int64(len(epcs))
		}
		list := make([]string, 0, len(epcs))
		for _, e := range epcs {
			list = append(list, text(e))
		}
		if id, _ := domain.String(doc, "eventID"); hashID == "" && strings.HasPrefix(id, "ni:///") {
			hashID = id // the event's ID is its CBV 2.0 event hash
		}
		set("event_time", Time, evTime)
		set("business_step", Text, env.EventType)
		set("action", Text, text(doc["action"]))
		set("disposition", Text, text(doc["disposition"]))
		set("gtin", Text, gtin)
		set("serial", Text, serial)
		set("epc_count", Integer, epcCount)
		set("epc_list", Text, strings.Join(list, "\n"))
		set("lot", Text, ids["lot"])
		set("expiry", Date, dateCell(ids["expiry"]))
		set("read_point", Text, firstNonEmpty(ids["read_point"], locationID(doc, "readPoint")))
		set("business_location", Text, firstNonEmpty(ids["biz_location"], locationID(doc, "bizLocation")))
		set("event_id", Text, text(doc["eventID"]))
		set("event_hash_id", Text, hashID)
	case fsma.Name:
		if eventType != "" {
			b.ctes[eventType] = true
		}
		for k, v := range doc {
			if k == "" || strings.Contains(k, ".") || len(k) > maxFieldName {
				continue // not a column name (a dot is the flattening's)
			}
			switch x := v.(type) {
			case map[string]any:
				for m, mv := range x {
					if m == "" || strings.Contains(m, ".") || len(m) > maxFieldName {
						continue
					}
					if !slices.Contains(b.members[k], m) {
						if len(b.members[k]) == maxMembers {
							continue // the JSONL export holds it
						}
						b.members[k] = append(b.members[k], m)
					}
					vals[k+"."+m] = typed(k, mv)
				}
			default:
				vals[k] = typed(k, v)
				b.plain[k] = true
			}
		}
	}
}

// maxFieldName bounds the payload field names that become columns, and
// maxMembers the members of one object field that do.
const (
	maxFieldName = 64
	maxMembers   = 16
)

// fsmaLead are the FSMA 204 identity fields, the first columns of the fsma
// sheet.
var fsmaLead = []string{"supplier_id", "traceability_lot_code", "cte_type"}

// memberOrder orders the members of a flattened object: a location's and
// a reference document's first, the rest by name.
var memberOrder = []string{"gln", "name", "address", "phone", "type", "number"}

// maxExtraFields bounds the FSMA fields beyond the KDEs that become
// columns (a publisher's extension fields).
const maxExtraFields = 64

// fsmaColumns returns the fsma sheet's columns: the identity fields, every
// KDE of the CTE types present (in the rule's order), then the other
// fields the events carry (by name, at most maxExtraFields), each object
// field as one column per member (at most maxMembers), and as a column of
// its own too when some event gives it a value that is not an object.
func (b *Builder) fsmaColumns() []Column {
	var fields []string
	add := func(f string) {
		if !slices.Contains(fields, f) {
			fields = append(fields, f)
		}
	}
	for _, f := range fsmaLead {
		add(f)
	}
	for _, cte := range fsma.CTETypes() {
		if b.ctes[cte] {
			for _, k := range fsma.RequiredKDEs(cte) {
				for _, f := range strings.Split(k, " or ") {
					add(f)
				}
			}
		}
	}
	seen := map[string]bool{}
	for _, r := range b.rows {
		if r.domain != fsma.Name {
			continue
		}
		for k := range r.vals {
			f, _, _ := strings.Cut(k, ".")
			seen[f] = true
		}
	}
	extra := make([]string, 0, len(seen))
	for f := range seen {
		if !slices.Contains(fields, f) {
			extra = append(extra, f)
		}
	}
	sort.Strings(extra)
	for _, f := range extra[:min(len(extra), maxExtraFields)] {
		add(f)
	}
	var cols []Column
	for _, f := range fields {
		ms := slices.Clone(b.members[f])
		if len(ms) == 0 || b.plain[f] {
			cols = append(cols, Column{f, fieldKind(f)})
		}
		slices.SortFunc(ms, func(a, c string) int {
			ia, ic := slices.Index(memberOrder, a), slices.Index(memberOrder, c)
			switch {
			case ia >= 0 && ic >= 0:
				return ia - ic
			case ia >= 0:
				return -1
			case ic >= 0:
				return 1
			}
			return strings.Compare(a, c)
		})
		for _, m := range ms {
			cols = append(cols, Column{f + "." + m, Text})
		}
	}
	return cols
}

// fieldKind is the kind of an FSMA field's column.
func fieldKind(f string) Kind {
	switch f {
	case "event_time":
		return Time
	case "quantity":
		return Number
	case "harvest_date", "harvest_date_start", "harvest_date_end", "cooling_date":
		return Date
	}
	return Text
}

// typed is the cell of the FSMA field f's value v.
func typed(f string, v any) any {
	switch fieldKind(f) {
	case Time:
		if t := timeCell(v); t != nil {
			return t
		}
	case Number:
		if n := numberCell(v); n != nil {
			return n
		}
	case Date:
		if d := dateCell(v); d != nil {
			return d
		}
		if t := timeCell(v); t != nil {
			return t
		}
	}
	return text(v)
}

// domainOrder is the order of the domain sheets and CSV column groups.
var domainOrder = []string{pharmacy.Name, dscsa.Name, fsma.Name}

// columnsOf returns the domain columns of dom (unprefixed).
func (b *Builder) columnsOf(dom string) []Column {
	if dom == fsma.Name {
		return b.fsmaColumns()
	}
	d := b.cols[dom]
	cols := make([]Column, len(d.names))
	for i, n := range d.names {
		cols[i] = Column{n, d.kinds[n]}
	}
	return cols
}

// present returns the domains with rows that have domain cells.
func (b *Builder) present() []string {
	var out []string
	for _, dom := range domainOrder {
		if _, ok := b.cols[dom]; ok {
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
			s.Columns = append(s.Columns, Column{dom + "." + c.Name, c.Kind})
		}
		for _, r := range b.rows {
			if r.domain != dom || r.vals == nil {
				continue
			}
			row := make([]any, 0, len(s.Columns))
			for _, i := range lead {
				row = append(row, r.base[i])
			}
			for _, c := range cols {
				row = append(row, r.vals[c.Name])
			}
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
			cols = append(cols, Column{dom + "." + c.Name, c.Kind})
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
			for _, c := range g.cols {
				var v any
				if r.domain == g.dom {
					v = r.vals[c.Name]
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

// locationID returns doc[field].id (an EPCIS readPoint or bizLocation).
func locationID(doc domain.Doc, field string) string {
	o, _ := domain.Object(doc, field)
	return text(o["id"])
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

// text is a payload value as text: a string as is, a number as written,
// an array of strings joined by "; ", anything else its compact JSON.
func text(v any) string {
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

// cell is a payload value as text (the lot filter's reading).
func cell(v any) string { return text(v) }

// timeCell reads an RFC 3339 date-time with an offset as a UTC time; nil
// when v is not one.
func timeCell(v any) any {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	t, err := domain.ParseTime("", strings.TrimSpace(s))
	if err != nil {
		return nil
	}
	return t
}

// dateCell reads a YYYY-MM-DD date; nil when v is not one.
func dateCell(v any) any {
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

// numberCell reads a JSON number, or a string holding a decimal number;
// nil otherwise.
func numberCell(v any) any {
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

// orText is the typed cell v, or raw as text when raw did not read as its
// kind.
func orText(v, raw any) any {
	if v != nil {
		return v
	}
	return text(raw)
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

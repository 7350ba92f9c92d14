package console

import (
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/safetext"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
	"github.com/deadletter/deadletter/shared/when"
)

// recordPages is the records part: the Groups page, the Records list and
// its CSV, and the record page with its actions (reveal, redrive,
// release, dismiss, check and correct: correct.go), its trace (trace.go)
// and the groups' trends (trend.go).
type recordPages struct {
	web
	// traceURLBase links a trace id to the trace UI; jaegerURL is the
	// Jaeger query API the record page's trace is read from.
	traceURLBase, jaegerURL string
	// rp is the passkeys' relying party (passkeys.go).
	rp relyingParty
}

// groupsData is the Groups page.
type groupsData struct {
	Domain   string
	OpenOnly bool
	Groups   []api.Group
	At       time.Time
	// Trends are the groups' counts per hour (nil when audit.list did
	// not answer: TrendErr).
	Trends   *trends
	TrendErr string
	// ByDocument: the groups are by EPCIS document (api.GroupByDocument),
	// without trends.
	ByDocument bool
}

func (p *recordPages) handleGroups(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := &groupsData{Domain: q.Get("domain"), OpenOnly: q.Get("open_only") == "on", ByDocument: q.Get("by") == api.GroupByDocument}
	var (
		rep       api.GroupsReply
		err, terr error
		wg        sync.WaitGroup
	)
	req := api.GroupsRequest{Domain: d.Domain, OpenOnly: d.OpenOnly, Samples: 3}
	if d.ByDocument {
		req.By = api.GroupByDocument
	}
	wg.Go(func() {
		rep, err = call[api.GroupsRequest, api.GroupsReply](r.Context(), p.rq, s, api.AuditGroups, req)
	})
	if !d.ByDocument {
		wg.Go(func() { d.Trends, terr = p.loadTrends(r.Context(), s, d.Domain, p.now()) })
	}
	wg.Wait()
	if terr != nil {
		d.TrendErr = errText(terr)
	}
	d.Groups, d.At = rep.Groups, rep.At
	v := newView(s, "Groups", "groups", d)
	v.setErr(err)
	p.render(w, r, statusOf(err), "groups", v)
}

// recordsQuery is the Records page's filter, sort and page.
type recordsQuery struct {
	Domain, Class, Status, Code, Party, From, To, Search string
	// NDC, Lot, Registrant, TxID, GTIN, Serial, SSCC and TLC find events by
	// business identifiers (api.ListRequest's identifier filters, which
	// the auditor normalizes).
	NDC, Lot, Registrant, TxID, GTIN, Serial, SSCC, TLC string
	// Identifier is any domain's search field as name=value
	// (api.ListRequest.Identifiers, dlqctl find --id), for a field
	// without an input of its own.
	Identifier string
	// Document lists the quarantined events of one EPCIS document (a
	// shipment), by its SHA-256 (api.ListRequest.Document).
	Document          string
	Sort, Dir, Cursor string
	Limit             int
}

// recordColumns are the sortable columns of the Records page.
var recordColumns = []string{"dlq_id", "domain", "class", "status", "error_code", "party_id", "redrive_count", "quarantined_at", "last_change"}

func parseRecordsQuery(r *http.Request) (recordsQuery, api.ListRequest, error) {
	q := r.URL.Query()
	rq := recordsQuery{
		Domain: q.Get("domain"), Class: q.Get("class"), Status: q.Get("status"), Code: q.Get("code"),
		Party: q.Get("party"), From: q.Get("from"), To: q.Get("to"), Search: strings.TrimSpace(q.Get("q")),
		NDC: strings.TrimSpace(q.Get("ndc")), Lot: strings.TrimSpace(q.Get("lot")), Registrant: strings.TrimSpace(q.Get("registrant")),
		TxID: strings.TrimSpace(q.Get("txid")), GTIN: strings.TrimSpace(q.Get("gtin")), Serial: strings.TrimSpace(q.Get("serial")),
		SSCC: strings.TrimSpace(q.Get("sscc")), TLC: strings.TrimSpace(q.Get("tlc")), Identifier: strings.TrimSpace(q.Get("identifier")),
		Sort: q.Get("sort"), Dir: q.Get("dir"), Cursor: q.Get("cursor"), Limit: 50, Document: strings.ToLower(strings.TrimSpace(q.Get("document"))),
	}
	if !slices.Contains(recordColumns, rq.Sort) {
		rq.Sort = "quarantined_at"
	}
	if rq.Dir != "asc" {
		rq.Dir = "desc"
	}
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n > 0 {
		rq.Limit = min(n, 1000)
	}
	req := api.ListRequest{Domain: rq.Domain, Class: rq.Class, Status: rq.Status, Code: rq.Code, Supplier: rq.Party, Limit: rq.Limit, Cursor: rq.Cursor,
		NDC: rq.NDC, Lot: rq.Lot, Registrant: rq.Registrant, TransactionID: rq.TxID, GTIN: rq.GTIN, Serial: rq.Serial, SSCC: rq.SSCC, TLC: rq.TLC,
		Document: rq.Document}
	if rq.Identifier != "" {
		name, v, err := parseIdentifier(rq.Identifier)
		if err != nil {
			return rq, req, err
		}
		req.Identifiers = map[string]string{name: v}
	}
	for _, b := range []struct {
		in  string
		out *time.Time
		f   string
	}{{rq.From, &req.From, "from"}, {rq.To, &req.To, "to"}} {
		if b.in == "" {
			continue
		}
		t, err := when.Parse(b.in, time.Now())
		if err != nil {
			return rq, req, api.BadField(b.f, "%s", when.ErrNotATime)
		}
		*b.out = t
	}
	if rq.Search != "" {
		// Free search on ids covers up to the largest page.
		req.Limit = 1000
	}
	return rq, req, nil
}

// parseIdentifier reads the Records form's identifier filter, name=value
// (a domain's search field and its value, as dlqctl find --id takes it).
// The auditor checks the name and normalizes the value; a filter that is
// not name=value is refused here, naming the form field, never echoing
// the value.
func parseIdentifier(in string) (name, value string, err error) {
	name, value, ok := strings.Cut(in, "=")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" || value == "" {
		return "", "", api.BadField("identifier", "takes name=value: a domain's search field and its value (the fields: %s)", strings.Join(searchFields(), ", "))
	}
	return name, value, nil
}

// searchFields are the search fields of the registry's domains, sorted
// (the Records form's hint and parseIdentifier's message).
func searchFields() []string {
	var out []string
	for _, s := range registry.All() {
		for _, f := range s.Search.Fields {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	slices.Sort(out)
	return out
}

// url is the Records page URL with q, overriding name/value pairs.
func (q recordsQuery) URL(path string, pairs ...string) string {
	m := map[string]string{
		"domain": q.Domain, "class": q.Class, "status": q.Status, "code": q.Code, "party": q.Party,
		"from": q.From, "to": q.To, "q": q.Search, "sort": q.Sort, "dir": q.Dir, "cursor": q.Cursor,
		"ndc": q.NDC, "lot": q.Lot, "registrant": q.Registrant, "txid": q.TxID, "gtin": q.GTIN, "serial": q.Serial, "sscc": q.SSCC, "tlc": q.TLC, "identifier": q.Identifier,
		"document": q.Document,
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	var kv []string
	for _, k := range sortedKeys(m) {
		kv = append(kv, k, m[k])
	}
	return strings.Replace(recordsURL(kv...), "/records", path, 1)
}

// ExportURL is the Audit page's export form filled in with the view's
// filters that audit.export takes (domain, party, status, time range and
// identifiers): the records of the filter, whatever page is shown.
func (q recordsQuery) ExportURL() string {
	pairs := []string{"domain", q.Domain, "party", q.Party, "status", q.Status, "from", q.From, "to", q.To,
		"ndc", q.NDC, "lot", q.Lot, "registrant", q.Registrant, "txid", q.TxID, "gtin", q.GTIN, "serial", q.Serial,
		"sscc", q.SSCC, "tlc", q.TLC, "identifier", q.Identifier}
	return strings.Replace(recordsURL(pairs...), "/records", "/audit", 1) + "#h-export"
}

// ExportWider reports whether the view has filters an export does not
// take (class, code, an id search, a document): its export then holds
// more than the view, and the link says so.
func (q recordsQuery) ExportWider() bool {
	return q.Class != "" || q.Code != "" || q.Search != "" || q.Document != ""
}

// SortURL is the URL sorting by col (toggling the direction of the
// current sort column), from the first page.
func (q recordsQuery) SortURL(col string) string {
	dir := "asc"
	if q.Sort == col && q.Dir == "asc" {
		dir = "desc"
	}
	return q.URL("/records", "sort", col, "dir", dir, "cursor", "")
}

// AriaSort is the aria-sort value of col's header.
func (q recordsQuery) AriaSort(col string) string {
	if q.Sort != col {
		return "none"
	}
	if q.Dir == "asc" {
		return "ascending"
	}
	return "descending"
}

// listItem is one listed record: audit.list's summary, and whether a
// legal hold holds it ("held" and "hold_ids" when audit.list answers
// them; else derived from hold.list).
type listItem struct {
	api.Summary
	Held    bool     `json:"held,omitempty"`
	HoldIDs []string `json:"hold_ids,omitempty"`
}

// listReply is audit.list's answer, read into listItems.
type listReply struct {
	Items      []listItem `json:"items"`
	Total      int        `json:"total"`
	NextCursor string     `json:"next_cursor,omitempty"`
	// Document is, for a list of one document, every event of it with
	// its outcome.
	Document *api.DocumentOutcomes `json:"document,omitempty"`
}

// recordsData is the Records page.
type recordsData struct {
	Q          recordsQuery
	Items      []listItem
	Total      int
	NextCursor string
	Columns    []string
	Statuses   []string
	Classes    []string
	// Back is this page's URL (where a bulk action returns).
	Back string
	// Document is, on the page of one EPCIS document (?document=), every
	// event of it with its outcome.
	Document *api.DocumentOutcomes
}

// Outcomes are the document's outcomes with their counts, in a fixed
// order.
func (d *recordsData) Outcomes() [][2]string {
	if d.Document == nil {
		return nil
	}
	var out [][2]string
	for _, o := range slices.Sorted(maps.Keys(d.Document.Counts)) {
		out = append(out, [2]string{o, strconv.Itoa(d.Document.Counts[o])})
	}
	return out
}

// SearchFields are the names the identifier filter takes.
func (d *recordsData) SearchFields() []string { return searchFields() }

// columnLabels are the Records columns in words.
var columnLabels = map[string]string{
	"dlq_id": "Record", "domain": "Domain", "class": "Class", "status": "Status", "error_code": "Error code",
	"party_id": "Party", "redrive_count": "Redrives", "quarantined_at": "Quarantined", "last_change": "Last change",
}

// Label is a column's header.
func (d *recordsData) Label(col string) string { return columnLabels[col] }

// Idents are the identifiers of a listed event, in the order shown.
func (d *recordsData) Idents(s listItem) [][2]string { return listedIdentifiers(s.Summary) }

// listedIdentifiers returns a listing's identifiers and its event type as
// name/value pairs, in its domain's order (domain.Spec.Shown; another
// domain's in identifierOrder), without the party's, which has its own
// column.
func listedIdentifiers(s api.Summary) [][2]string {
	ids := make(map[string]string, len(s.Identifiers)+1)
	for k, v := range s.Identifiers {
		if k != "registrant_dea" && k != "supplier_id" && v != "" {
			ids[k] = v
		}
	}
	if s.EventType != "" {
		ids["event_type"] = s.EventType
	}
	spec, ok := registry.Lookup(s.Domain)
	if !ok || len(spec.Shown) == 0 {
		return identifierList(ids)
	}
	var out [][2]string
	for _, k := range spec.Shown {
		if v, ok := ids[k]; ok {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}

// listRecords runs the Records query: one page, searched and sorted, each
// record marked when a legal hold holds it.
func (p *recordPages) listRecords(r *http.Request, s *session) (recordsQuery, listReply, error) {
	rq, req, err := parseRecordsQuery(r)
	if err != nil {
		return rq, listReply{}, err
	}
	var (
		rep   listReply
		holds api.HoldListReply
		herr  error
		wg    sync.WaitGroup
	)
	wg.Go(func() { rep, err = call[api.ListRequest, listReply](r.Context(), p.rq, s, api.AuditList, req) })
	wg.Go(func() {
		holds, herr = call[api.HoldListRequest, api.HoldListReply](r.Context(), p.rq, s, api.HoldList, api.HoldListRequest{})
	})
	wg.Wait()
	if err != nil {
		return rq, rep, err
	}
	if herr == nil {
		markHeld(rep.Items, holds.Holds)
	}
	if rq.Search != "" {
		needle := strings.ToLower(rq.Search)
		rep.Items = slices.DeleteFunc(rep.Items, func(it listItem) bool {
			return !strings.Contains(strings.ToLower(it.DLQID), needle) && !strings.Contains(strings.ToLower(it.PartyID), needle)
		})
	}
	sortSummaries(rep.Items, rq.Sort, rq.Dir == "desc")
	return rq, rep, nil
}

// markHeld marks the items the active holds hold (when audit.list did
// not say it itself).
func markHeld(items []listItem, holds []api.HeldHold) {
	by := map[string][]string{}
	for _, h := range holds {
		if h.Hold.Status != "" && h.Hold.Status != api.HoldActive {
			continue
		}
		// Held: the chains carrying the hold, those whose hold record is
		// being appended, and a record or set hold's own records.
		for _, id := range slices.Concat(h.DLQIDs, h.Pending, []string{h.Hold.Target.DLQID}, h.Hold.Target.DLQIDs) {
			if id != "" && !slices.Contains(by[id], h.Hold.ID) {
				by[id] = append(by[id], h.Hold.ID)
			}
		}
	}
	for i := range items {
		if ids := by[items[i].DLQID]; len(ids) > 0 {
			items[i].Held = true
			for _, h := range ids {
				if !slices.Contains(items[i].HoldIDs, h) {
					items[i].HoldIDs = append(items[i].HoldIDs, h)
				}
			}
		}
		if len(items[i].HoldIDs) > 0 {
			items[i].Held = true
		}
	}
}

// sortSummaries sorts a page by one column.
func sortSummaries(items []listItem, col string, desc bool) {
	key := func(a, b api.Summary) int {
		switch col {
		case "dlq_id":
			return cmp.Compare(a.DLQID, b.DLQID)
		case "domain":
			return cmp.Compare(a.Domain, b.Domain)
		case "class":
			return cmp.Compare(a.Class, b.Class)
		case "status":
			return cmp.Compare(a.Status, b.Status)
		case "error_code":
			return cmp.Compare(a.ErrorCode, b.ErrorCode)
		case "party_id":
			return cmp.Compare(a.PartyID, b.PartyID)
		case "redrive_count":
			return cmp.Compare(a.RedriveCount, b.RedriveCount)
		case "last_change":
			return a.LastChange.Compare(b.LastChange)
		}
		return a.QuarantinedAt.Compare(b.QuarantinedAt)
	}
	slices.SortStableFunc(items, func(a, b listItem) int {
		if desc {
			return key(b.Summary, a.Summary)
		}
		return key(a.Summary, b.Summary)
	})
}

func (p *recordPages) handleRecords(w http.ResponseWriter, r *http.Request, s *session) {
	rq, rep, err := p.listRecords(r, s)
	d := &recordsData{
		Q: rq, Items: rep.Items, Total: rep.Total, NextCursor: rep.NextCursor, Columns: recordColumns, Back: r.URL.RequestURI(), Document: rep.Document,
		Statuses: []string{string(record.StatusOpen), string(record.StatusRedriving), string(record.StatusPoison), string(record.StatusResolved), string(record.StatusInvalid)},
		Classes:  []string{string(record.ClassValidation), string(record.ClassExhausted), string(record.ClassPoison)},
	}
	v := newView(s, "Records", "records", d)
	v.Wide = true
	v.setErr(err)
	p.render(w, r, statusOf(err), "records", v)
}

// handleRecordsCSV is the Records view as CSV (the same filter, search,
// sort and page).
func (p *recordPages) handleRecordsCSV(w http.ResponseWriter, r *http.Request, s *session) {
	_, rep, err := p.listRecords(r, s)
	if err != nil {
		http.Error(w, errText(err), statusOf(err))
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="records.csv"`)
	cw := csv.NewWriter(w)
	_ = cw.Write(append(slices.Clone(recordColumns), "records", "last_hash", "identifiers", "held"))
	for _, it := range rep.Items {
		_ = cw.Write([]string{
			csvSafe(it.DLQID), csvSafe(it.Domain), csvSafe(it.Class), csvSafe(it.Status), csvSafe(it.ErrorCode), csvSafe(it.PartyID),
			strconv.Itoa(it.RedriveCount), it.QuarantinedAt.UTC().Format(time.RFC3339Nano), it.LastChange.UTC().Format(time.RFC3339Nano),
			strconv.Itoa(it.Records), it.LastHash, csvSafe(identifierPairs(withEventType(it.Summary))), strconv.FormatBool(it.Held),
		})
	}
	cw.Flush()
}

// identifierOrder is the order a listing's identifiers are shown in.
var identifierOrder = []string{"transaction_id", "event_type", "ndc11", "lot", "gtin", "serial", "sscc", "tlc"}

// identifierLabels are the identifiers' names in words.
var identifierLabels = map[string]string{
	"transaction_id": "Transaction", "event_type": "Event", "ndc11": "NDC", "lot": "Lot", "gtin": "GTIN",
	"serial": "Serial", "sscc": "SSCC", "tlc": "TLC", "registrant_dea": "Registrant",
}

// identLabel is an identifier's name in words (its own name otherwise).
func identLabel(name string) string {
	if l, ok := identifierLabels[name]; ok {
		return l
	}
	return name
}

// identifierList returns a listing's identifiers as name/value pairs in
// identifierOrder (then any other, by name).
func identifierList(ids map[string]string) [][2]string {
	var out [][2]string
	for _, k := range identifierOrder {
		if v, ok := ids[k]; ok {
			out = append(out, [2]string{k, v})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(ids)) {
		if !slices.Contains(identifierOrder, k) {
			out = append(out, [2]string{k, ids[k]})
		}
	}
	return out
}

// withEventType is a listing's identifiers with its event type
// ("event_type"), for the CSV.
func withEventType(s api.Summary) map[string]string {
	if s.EventType == "" {
		return s.Identifiers
	}
	ids := maps.Clone(s.Identifiers)
	if ids == nil {
		ids = map[string]string{}
	}
	ids["event_type"] = s.EventType
	return ids
}

// identifierPairs is identifierList as "name=value" separated by spaces.
func identifierPairs(ids map[string]string) string {
	var parts []string
	for _, p := range identifierList(ids) {
		parts = append(parts, p[0]+"="+p[1])
	}
	return strings.Join(parts, " ")
}

// csvSafe defuses a cell a spreadsheet would read as a formula.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// chainEntry is one record of the Record page's timeline.
type chainEntry struct {
	Seq      uint64
	Rec      record.Record
	Sealed   bool
	Problems []record.Problem
	TraceURL string
}

// recordData is the Record page.
type recordData struct {
	ID       string
	Domain   string
	State    record.State
	Entries  []chainEntry
	Problems []record.Problem
	TraceURL string
	// Trace is the failure's trace as Jaeger has it (trace.go).
	Trace traceView
	// Revealed is set when the payload was revealed (Payload its text).
	Revealed      bool
	Payload       string
	PayloadSize   int
	PayloadSHA256 string
	Reason        string
	// Original is the payload as first quarantined (revealed with
	// Payload; the same text unless the chain holds a correction).
	Original string
	// Correction is the editor's state after a check.
	Correction *correction
	// Document is the event's document provenance, when it came from one.
	Document *docRef
	// Pending are the record's approvals waiting for a second person
	// (approval.list, without values): a pending correction is shown with
	// who asked, when and the fields it changes. PendingErr says why they
	// could not be read.
	Pending    []api.Approval
	PendingErr string
}

// PendingCorrection is the record's pending correction (one at most:
// the redriver refuses a second, CORRECTION_PENDING), or nil.
func (d *recordData) PendingCorrection() *api.Approval {
	for i := range d.Pending {
		if d.Pending[i].Action == api.ActionCorrect {
			return &d.Pending[i]
		}
	}
	return nil
}

// KeyIdentifiers are the domain's key identifiers of the record, as the
// records list and its search show them (transaction id, event type,
// NDC, lot; GTIN, serial; TLC): those its ordering key names (the
// domain's KeyIdentifiers) and those its first record keeps
// (record.Record.Identifiers), never read from the payload.
func (d *recordData) KeyIdentifiers() [][2]string {
	sum := api.Summary{Domain: d.State.Domain, Identifiers: map[string]string{}}
	if spec, ok := registry.Lookup(d.State.Domain); ok && spec.Search.KeyIdentifiers != nil {
		for k, v := range spec.Search.KeyIdentifiers(d.State.OrderingKey, d.State.PartyID) {
			sum.Identifiers[k] = v
		}
	}
	if len(d.Entries) > 0 {
		for k, v := range d.Entries[0].Rec.Identifiers {
			if _, ok := sum.Identifiers[k]; !ok {
				sum.Identifiers[k] = v
			}
		}
	}
	if _, t, ok := subjects.ParseEvent(d.State.SourceSubject); ok {
		sum.EventType = t
	}
	return listedIdentifiers(sum)
}

// Redrivable: the record's state allows a redrive.
func (d *recordData) Redrivable() bool {
	return d.State.Status == record.StatusOpen || d.State.Status == record.StatusRedriving
}

// Poison: the record needs a release.
func (d *recordData) Poison() bool { return d.State.Status == record.StatusPoison }

// Dismissable: the record's state allows a dismissal (open or poison).
func (d *recordData) Dismissable() bool {
	return d.State.Status == record.StatusOpen || d.State.Status == record.StatusPoison
}

// Validation: the record failed validation.
func (d *recordData) Validation() bool { return d.State.Class == record.ClassValidation }

// getRecord reads a chain into a page; with a reveal reason (not empty),
// with its payload: the auditor records the read, as this person and with
// that reason, in the access audit before it answers.
func (p *recordPages) getRecord(r *http.Request, s *session, id, revealReason string) (*recordData, error) {
	d := &recordData{ID: id, Domain: r.FormValue("domain")}
	raw, err := call[api.GetRequest, json.RawMessage](r.Context(), p.rq, s, api.AuditGet,
		api.GetRequest{DLQID: id, Domain: d.Domain, IncludePayload: revealReason != "", Reason: revealReason})
	if err != nil {
		return d, err
	}
	var rep api.GetReply
	if err := json.Unmarshal(raw, &rep); err != nil {
		return d, fmt.Errorf("%w from %s: %w", endpoint.ErrBadAnswer, api.AuditGet, err)
	}
	if len(rep.Records) > 0 {
		d.Document = documentOf(raw, rep.Records[0].Record)
	}
	d.State, d.Problems = rep.State, rep.Problems
	d.TraceURL = rep.TraceURL
	if d.TraceURL == "" {
		d.TraceURL = telemetry.TraceURL(p.traceURLBase, firstTrace(rep.Records))
	}
	traceID := rep.State.TraceID
	if traceID == "" {
		traceID = firstTrace(rep.Records)
	}
	d.Trace = p.traceOf(r.Context(), traceID)
	for _, cr := range rep.Records {
		e := chainEntry{Seq: cr.Seq, TraceURL: cr.TraceURL}
		if err := json.Unmarshal(cr.Record, &e.Rec); err != nil {
			e.Problems = append(e.Problems, record.Problem{Kind: record.ProblemUnparseable, Detail: "the record does not parse"})
		}
		if e.TraceURL == "" {
			e.TraceURL = telemetry.TraceURL(p.traceURLBase, cr.TraceID)
		}
		for _, p := range rep.Problems {
			if p.Index == e.Rec.Index || (p.Seq != 0 && p.Seq == cr.Seq) {
				e.Problems = append(e.Problems, p)
			}
		}
		e.Sealed = len(e.Problems) == 0
		e.Rec.Payload = nil // never rendered in the timeline
		d.Entries = append(d.Entries, e)
	}
	if revealReason != "" && rep.State.Payload != nil {
		b, perr := rep.State.Payload.Bytes()
		if perr == nil {
			d.Revealed, d.Payload, d.Original = true, showPayload(b), showPayload(b)
		}
		if op := rep.State.OriginalPayload; op != nil && rep.State.Corrected {
			if ob, oerr := op.Bytes(); oerr == nil {
				d.Original = showPayload(ob)
			}
		}
	}
	if p := rep.State.Payload; p != nil {
		d.PayloadSize, d.PayloadSHA256 = p.Size, p.SHA256
	}
	d.Pending, d.PendingErr = p.pendingOf(r.Context(), s, id)
	return d, nil
}

// pendingOf reads the approvals of record id waiting for a second
// person (approval.list, pending, without values); on a refusal it says
// why in words, and the page shows the record all the same.
func (p *recordPages) pendingOf(ctx context.Context, s *session, id string) ([]api.Approval, string) {
	rep, err := call[api.ApprovalListRequest, api.ApprovalListReply](ctx, p.rq, s, api.ApprovalList,
		api.ApprovalListRequest{Status: api.ApprovalPending, Limit: approval.MaxList})
	if err != nil {
		p.log.Info("pending approvals unreadable", "user", s.user, "dlq_id", safetext.LogID(id), "code", api.CodeOf(err))
		return nil, "The pending approvals could not be read (" + cmp.Or(api.CodeOf(err), api.ErrUnavailable) + ")."
	}
	var out []api.Approval
	for _, a := range rep.Approvals {
		if a.DLQID == id {
			out = append(out, a)
		}
	}
	return out, ""
}

func firstTrace(recs []api.ChainRecord) string {
	if len(recs) > 0 {
		return recs[0].TraceID
	}
	return ""
}

func (p *recordPages) renderRecord(w http.ResponseWriter, r *http.Request, s *session, d *recordData, err error, notice string) {
	v := newView(s, "Record "+d.ID, "records", d)
	v.setErr(err)
	v.Notice = notice
	p.render(w, r, statusOf(err), "record", v)
}

func (p *recordPages) handleRecord(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := p.getRecord(r, s, r.PathValue("id"), "")
	p.renderRecord(w, r, s, d, err, "")
}

// handleReveal shows the payload to a role that may read it, with a reason.
func (p *recordPages) handleReveal(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if reason == "" {
		d, err := p.getRecord(r, s, id, "")
		if err == nil {
			err = api.BadField("reason", "a reason is required to reveal a payload")
		}
		p.renderRecord(w, r, s, d, err, "")
		return
	}
	d, err := p.getRecord(r, s, id, reason)
	d.Reason = reason
	if err == nil {
		p.log.Info("payload revealed", "user", s.user, "dlq_id", safetext.LogID(id))
	}
	p.renderRecord(w, r, s, d, err, "")
}

// handleRedrive replays one record as the person.
func (p *recordPages) handleRedrive(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	req := api.RedriveRequest{DLQID: id, Reason: strings.TrimSpace(r.PostFormValue("reason")), IncludeValidation: r.PostFormValue("include_validation") == "on"}
	rep, err := call[api.RedriveRequest, api.RedriveReply](r.Context(), p.rq, s, api.Redrive, req)
	p.log.Info("redrive", "user", s.user, "dlq_id", safetext.LogID(id), "outcome", rep.Outcome, "code", api.CodeOf(err))
	p.afterAction(w, r, s, id, err, fmt.Sprintf("Redrive: %s (status %s).", rep.Outcome, rep.Status))
}

// handleRelease moves a poison record back to redrivable.
func (p *recordPages) handleRelease(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	req := releaseRequest(r, strings.TrimSpace(r.PostFormValue("reason")))
	var err error
	if req.Signed, err = p.signedFor(r, s, req.Reason, p.releaseDecision()); err == nil {
		_, err = call[api.ReleaseRequest, api.AppendReply](r.Context(), p.rq, s, api.Release, req)
	}
	p.log.Info("release", "user", s.user, "dlq_id", safetext.LogID(id), "signed", req.Signed != nil, "code", api.CodeOf(err))
	p.afterAction(w, r, s, id, err, "Released.")
}

// handleDismiss closes a record for good without committing it (a second
// person approves it unless the policy waives it).
func (p *recordPages) handleDismiss(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	req := dismissRequest(r, strings.TrimSpace(r.PostFormValue("reason")))
	var err error
	if req.Signed, err = p.signedFor(r, s, req.Reason, p.dismissDecision()); err == nil {
		_, err = call[api.DismissRequest, api.AppendReply](r.Context(), p.rq, s, api.Dismiss, req)
	}
	p.log.Info("dismiss", "user", s.user, "dlq_id", safetext.LogID(id), "signed", req.Signed != nil, "code", api.CodeOf(err))
	p.afterAction(w, r, s, id, err, "Dismissed.")
}

// releaseRequest is the release a form asks for, with reason.
func releaseRequest(r *http.Request, reason string) api.ReleaseRequest {
	return api.ReleaseRequest{DLQID: r.PathValue("id"), Class: r.PostFormValue("class"), Reason: reason}
}

// dismissRequest is the dismissal a form asks for, with reason.
func dismissRequest(r *http.Request, reason string) api.DismissRequest {
	return api.DismissRequest{DLQID: r.PathValue("id"), Reason: reason}
}

// releaseDecision and dismissDecision make the decisions the Release and
// Dismiss forms sign (sign.go): the request's digest, the chain's head.
func (p *recordPages) releaseDecision() decisionMaker {
	return p.recordDecision(api.DecisionRelease, func(r *http.Request, reason string) any { return releaseRequest(r, reason) })
}

func (p *recordPages) dismissDecision() decisionMaker {
	return p.recordDecision(api.DecisionDismiss, func(r *http.Request, reason string) any { return dismissRequest(r, reason) })
}

// handleReleaseChallenge and handleDismissChallenge answer the decision
// the Release and Dismiss forms sign.
func (p *recordPages) handleReleaseChallenge(w http.ResponseWriter, r *http.Request, s *session) {
	p.handleChallenge(w, r, s, p.rp, "reason", p.releaseDecision())
}

func (p *recordPages) handleDismissChallenge(w http.ResponseWriter, r *http.Request, s *session) {
	p.handleChallenge(w, r, s, p.rp, "reason", p.dismissDecision())
}

// afterAction shows the record after an action, with its outcome or the
// service's refusal.
func (p *recordPages) afterAction(w http.ResponseWriter, r *http.Request, s *session, id string, err error, notice string) {
	if err != nil {
		d, _ := p.getRecord(r, s, id, "")
		p.renderRecord(w, r, s, d, err, "")
		return
	}
	// POST/redirect/GET: the outcome is shown once by the record's page.
	s.setFlash(notice)
	http.Redirect(w, r, "/records/"+url.PathEscape(id), http.StatusSeeOther)
}

// showPayload is a revealed payload as stored: JSON indented only
// (json.Indent keeps members, numbers and strings byte for byte), other
// bytes as they are. The template escapes it.
//
// Trailing white space is not kept: a browser sends a text area's lines
// ending in CRLF, often with a final line break, and json.Indent keeps
// what follows the value, so the last line of a typed correction ("}\r\n")
// differed from the original's ("}") and the diff showed a spurious
// "- }" / "+ }".
func showPayload(b []byte) string {
	var out bytes.Buffer
	if json.Indent(&out, bytes.TrimRight(b, " \t\r\n"), "", "  ") == nil {
		return out.String()
	}
	return strings.ReplaceAll(string(b), "\r\n", "\n")
}

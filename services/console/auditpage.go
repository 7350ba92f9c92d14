package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/export"
	"github.com/deadletter/deadletter/shared/exportsheet"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/when"
)

// auditPages is the Audit page: verify, reconcile, checkpoint, the access
// audit and exports; results keeps the last results (the Overview shows
// them too).
type auditPages struct {
	web
	results *results
}

// accessPageSize is the Audit page's access audit page.
const accessPageSize = 50

// accessData is the Audit page's access audit: one page, filtered by
// user.
type accessData struct {
	User, Cursor string
	Items        []api.AccessEntry
	NextCursor   string
	Err          string
}

// NextURL is the URL of the next page.
func (a *accessData) NextURL() string {
	q := url.Values{"access_cursor": {a.NextCursor}}
	if a.User != "" {
		q.Set("access_user", a.User)
	}
	return "/audit?" + q.Encode() + "#h-access"
}

// loadAccess reads one page of the access audit.
func (p *auditPages) loadAccess(r *http.Request, s *session) *accessData {
	q := r.URL.Query()
	a := &accessData{User: strings.TrimSpace(q.Get("access_user")), Cursor: q.Get("access_cursor")}
	rep, err := call[api.AccessRequest, api.AccessReply](r.Context(), p.rq, s, api.AuditAccess,
		api.AccessRequest{User: a.User, Limit: accessPageSize, Cursor: a.Cursor})
	if err != nil {
		a.Err = errText(err)
		return a
	}
	a.Items, a.NextCursor = rep.Items, rep.NextCursor
	return a
}

// exportForm is the Audit page's export form, as posted or as a link
// (the Records page's "Export these records") fills it in.
type exportForm struct {
	Domain, Party, Status, From, To, Format, Reason string
	// NDC, Lot, Registrant, TxID, GTIN, Serial, SSCC, TLC and Identifier
	// (name=value) are the identifier filters of a records search, sent
	// as audit.export's (api.ExportFilter) in every domain: the auditor
	// selects the chains, reading a lot as a pharmacy or DSCSA lot or an
	// FSMA TLC, and refuses a field the domain does not search by.
	NDC, Lot, Registrant, TxID, GTIN, Serial, SSCC, TLC, Identifier string
}

// exportFormats are the export's formats, as offered.
var exportFormats = []string{"csv", "xlsx", "jsonl"}

// exportFormOf reads the export form's fields with get (a posted form's
// or a link's query).
func exportFormOf(get func(string) string) exportForm {
	v := func(k string) string { return strings.TrimSpace(get(k)) }
	return exportForm{Domain: v("domain"), Party: v("party"), Status: v("status"), From: v("from"), To: v("to"),
		Format: v("format"), Reason: v("reason"),
		NDC: v("ndc"), Lot: v("lot"), Registrant: v("registrant"), TxID: v("txid"), GTIN: v("gtin"), Serial: v("serial"),
		SSCC: v("sscc"), TLC: v("tlc"), Identifier: v("identifier")}
}

// filter is the form's api.ExportFilter; a time or identifier filter
// that does not read is a BAD_REQUEST naming its field.
func (f exportForm) filter(now time.Time) (api.ExportFilter, error) {
	out := api.ExportFilter{Domain: f.Domain, Party: f.Party, Status: f.Status,
		NDC: f.NDC, Lot: f.Lot, Registrant: f.Registrant, TransactionID: f.TxID, GTIN: f.GTIN, Serial: f.Serial, SSCC: f.SSCC, TLC: f.TLC}
	if f.Identifier != "" {
		name, v, err := parseIdentifier(f.Identifier)
		if err != nil {
			return out, err
		}
		out.Identifiers = map[string]string{name: v}
	}
	for _, b := range []struct {
		in, field string
		out       *time.Time
	}{{f.From, "from", &out.From}, {f.To, "to", &out.To}} {
		if b.in == "" {
			continue
		}
		t, err := when.Parse(b.in, now)
		if err != nil {
			return out, api.BadField(b.field, "%s", when.ErrNotATime)
		}
		*b.out = t
	}
	return out, nil
}

// Filtered reports whether the form names an identifier filter (the
// form then shows its identifier fields open).
func (f exportForm) Filtered() bool {
	return f.NDC != "" || f.Lot != "" || f.Registrant != "" || f.TxID != "" || f.GTIN != "" || f.Serial != "" ||
		f.SSCC != "" || f.TLC != "" || f.Identifier != ""
}

func parseExportForm(r *http.Request) (exportForm, api.ExportRequest, error) {
	f := exportFormOf(r.PostFormValue)
	req := api.ExportRequest{Reason: f.Reason}
	var err error
	if req.Filter, err = f.filter(time.Now()); err != nil {
		return f, req, err
	}
	switch {
	case !slices.Contains(exportFormats, f.Format):
		return f, req, api.BadField("format", "one of csv, xlsx or jsonl")
	case f.Reason == "":
		return f, req, api.BadField("reason", "is required: an export reads payloads")
	}
	return f, req, req.Validate()
}

// errExportCheckpoint: a later page of an export is proved against
// another checkpoint than the first.
var errExportCheckpoint = errors.New("console: an export page is proved against another checkpoint")

// handleExport streams an inspection export to the browser as a download:
// audit.export page by page (each page a payload read the auditor records
// in the access audit before it answers), written with the writers dlqctl
// export uses (exportsheet for CSV and XLSX, export.Writer for
// JSONL). Nothing is sent before the first page answered: a refusal shows
// on the Audit page. CSV and XLSX are written once the last page has
// arrived (their columns depend on the CTE types present); JSONL streams,
// and an export cut short has no end line.
func (p *auditPages) handleExport(w http.ResponseWriter, r *http.Request, s *session) {
	f, req, err := parseExportForm(r)
	var first api.ExportReply
	if err == nil {
		first, err = call[api.ExportRequest, api.ExportReply](r.Context(), p.rq, s, api.AuditExport, req)
	}
	if err != nil {
		p.auditPage(w, r, s, &auditData{Export: f}, err, "")
		return
	}
	started := p.now().UTC()
	name := fmt.Sprintf("deadletter-export-%s.%s", started.Format("20060102T150405Z"), f.Format)
	types := map[string]string{"csv": "text/csv; charset=utf-8", "jsonl": "application/jsonl",
		"xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"}
	cp := first.Checkpoint
	var (
		jsonl             *export.Writer
		table             exportsheet.Builder
		chains, uncovered int
	)
	start := func() {
		w.Header().Set("Content-Type", types[f.Format])
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
		w.WriteHeader(http.StatusOK)
	}
	if f.Format == "jsonl" {
		start()
		h := api.ExportHeader{Format: api.ExportFormat, ExportedAt: started, Filter: req.Filter, Reason: req.Reason, Key: cp.Key}
		if jsonl, err = export.NewWriter(w, h, cp); err != nil {
			p.log.Warn("export cut short", "user", s.user, "err", err)
			return
		}
	}
	rep := first
	for page := 1; ; page++ {
		if rep.Checkpoint.AuditSeq != cp.AuditSeq {
			err = errExportCheckpoint
			break
		}
		uncovered += rep.Uncovered
		if jsonl != nil {
			// Every chain of the page and its signed manifest.
			chains += len(rep.Chains)
			err = jsonl.Page(rep)
		} else {
			// The auditor selected the chains (the filter's identifiers
			// included): every one is a row, as dlqctl export writes it.
			for _, ch := range rep.Chains {
				chains++
				table.Add(ch)
			}
		}
		if err != nil || rep.NextCursor == "" {
			break
		}
		req.Cursor = rep.NextCursor
		if rep, err = call[api.ExportRequest, api.ExportReply](r.Context(), p.rq, s, api.AuditExport, req); err != nil {
			break
		}
	}
	p.log.Info("export", "user", s.user, "format", f.Format, "chains", chains, "checkpoint_seq", cp.AuditSeq, "code", api.CodeOf(err))
	if jsonl != nil {
		if err == nil {
			err = jsonl.Close(uncovered)
		}
		if err != nil {
			p.log.Warn("export cut short", "user", s.user, "err", err)
		}
		return
	}
	if err != nil {
		p.auditPage(w, r, s, &auditData{Export: f}, err, "")
		return
	}
	start()
	if f.Format == "xlsx" {
		err = table.WriteXLSX(w)
	} else {
		err = table.WriteCSV(w)
	}
	if err != nil {
		p.log.Warn("export cut short", "user", s.user, "err", err)
	}
}

// exportStatuses are the statuses the export form offers.
var exportStatuses = []string{string(record.StatusOpen), string(record.StatusRedriving), string(record.StatusPoison), string(record.StatusResolved)}

// verifyResult and reconcileResult are the last results the console ran,
// with who asked and when.
type verifyResult struct {
	Reply api.VerifyReply
	By    string
	At    time.Time
}

type reconcileResult struct {
	Reply api.ReconcileReply
	By    string
	At    time.Time
}

// results keeps the last verification and reconciliation run through
// the console (shown on the Overview).
type results struct {
	mu         sync.Mutex
	verify     *verifyResult
	reconcile  *reconcileResult
	checkpoint *api.CheckpointReply
}

func (rs *results) setCheckpoint(v *api.CheckpointReply) {
	rs.mu.Lock()
	rs.checkpoint = v
	rs.mu.Unlock()
}

func (rs *results) lastCheckpoint() *api.CheckpointReply {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.checkpoint
}

func (rs *results) get() (*verifyResult, *reconcileResult) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.verify, rs.reconcile
}

func (rs *results) setVerify(v *verifyResult) {
	rs.mu.Lock()
	rs.verify = v
	rs.mu.Unlock()
}

func (rs *results) setReconcile(v *reconcileResult) {
	rs.mu.Lock()
	rs.reconcile = v
	rs.mu.Unlock()
}

// auditData is the Audit page.
type auditData struct {
	Verify     *verifyResult
	Reconcile  *reconcileResult
	Checkpoint *api.CheckpointReply
	Domain     string
	// Access is a page of the access audit.
	Access *accessData
	// Export is the export form (as posted, after a refusal).
	Export   exportForm
	Formats  []string
	Statuses []string
}

func (p *auditPages) auditPage(w http.ResponseWriter, r *http.Request, s *session, d *auditData, err error, notice string) {
	if d.Verify == nil || d.Reconcile == nil {
		lv, lr := p.results.get()
		d.Verify, d.Reconcile = cmpOr(d.Verify, lv), cmpOr(d.Reconcile, lr)
	}
	if d.Checkpoint == nil {
		d.Checkpoint = p.results.lastCheckpoint()
	}
	d.Access = p.loadAccess(r, s)
	d.Formats, d.Statuses = exportFormats, exportStatuses
	if d.Export.Format == "" {
		d.Export.Format = "csv"
	}
	v := newView(s, "Audit", "audit", d)
	v.setErr(err)
	v.Notice = notice
	p.render(w, r, statusOf(err), "audit", v)
}

func cmpOr[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

// handleAudit is the Audit page; its export form is filled in from the
// query (the Records page's "Export these records" link names its
// filter), never run by a GET.
func (p *auditPages) handleAudit(w http.ResponseWriter, r *http.Request, s *session) {
	p.auditPage(w, r, s, &auditData{Export: exportFormOf(r.URL.Query().Get)}, nil, "")
}

// handleVerify verifies the audit trail; its result is kept (the Audit
// page and the Overview show it) and the page redirected to.
func (p *auditPages) handleVerify(w http.ResponseWriter, r *http.Request, s *session) {
	rep, err := call[api.VerifyRequest, api.VerifyReply](r.Context(), p.rq, s, api.AuditVerify, api.VerifyRequest{MaxProblems: 50})
	if err == nil {
		p.results.setVerify(&verifyResult{Reply: rep, By: s.user, At: p.now()})
		http.Redirect(w, r, "/audit#h-verify", http.StatusSeeOther)
		return
	}
	p.auditPage(w, r, s, &auditData{}, err, "")
}

func (p *auditPages) handleReconcile(w http.ResponseWriter, r *http.Request, s *session) {
	domain := strings.TrimSpace(r.PostFormValue("domain"))
	rep, err := call[api.ReconcileRequest, api.ReconcileReply](r.Context(), p.rq, s, api.AuditReconcile, api.ReconcileRequest{Domain: domain, MaxIDs: 50})
	if err == nil {
		p.results.setReconcile(&reconcileResult{Reply: rep, By: s.user, At: p.now()})
		http.Redirect(w, r, "/audit#h-reconcile", http.StatusSeeOther)
		return
	}
	p.auditPage(w, r, s, &auditData{Domain: domain}, err, "")
}

func (p *auditPages) handleCheckpoint(w http.ResponseWriter, r *http.Request, s *session) {
	rep, err := call[api.CheckpointRequest, api.CheckpointReply](r.Context(), p.rq, s, api.AuditCheckpoint, api.CheckpointRequest{})
	if err == nil {
		p.results.setCheckpoint(&rep)
		notice := "Checkpoint written."
		if rep.Unchanged {
			notice = "No record since the last checkpoint: unchanged."
		}
		s.setFlash(notice)
		http.Redirect(w, r, "/audit#h-checkpoint", http.StatusSeeOther)
		return
	}
	p.auditPage(w, r, s, &auditData{}, err, "")
}

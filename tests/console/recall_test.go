package console

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/xuri/excelize/v2"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document/upload"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/shipment"
	"github.com/deadletter/deadletter/tests/internal/tools"
)

// recallLot is the recalled lot as the trade may write it (GS1 set 82
// takes & < > and quotes; a pharmacy lot is at most 20 characters).
const recallLot = `39&"B"<7>`

// recallShot is shot into screenshots/recall/.
func (p *person) recallShot(n int, name string, axeSrc []byte) {
	p.t.Helper()
	dir := filepath.Join(tools.Root(p.t), "tests", "console", "screenshots", "recall")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	p.shotTo(dir, n, name, axeSrc)
}

// listedIDs are the record ids of the Records list on the page, sorted.
func (p *person) listedIDs() []string {
	ids := eval[[]string](p, `[...document.querySelectorAll("table.records input.select")].map(i => i.value)`)
	slices.Sort(ids)
	return ids
}

// searchRecords fills the Records search's field css with value (the
// domain field with domain) as a person pastes it, filters, and reloads
// the result until it lists exactly want (the auditor's index catches
// up); it returns the path and query of the result.
func (p *person) searchRecords(domain, css, value string, want []string) string {
	p.t.Helper()
	p.open("/records")
	if domain != "" {
		p.do(chromedp.SendKeys(chromedp.CSS("#r-domain"), domain))
	}
	p.do(chromedp.SendKeys(chromedp.CSS(css), value))
	p.submit(`form.filters button[type=submit]`, "main h1")
	path := eval[string](p, `location.pathname + location.search`)
	natstest.CheckFor(p.t, 60*time.Second, 250*time.Millisecond, func() error {
		if got := p.listedIDs(); !slices.Equal(got, want) {
			p.open(path)
			return fmt.Errorf("%s %q lists %d %v, want %d %v", css, value, len(got), got, len(want), want)
		}
		return nil
	})
	if got := eval[string](p, fmt.Sprintf(`document.querySelector(%q).value`, css)); got != value {
		p.t.Errorf("the search field %s holds %q after the search, want %q", css, got, value)
	}
	return path
}

// documentOutcomes waits until every event of the document sha has its
// outcome (none pending or unaccounted) and returns them.
func documentOutcomes(t *testing.T, nc *nats.Conn, sha string, n int) *api.DocumentOutcomes {
	t.Helper()
	var d *api.DocumentOutcomes
	natstest.CheckFor(t, 180*time.Second, 250*time.Millisecond, func() error {
		l, err := endpoint.Call[api.ListRequest, api.ListReply](context.Background(), nc, api.AuditList, api.ListRequest{Document: sha, Limit: 1})
		if err != nil {
			return err
		}
		if d = l.Document; d == nil {
			return fmt.Errorf("document %.12s not known yet", sha)
		}
		if got := len(d.Events); got != n || d.Counts[api.ReconcilePending] > 0 || d.Counts[api.ReconcileUnaccounted] > 0 {
			return fmt.Errorf("%d of %d events have an outcome: %v", got, n, d.Counts)
		}
		return nil
	})
	return d
}

// lotColumns are the domain sheets' columns of an event's lot.
var lotColumns = map[string]string{dscsa.Name: "dscsa.lot", "pharmacy": "pharmacy.lot", "fsma": "fsma.traceability_lot_code"}

// xlsxLotRows reads the XLSX export at path and returns, per domain sheet,
// the record ids of its rows and those of its rows whose lot column
// (lotColumns) is lot, each id once (a chain has a row per record).
func xlsxLotRows(t *testing.T, path, lot string) (all, ofLot map[string][]string) {
	t.Helper()
	f, err := excelize.OpenFile(path)
	if err != nil {
		t.Fatalf("the downloaded XLSX does not open: %v", err)
	}
	defer f.Close()
	all, ofLot = map[string][]string{}, map[string][]string{}
	for dom, lotCol := range lotColumns {
		if !slices.Contains(f.GetSheetList(), dom) {
			continue // no row of the domain
		}
		rows, err := f.GetRows(dom)
		if err != nil || len(rows) == 0 {
			t.Errorf("the XLSX's %s sheet: %v", dom, err)
			continue
		}
		idc, lotc := slices.Index(rows[0], "dlq_id"), slices.Index(rows[0], lotCol)
		if idc < 0 || lotc < 0 {
			t.Errorf("the %s sheet has no dlq_id or %s column: %v", dom, lotCol, rows[0])
			continue
		}
		for _, r := range rows[1:] {
			r = append(r, make([]string, len(rows[0]))...)
			all[dom] = append(all[dom], r[idc])
			if r[lotc] == lot {
				ofLot[dom] = append(ofLot[dom], r[idc])
			}
		}
		// One row per record: a chain's records share its id.
		all[dom] = slices.Compact(slices.Sorted(slices.Values(all[dom])))
		ofLot[dom] = slices.Compact(slices.Sorted(slices.Values(ofLot[dom])))
	}
	return all, ofLot
}

// downloaded is a file the browser downloaded and the time from the
// click to the file.
type downloaded struct {
	file string
	took time.Duration
}

// download exports, in a new tab of the person's browser context (a tab
// downloads once: Chromium holds a second download of a tab for a
// permission nobody can give headless), the records of the Records
// search at search: "Export these records" fills the Audit page's export
// form with the search's filters, the person picks format and gives the
// reason, and the file is downloaded into a directory of its own.
func (p *person) download(search, format, reason string) downloaded {
	p.t.Helper()
	ctx, cancel := chromedp.NewContext(p.ctx)
	defer cancel()
	tab := &person{t: p.t, ctx: ctx, base: p.base}
	dir := p.t.TempDir()
	if err := chromedp.Do(ctx); err != nil {
		p.t.Fatal(err)
	}
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, BrowserContextID: chromedp.FromContext(ctx).BrowserContextID, DownloadPath: dir,
	}); err != nil {
		p.t.Fatal(err)
	}
	tab.open(search)
	lot := eval[string](tab, `document.querySelector("#r-lot").value`)
	tab.submit("#export-view", "#export-form")
	if got := eval[string](tab, `document.querySelector("#x-lot").value`); got != lot {
		p.t.Errorf("the export form's lot %q, want the search's %q", got, lot)
	}
	tab.do(chromedp.Click(chromedp.CSS("#x-format-"+format)), chromedp.SendKeys(chromedp.CSS("#x-reason"), reason))
	began := time.Now()
	tab.do(chromedp.Click(chromedp.CSS("#export")))
	var file string
	natstest.CheckFor(p.t, 60*time.Second, 100*time.Millisecond, func() error {
		m, _ := filepath.Glob(filepath.Join(dir, "deadletter-export-*."+format))
		if len(m) == 1 {
			file = m[0]
			return nil
		}
		if eval[bool](tab, `document.querySelector("main .alert") !== null`) {
			return errors.New("the export was refused: " + tab.text("main .alert"))
		}
		return fmt.Errorf("no %s downloaded", format)
	})
	return downloaded{file: file, took: time.Since(began)}
}

// exportCSV posts the Audit page's export form from the person's page
// (the session's cookie and CSRF token) with the filter form, as CSV, and
// returns the dlq ids of its rows, sorted, each once.
func (p *person) exportCSV(form url.Values, reason string) []string {
	p.t.Helper()
	p.open("/audit")
	form = maps.Clone(form)
	form.Set("csrf", p.csrf())
	form.Set("format", "csv")
	form.Set("reason", reason)
	status, body := p.post("/audit/export", form.Encode(), nil)
	if status != http.StatusOK {
		p.t.Fatalf("the export of %v: %d %.300s", form, status, body)
	}
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(rows) == 0 {
		p.t.Fatalf("the export of %v is no CSV: %v", form, err)
	}
	idc := slices.Index(rows[0], "dlq_id")
	var ids []string
	for _, r := range rows[1:] {
		ids = append(ids, r[idc])
	}
	return slices.Compact(slices.Sorted(slices.Values(ids)))
}

// exportReads are the chains the access audit records read by user's
// export pages with reason, sorted.
func exportReads(t *testing.T, st *stack.Stack, user, reason string) []string {
	t.Helper()
	nc, err := st.ConnectAs(user)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	rep, err := endpoint.Call[api.AccessRequest, api.AccessReply](context.Background(), nc, api.AuditAccess, api.AccessRequest{User: user, Limit: api.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range rep.Items {
		if e.Action == api.AccessExport && e.Reason == reason {
			if len(e.DLQIDs) != e.Count {
				t.Errorf("an export page's access record names %d of its %d chains", len(e.DLQIDs), e.Count)
			}
			ids = append(ids, e.DLQIDs...)
		}
	}
	slices.Sort(ids)
	return ids
}

// jsonlChains are the dlq ids of the chains of the JSONL export at path,
// sorted.
func jsonlChains(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var l api.ExportLine
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("a line of the JSONL: %v", err)
		}
		if l.Chain != nil {
			ids = append(ids, l.Chain.DLQID)
		}
	}
	slices.Sort(ids)
	return ids
}

// endpointItems are the records audit.list lists for req, as nc.
func endpointItems(t *testing.T, nc *nats.Conn, req api.ListRequest) []api.Summary {
	t.Helper()
	l, err := endpoint.Call[api.ListRequest, api.ListReply](context.Background(), nc, api.AuditList, req)
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// TestRecallWalk walks a recall in Chromium as a pharmacy inspector does
// it: a distributor's shipment (an EPCIS 1.2 XML document with an SBDH,
// items commissioned, packed into cases and pallets, pallets shipped by
// their SSCCs, a mistake of every kind planted), twelve pharmacy events
// and two FSMA events of the same lot are quarantined (more than 10 records: a burst
// of holds once left part of a lot unheld); the inspector pastes the lot into the
// Records search and finds every quarantined record of it across the three domains
// and failure kinds, a shipping event by its pallet's SSCC; holds them
// all at once ("Hold the selected": one hold, every record or none);
// places a hold by filter (the lot, later records too) on the Holds page;
// exports the lot from its Records search ("Export these records" fills
// the Audit page's export form): the XLSX, read back with excelize, holds
// every held record of the lot and nothing else, the access audit
// records one payload read per record, and the JSONL of the lot verifies
// offline with the audit key; the export takes a pharmacy lot, a DSCSA
// lot or SSCC and an FSMA TLC alike. Screenshots:
// tests/console/screenshots/recall/.
func TestRecallWalk(t *testing.T) {
	natstest.Long(t, "Chromium")
	axeSrc, err := os.ReadFile(tools.Axe(t))
	if err != nil {
		t.Fatal(err)
	}
	browserCtx := startBrowser(t)
	st, keyFile := startWalkStack(t, newDownstream(t))
	base := atName(st)
	pw := func(user string) string { return st.Secrets().Users[user].Password }
	inspector := access.DefaultPerson(access.RoleInspector)
	viewerNC, err := st.ConnectAs(access.DefaultPerson(access.RoleViewer))
	if err != nil {
		t.Fatal(err)
	}
	defer viewerNC.Close()
	pubNC, err := st.ConnectAs(string(access.RolePublisher))
	if err != nil {
		t.Fatal(err)
	}
	defer pubNC.Close()
	pub, err := jetstream.New(pubNC)
	if err != nil {
		t.Fatal(err)
	}

	// The shipment: a mistake of every kind, about half of them in the
	// recalled lot's items.
	ship, err := shipment.Generate(shipment.Config{Seed: 3939, Format: shipment.XML12, ID: "DESADV-2026-3939 Müller & Söhne → <O'Brien> \"Nord\"",
		Lots: []string{recallLot, "39-0517/A", "39-0602", "39-0611"}, Pallets: 6, CasesPerPallet: 6, ItemsPerCase: 4, Mistakes: len(shipment.Kinds)})
	if err != nil {
		t.Fatal(err)
	}
	up, err := upload.Publish(context.Background(), pub, subjects.Event(dscsa.Name, subjects.DocumentType), bytes.NewReader(ship.Data), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The lot's pharmacy events that fail the gate, each for its own
	// reason, two of each: more than a burst of 10 holds, which once left
	// part of a lot unheld (issue #39, T8).
	pharmacyChanges := []map[string]any{
		{"actor_id": nil},
		{"dea_schedule": "CII"},
		{"unit": "ea"},
		{"occurred_at": "2025-03-14"},
		{"quantity_delta": "-3e1"},
		{"ndc": "00406-05I2-01"},
	}
	pharmacyChanges = slices.Concat(pharmacyChanges, pharmacyChanges)
	for i, change := range pharmacyChanges {
		var doc map[string]any
		if err := json.Unmarshal(validDispense(t, 3939+i).Data, &doc); err != nil {
			t.Fatal(err)
		}
		doc["lot"], doc["transaction_id"], doc["x_note"] = recallLot, fmt.Sprintf("INV-2026-39%02d <Müller & Söhne>", i), tradeText
		for k, v := range change {
			if v == nil {
				delete(doc, k)
			} else {
				doc[k] = v
			}
		}
		if _, err := pub.Publish(context.Background(), "events.pharmacy.dispense", rawJSON(t, doc)); err != nil {
			t.Fatal(err)
		}
	}
	// Two FSMA events of the lot (its traceability lot code), a GLN's
	// check digit wrong and a shipment without its ship-to.
	fsmaFiles := []string{"INVALID_GLN--bad-check-digit.json", "MISSING_KDE--shipping-without-ship-to.json"}
	for i, file := range fsmaFiles {
		raw, err := os.ReadFile(filepath.Join(tools.Root(t), "schemas", "testdata", "fsma", "invalid", file))
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		doc["traceability_lot_code"], doc["product_description"] = recallLot, fmt.Sprintf("Romaine hearts & kale <case %d> 陈伟", i)
		cte, _ := doc["cte_type"].(string)
		if _, err := pub.Publish(context.Background(), subjects.Event("fsma", cte), rawJSON(t, doc)); err != nil {
			t.Fatal(err)
		}
	}

	// What the recall must find: the planted mistakes of the lot, the
	// shipping events by their pallets, the pharmacy events.
	out := documentOutcomes(t, viewerNC, up.SHA256, ship.Events)
	dlq := map[int]string{}
	for _, ev := range out.Events {
		if ev.DLQID != "" {
			dlq[ev.Index] = ev.DLQID
		}
	}
	byLot := map[string]string{}   // dlq id → kind
	ssccs := map[string][]string{} // pallet → dlq ids
	for _, m := range ship.Mistakes {
		id := dlq[m.Index]
		if id == "" {
			t.Fatalf("planted %s (event %d) is not quarantined: %v", m.Kind, m.Index, out.Counts)
		}
		if m.Lot == recallLot {
			byLot[id] = m.Kind
		}
		for _, s := range m.SSCCs {
			ssccs[s] = append(ssccs[s], id)
		}
	}
	for dom, n := range map[string]int{"pharmacy": len(pharmacyChanges), "fsma": len(fsmaFiles)} {
		natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
			l, err := endpoint.Call[api.ListRequest, api.ListReply](context.Background(), viewerNC, api.AuditList, api.ListRequest{Domain: dom, Limit: api.MaxLimit})
			if err != nil {
				return err
			}
			if len(l.Items) != n {
				return fmt.Errorf("%d %s events quarantined, want %d", len(l.Items), dom, n)
			}
			for _, it := range l.Items {
				byLot[it.DLQID] = dom
			}
			return nil
		})
	}
	lotIDs := slices.Sorted(maps.Keys(byLot))
	dscsaLot := slices.DeleteFunc(slices.Clone(lotIDs), func(id string) bool { return !strings.HasPrefix(id, dscsa.Name+"_") })
	kinds := map[string]bool{}
	for _, k := range byLot {
		kinds[k] = true
	}
	if len(dscsaLot) < 4 || len(kinds) < 4 || len(ssccs) == 0 || len(lotIDs) <= 10 {
		t.Fatalf("the lot has %d quarantined shipment events of %d kinds, %d pallets named: too few for a recall", len(dscsaLot), len(kinds), len(ssccs))
	}
	t.Logf("the shipment: %d events, %d planted mistakes (%d of the lot), outcomes %v; the lot: %d records of %d kinds",
		ship.Events, len(ship.Mistakes), len(dscsaLot), out.Counts, len(lotIDs), len(kinds))

	n := 0
	next := func() int { n++; return n }
	in := newPerson(t, browserCtx, base, false)
	in.login(inspector, pw(inspector))

	t.Run("the lot pasted into the Records search finds every quarantined record of it, in the three domains, whatever it failed on", func(t *testing.T) {
		in.t = t
		in.searchRecords("", "#r-lot", recallLot, lotIDs)
		codes := eval[[]string](in, `[...document.querySelectorAll("table.records tbody tr td code.error-code")].map(c => c.textContent)`)
		if distinct := slices.Compact(slices.Sorted(slices.Values(codes))); len(distinct) < 4 {
			t.Errorf("the lot's rows show %d error codes %v: want its failure kinds", len(distinct), distinct)
		}
		if got := in.text("table.records tbody"); !strings.Contains(got, recallLot) {
			t.Errorf("the identifiers do not show the lot as written: %.300q", got)
		}
		in.recordsFit()
		in.recallShot(next(), "found-by-lot", axeSrc)
	})

	t.Run("a pallet's SSCC finds its shipping events", func(t *testing.T) {
		in.t = t
		pallet := slices.Sorted(maps.Keys(ssccs))[0]
		in.searchRecords(dscsa.Name, "#r-sscc", pallet, slices.Compact(slices.Sorted(slices.Values(ssccs[pallet]))))
		in.recallShot(next(), "found-by-sscc", axeSrc)
	})

	var selectedHold string
	t.Run("hold the selected: every record of the lot in one hold", func(t *testing.T) {
		in.t = t
		path := in.searchRecords("", "#r-lot", recallLot, lotIDs)
		in.do(chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("table.records input.select").forEach(i => i.click())`),
			chromedp.SendKeys(chromedp.CSS("#bulk-case"), "RECALL-2026-39 <Müller & Söhne>"),
			chromedp.SendKeys(chromedp.CSS("#bulk-reason"), `FDA Class I recall of lot `+recallLot))
		if got := eval[int](in, `document.querySelectorAll("table.records input.select:checked").length`); got != len(lotIDs) {
			t.Fatalf("%d selected, want %d", got, len(lotIDs))
		}
		began := time.Now()
		in.submit("#bulk-hold", "main .notice")
		t.Logf("RECALL_HOLD_SELECTED_MS=%d (%d records, click to notice)", time.Since(began).Milliseconds(), len(lotIDs))
		notice := in.text("main .notice")
		m := regexp.MustCompile(`^(\d+) of (\d+) selected records held, in one hold (\S+) \(case `).FindStringSubmatch(notice)
		if m == nil || m[1] != fmt.Sprint(len(lotIDs)) || m[2] != m[1] {
			t.Fatalf("notice %q, want all %d held in one hold", notice, len(lotIDs))
		}
		selectedHold = m[3]
		natstest.CheckFor(t, 60*time.Second, 200*time.Millisecond, func() error {
			g, err := endpoint.Call[api.HoldGetRequest, api.HoldReply](context.Background(), viewerNC, api.HoldGet, api.HoldGetRequest{ID: selectedHold})
			if err != nil {
				return err
			}
			if got := slices.Sorted(slices.Values(g.DLQIDs)); g.Count != len(lotIDs) || !slices.Equal(got, lotIDs) {
				return fmt.Errorf("hold %s holds %d %v (%d pending), want %v", selectedHold, g.Count, got, g.PendingCount, lotIDs)
			}
			return nil
		})
		in.open(path)
		if held := eval[int](in, `document.querySelectorAll("table.records tbody tr.held").length`); held != len(lotIDs) {
			t.Errorf("%d rows shown held, want %d", held, len(lotIDs))
		}
		in.recallShot(next(), "held-selected", axeSrc)
	})

	var laterID string
	t.Run("a hold by filter on the Holds page: the lot's shipment records, now and later", func(t *testing.T) {
		in.t = t
		in.open("/holds")
		in.do(chromedp.SendKeys(chromedp.CSS("#hold-domain"), dscsa.Name), chromedp.SendKeys(chromedp.CSS("#hold-lot"), recallLot),
			chromedp.SendKeys(chromedp.CSS("#hold-case"), "RECALL-2026-39-B 陈伟药房"),
			chromedp.SendKeys(chromedp.CSS("#hold-reason"), "the lot's shipment events, those quarantined later too"))
		in.submit("#place-party-hold", "#holds-table")
		// The new hold's row, found by its case.
		id := strings.TrimPrefix(eval[string](in, `(r => r ? r.id : "")([...document.querySelectorAll("#holds-table tbody tr")].find(r => r.cells[1].textContent === "RECALL-2026-39-B 陈伟药房"))`), "hold-")
		if id == "" || id == selectedHold {
			t.Fatalf("the Holds page lists no new hold:\n%s", in.text("main"))
		}
		if row := in.text("#hold-" + id); !strings.Contains(row, "filter domain dscsa lot "+recallLot) || !strings.Contains(row, inspector) {
			t.Errorf("the hold's row %q", row)
		}
		natstest.CheckFor(t, 60*time.Second, 200*time.Millisecond, func() error {
			g, err := endpoint.Call[api.HoldGetRequest, api.HoldReply](context.Background(), viewerNC, api.HoldGet, api.HoldGetRequest{ID: id})
			if err != nil {
				return err
			}
			if got := slices.Sorted(slices.Values(g.DLQIDs)); g.Count != len(dscsaLot) || !slices.Equal(got, dscsaLot) {
				return fmt.Errorf("hold %s holds %d %v, want %v", id, g.Count, got, dscsaLot)
			}
			return nil
		})

		// A later shipment of the lot with one bad item: its record is
		// held by the lot hold as it is quarantined, not by the hold of
		// the selected records.
		later, err := shipment.Generate(shipment.Config{Seed: 3940, Format: shipment.JSONLD20, ID: "urn:uuid:7d1f0c64-3940-4a8e-9c2b-39a0c3940001",
			Lots: []string{recallLot}, Pallets: 1, CasesPerPallet: 2, ItemsPerCase: 3, Mistakes: 1})
		if err != nil {
			t.Fatal(err)
		}
		lup, err := upload.Publish(context.Background(), pub, subjects.Event(dscsa.Name, subjects.DocumentType), bytes.NewReader(later.Data), nil)
		if err != nil {
			t.Fatal(err)
		}
		lout := documentOutcomes(t, viewerNC, lup.SHA256, later.Events)
		for _, ev := range lout.Events {
			if ev.Index == later.Mistakes[0].Index {
				laterID = ev.DLQID
			}
		}
		if laterID == "" {
			t.Fatalf("the later shipment's %s is not quarantined: %v", later.Mistakes[0].Kind, lout.Counts)
		}
		want := slices.Sorted(slices.Values(append(slices.Clone(dscsaLot), laterID)))
		natstest.CheckFor(t, 60*time.Second, 200*time.Millisecond, func() error {
			g, err := endpoint.Call[api.HoldGetRequest, api.HoldReply](context.Background(), viewerNC, api.HoldGet, api.HoldGetRequest{ID: id})
			if err != nil {
				return err
			}
			if got := slices.Sorted(slices.Values(g.DLQIDs)); !slices.Equal(got, want) {
				return fmt.Errorf("the lot hold holds %d %v, want the later record too: %v", g.Count, got, want)
			}
			return nil
		})
		if g, err := endpoint.Call[api.HoldGetRequest, api.HoldReply](context.Background(), viewerNC, api.HoldGet, api.HoldGetRequest{ID: selectedHold}); err != nil ||
			slices.Contains(g.DLQIDs, laterID) || g.Count != len(lotIDs) {
			t.Errorf("the hold of the selected records: %d %v (%v), want the %d selected only", g.Count, g.DLQIDs, err, len(lotIDs))
		}
		in.open("/holds")
		if got := in.text("#hold-" + id + " td.held-count"); !strings.Contains(got, fmt.Sprint(len(want))) {
			t.Errorf("the Holds page counts %q for the lot hold, want %d", got, len(want))
		}
		in.recallShot(next(), "holds", axeSrc)
	})
	if laterID != "" {
		lotIDs = slices.Sorted(slices.Values(append(lotIDs, laterID)))
	}

	key, err := auditor.SigningPublicKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the lot exported from the Records search: every held record of it and nothing else, each payload read once, the JSONL verified offline", func(t *testing.T) {
		in.t = t
		// Every record of the lot is held (the hold of the selected, and
		// the lot hold for the later shipment's record), as its Records
		// search shows it.
		search := in.searchRecords("", "#r-lot", recallLot, lotIDs)
		natstest.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
			held := eval[[]string](in, `[...document.querySelectorAll("table.records tbody tr.held input.select")].map(i => i.value)`)
			if slices.Sort(held); !slices.Equal(held, lotIDs) {
				in.open(search)
				return fmt.Errorf("%d of the lot's records shown held %v, want %d %v", len(held), held, len(lotIDs), lotIDs)
			}
			return nil
		})

		// The XLSX: from the Records search, "Export these records" fills
		// the Audit page's export form with the lot.
		x := in.download(search, "xlsx", "FDA recall 2026-39: lot "+recallLot)
		all, ofLot := xlsxLotRows(t, x.file, recallLot)
		rows := slices.Sorted(slices.Values(slices.Concat(slices.Collect(maps.Values(all))...)))
		if !slices.Equal(rows, lotIDs) {
			t.Errorf("the XLSX of lot %q holds %d chains %v, want the lot's %d held records %v", recallLot, len(rows), rows, len(lotIDs), lotIDs)
		}
		if got := slices.Sorted(slices.Values(slices.Concat(slices.Collect(maps.Values(ofLot))...))); !slices.Equal(got, lotIDs) {
			t.Errorf("the XLSX's rows whose lot column is %q: %d %v, want %d", recallLot, len(got), got, len(lotIDs))
		}
		for dom := range lotColumns {
			if len(all[dom]) == 0 {
				t.Errorf("the XLSX has no %s row of the lot", dom)
			}
		}
		// One payload read per record of the lot, recorded with the reason.
		reads := exportReads(t, st, inspector, "FDA recall 2026-39: lot "+recallLot)
		if !slices.Equal(reads, lotIDs) {
			t.Errorf("the access audit records %d payloads read for the export %v, want the lot's %d", len(reads), reads, len(lotIDs))
		}
		t.Logf("RECALL_EXPORT: %d records of the lot (DSCSA %d, pharmacy %d, FSMA %d) in the XLSX, %d payload reads recorded, %d ms click to file",
			len(rows), len(all[dscsa.Name]), len(all["pharmacy"]), len(all["fsma"]), len(reads), x.took.Milliseconds())
		in.open(search)
		in.submit("#export-view", "#export-form")
		in.recallShot(next(), "export-filled-from-search", axeSrc)

		// The JSONL of the same filter, verified offline with the audit
		// key (what dlqctl verify-export runs): the signed, whole answer.
		j := in.download(search, "jsonl", "FDA recall 2026-39: the signed export of lot "+recallLot)
		f, err := os.Open(j.file)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rep, err := auditor.VerifyExport(f, key)
		if err != nil {
			t.Fatalf("the lot's JSONL downloaded through Chromium does not verify offline: %v", err)
		}
		if got := jsonlChains(t, j.file); rep.Chains != len(lotIDs) || !slices.Equal(got, lotIDs) {
			t.Errorf("the verified JSONL holds %d chains %v, want the lot's %d %v", rep.Chains, got, len(lotIDs), lotIDs)
		}
		t.Logf("RECALL_EXPORT_JSONL: verified offline, %d chains, %d records, %d ms click to file", rep.Chains, rep.Records, j.took.Milliseconds())
	})

	t.Run("export takes the same filters in every domain", func(t *testing.T) {
		in.t = t
		pallet := slices.Sorted(maps.Keys(ssccs))[0]
		of := func(prefix string) []string {
			return slices.DeleteFunc(slices.Clone(lotIDs), func(id string) bool { return !strings.HasPrefix(id, prefix+"_") })
		}
		// A GTIN of the lot's shipment records, and what the records
		// search finds by it (the export selects as the search does).
		search := func(req api.ListRequest) []string {
			t.Helper()
			req.Limit = api.MaxLimit
			var ids []string
			for _, it := range endpointItems(t, viewerNC, req) {
				ids = append(ids, it.DLQID)
			}
			slices.Sort(ids)
			return ids
		}
		var gtin string
		for _, it := range endpointItems(t, viewerNC, api.ListRequest{Domain: dscsa.Name, Lot: recallLot, Limit: api.MaxLimit}) {
			if g := it.Identifiers["gtin"]; g != "" {
				gtin = g
				break
			}
		}
		byGTIN, byGTINLot := search(api.ListRequest{Domain: dscsa.Name, GTIN: gtin}), search(api.ListRequest{Domain: dscsa.Name, GTIN: gtin, Lot: recallLot})
		if gtin == "" || len(byGTINLot) == 0 || len(byGTIN) < len(byGTINLot) {
			t.Fatalf("no GTIN of the lot's shipment records to export by (%q: %d records, %d of the lot)", gtin, len(byGTIN), len(byGTINLot))
		}
		for _, tc := range []struct {
			name string
			form url.Values
			want []string
		}{
			{"a DSCSA GTIN", url.Values{"domain": {dscsa.Name}, "gtin": {gtin}}, byGTIN},
			{"a DSCSA GTIN of the lot", url.Values{"domain": {dscsa.Name}, "gtin": {gtin}, "lot": {recallLot}}, byGTINLot},
			{"a pharmacy lot", url.Values{"domain": {"pharmacy"}, "lot": {recallLot}}, of("pharmacy")},
			{"a DSCSA lot", url.Values{"domain": {dscsa.Name}, "lot": {recallLot}}, of(dscsa.Name)},
			{"a DSCSA pallet's SSCC", url.Values{"domain": {dscsa.Name}, "sscc": {pallet}}, slices.Compact(slices.Sorted(slices.Values(ssccs[pallet])))},
			{"an FSMA TLC", url.Values{"domain": {"fsma"}, "tlc": {recallLot}}, of("fsma")},
			{"the lot in every domain", url.Values{"lot": {recallLot}}, lotIDs},
			{"a lot of no event", url.Values{"lot": {`A1&B<2>"Ü" 陈伟`}}, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				in.t = t
				got := in.exportCSV(tc.form, "FDA recall 2026-39: "+tc.name)
				if !slices.Equal(got, tc.want) {
					t.Errorf("the CSV export of %v holds %d chains %v, want %d %v", tc.form, len(got), got, len(tc.want), tc.want)
				}
			})
		}
		t.Run("a filter the domain does not search by is refused, naming it", func(t *testing.T) {
			in.t = t
			status, body := in.post("/audit/export", url.Values{"csrf": {in.csrf()}, "domain": {"fsma"}, "ndc": {"0409-4888-20"},
				"format": {"csv"}, "reason": {"recall: a wrong field"}}.Encode(), nil)
			if status != http.StatusBadRequest || !strings.Contains(body, api.ErrBadRequest) || !strings.Contains(body, "ndc") {
				t.Errorf("an FSMA export by NDC: %d %.300s", status, body)
			}
		})
	})
}

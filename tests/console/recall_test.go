package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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

// recallShot checks the page as it is (axe-core: no serious or critical
// violation; no horizontal scroll at either width) and saves a full-page
// screenshot of each width: screenshots/recall/<n>-<name>-<width>.png.
func (p *person) recallShot(n int, name string, axeSrc []byte) {
	p.t.Helper()
	if v := p.axe(string(axeSrc)); len(v) > 0 {
		p.t.Errorf("%s: %+v", name, v)
	}
	dir := filepath.Join(tools.Root(p.t), "tests", "console", "screenshots", "recall")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	for _, vp := range walkViewports {
		p.do(chromedp.EmulateViewport(vp.w, vp.h))
		if over := eval[int](p, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); over > 0 {
			p.t.Errorf("%s at %dx%d: %d px of horizontal scroll", name, vp.w, vp.h, over)
		}
		ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		cancel()
		if err != nil {
			p.t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%02d-%s-%d.png", n, name, vp.w)), png, 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
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
// and downloads the lot's XLSX export through Chromium, read back with
// excelize. Screenshots: tests/console/screenshots/recall/.
func TestRecallWalk(t *testing.T) {
	axeSrc, err := os.ReadFile(tools.Axe(t))
	if err != nil {
		t.Fatal(err)
	}
	browserCtx := startBrowser(t)
	st := startStack(t, newDownstream(t))
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
		codes := eval[[]string](in, `[...document.querySelectorAll("table.records tbody tr td code.nowrap")].map(c => c.textContent)`)
		if distinct := slices.Compact(slices.Sorted(slices.Values(codes))); len(distinct) < 4 {
			t.Errorf("the lot's rows show %d error codes %v: want its failure kinds", len(distinct), distinct)
		}
		if got := in.text("table.records tbody"); !strings.Contains(got, recallLot) {
			t.Errorf("the identifiers do not show the lot as written: %.300q", got)
		}
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

	t.Run("the lot's XLSX downloaded through Chromium and read back", func(t *testing.T) {
		in.t = t
		dir := t.TempDir()
		if _, err := chromedp.CallBrowser(in.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllow, BrowserContextID: chromedp.FromContext(in.ctx).BrowserContextID, DownloadPath: dir,
		}); err != nil {
			t.Fatal(err)
		}
		download := func(lot, reason string) string {
			t.Helper()
			before, _ := filepath.Glob(filepath.Join(dir, "*.xlsx"))
			in.open("/audit")
			if lot != "" {
				in.do(chromedp.SendKeys(chromedp.CSS("#x-lot"), lot))
			}
			in.do(chromedp.Click(chromedp.CSS("#x-format-xlsx")), chromedp.SendKeys(chromedp.CSS("#x-reason"), reason), chromedp.Click(chromedp.CSS("#export")))
			var file string
			began := time.Now()
			defer func() { t.Logf("RECALL_XLSX_MS=%d (click to the file downloaded)", time.Since(began).Milliseconds()) }()
			natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
				m, _ := filepath.Glob(filepath.Join(dir, "deadletter-export-*.xlsx"))
				for _, f := range m {
					if !slices.Contains(before, f) {
						file = f
						return nil
					}
				}
				if eval[bool](in, `document.querySelector("main .alert") !== null`) {
					return errors.New("the export was refused: " + in.text("main .alert"))
				}
				return errors.New("no XLSX downloaded")
			})
			return file
		}
		// Every record the inspector may read (this store holds the
		// shipment's mistakes and the lot's pharmacy events), then the
		// lot's rows read off its lot column.
		all, ofLot := xlsxLotRows(t, download("", "FDA recall 2026-39: lot "+recallLot), recallLot)
		if got := slices.Sorted(slices.Values(slices.Concat(slices.Collect(maps.Values(ofLot))...))); !slices.Equal(got, lotIDs) {
			t.Errorf("the XLSX's rows of lot %q: %d %v, want %d %v", recallLot, len(got), got, len(lotIDs), lotIDs)
		}
		if n := len(dlq) + len(slices.DeleteFunc([]string{laterID}, func(s string) bool { return s == "" })); len(all[dscsa.Name]) != n {
			t.Errorf("the dscsa sheet has the rows of %d chains, want the shipments' %d quarantined events", len(all[dscsa.Name]), n)
		}
		in.open("/audit")
		if got := in.text("#access-table"); !strings.Contains(got, "FDA recall 2026-39") || !strings.Contains(got, api.AccessExport) {
			t.Errorf("the export is not in the access audit:\n%.600s", got)
		}
		in.recallShot(next(), "audit-exported", axeSrc)

		// The Audit page's lot field (labelled "FSMA lot code"): the
		// export of the lot alone. Reported, not asserted: it selects
		// rows by an FSMA traceability lot code only (issue #39, T9).
		_, lotOnly := xlsxLotRows(t, download(recallLot, "FDA recall 2026-39: the lot field"), recallLot)
		got := slices.Sorted(slices.Values(slices.Concat(slices.Collect(maps.Values(lotOnly))...)))
		in.open("/audit")
		read := eval[string](in, `(c => c ? c.textContent : "")(document.querySelector("#access-table tbody tr td:nth-child(6)"))`)
		t.Logf("REPORT: the export with the Audit page's lot field holds %d of the lot's %d records (DSCSA %d, pharmacy %d, FSMA %d); the access audit records %s payloads read for it",
			len(got), len(lotIDs), len(lotOnly[dscsa.Name]), len(lotOnly["pharmacy"]), len(lotOnly["fsma"]), read)
	})
}

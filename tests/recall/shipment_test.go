package recall

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/xuri/excelize/v2"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document/upload"
	"github.com/deadletter/deadletter/shared/exportsheet"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/shipment"
)

// recalled are the lots of both shipments: the first is the recalled
// one, written as the trade may write a lot (GS1 set 82 takes & < > ").
var recalled = []string{`24&"B"<7>`, "24-0517/A", "24-0602", "24-0611"}

// sent is one shipment published, and what came of it.
type sent struct {
	*shipment.Shipment
	sha    string
	events [][]byte // the document's events as read (JSON objects)
	// dlq is the dlq id of each planted mistake's chain, by position.
	dlq map[int]string
}

// publish publishes the shipment's bytes as dlqctl publish does (in
// parts and a manifest when larger than a message).
func (e *env) publishDocument(t *testing.T, data []byte) upload.Result {
	t.Helper()
	res, err := upload.Publish(context.Background(), e.pub, subjects.Event(dscsa.Name, subjects.DocumentType), bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// outcomes waits until every event of the document sha has its outcome
// (none pending or unaccounted, committed+quarantined = n) and returns
// them.
func (e *env) outcomes(t *testing.T, sha string, n int) *api.DocumentOutcomes {
	t.Helper()
	var d *api.DocumentOutcomes
	natstest.CheckFor(t, 180*time.Second, 250*time.Millisecond, func() error {
		var l api.ListReply
		if ae := call(t, e.viewer, api.AuditList, api.ListRequest{Document: sha, Limit: 1}, &l); ae != nil {
			return ae
		}
		if d = l.Document; d == nil {
			return fmt.Errorf("document %s not known yet", sha[:12])
		}
		if got := len(d.Events); got != n || d.Counts[api.ReconcilePending] > 0 || d.Counts[api.ReconcileUnaccounted] > 0 {
			return fmt.Errorf("%d of %d events have an outcome: %v", got, n, d.Counts)
		}
		return nil
	})
	return d
}

// TestRecallOfShipments: a distributor's day and a recall. Two shipments
// as partners send them (an EPCIS 1.2 XML document with an SBDH and an
// EPCIS 2.0 JSON-LD document, thousands of events: items commissioned,
// packed into cases and pallets, pallets shipped by their SSCCs) with
// every kind of planted mistake: every event gets an outcome, exactly the
// planted mistakes are quarantined, each with its code; a resend commits
// nothing twice; the recalled lot finds every quarantined event of it in
// both documents whatever it failed on, a pallet's SSCC its shipping
// events; one hold by the lot holds them all at once; the export of the
// lot holds each whole (XLSX read back, EPCIS 2.0 within GS1's schema's
// rules); and a document whose events all committed is one thing to look
// at too.
func TestRecallOfShipments(t *testing.T) {
	natstest.Long(t, "shipments of thousands of events")
	e := start(t)
	admin := e.conn(t, access.Admin)
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	ledger := func() uint64 {
		t.Helper()
		s, err := js.Stream(context.Background(), subjects.LedgerStream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}

	// Thousands of events each (61 a pallet); a few hundred under the
	// race detector.
	pallets := [2]int{40, 44}
	if raceEnabled {
		pallets = [2]int{6, 7}
	}
	cfgs := []shipment.Config{
		{Seed: 3901, Format: shipment.XML12, ID: "DESADV-2026-3901 Müller & Söhne → <O'Brien>", Lots: recalled,
			Pallets: pallets[0], CasesPerPallet: 20, ItemsPerCase: 12, Mistakes: len(shipment.Kinds)},
		{Seed: 3902, Format: shipment.JSONLD20, ID: "urn:uuid:0b7e6c2a-39b1-4c77-9e0a-2f6d1c3a3902", Lots: recalled,
			Pallets: pallets[1], CasesPerPallet: 20, ItemsPerCase: 10, Mistakes: len(shipment.Kinds) + 2},
	}
	var docs []*sent
	for _, cfg := range cfgs {
		s, err := shipment.Generate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		d := &sent{Shipment: s, dlq: map[int]string{}}
		read, err := document.Read(s.Data)
		if err != nil {
			t.Fatal(err)
		}
		d.events, d.sha = read.Events, read.SHA256
		docs = append(docs, d)
	}
	begin := time.Now()
	for _, d := range docs {
		if up := e.publishDocument(t, d.Data); up.SHA256 != d.sha {
			t.Fatalf("published %s, read %s", up.SHA256, d.sha)
		}
	}
	committed := 0
	for _, d := range docs {
		out := e.outcomes(t, d.sha, d.Events)
		t.Logf("%s document, %d events (%d KiB), %d planted mistakes: every outcome %.1f s after the first publish, %v",
			d.Format, d.Events, len(d.Data)>>10, len(d.Mistakes), time.Since(begin).Seconds(), out.Counts)
		want := map[int]shipment.Mistake{}
		for _, m := range d.Mistakes {
			want[m.Index] = m
		}
		for _, ev := range out.Events {
			m, planted := want[ev.Index]
			switch {
			case !planted && ev.Outcome != api.ReconcileCommitted:
				t.Errorf("%s event %d: %s %s, want committed", d.Format, ev.Index, ev.Outcome, ev.ErrorCode)
			case planted && (ev.DLQID == "" || ev.ErrorCode != string(m.Code)):
				t.Errorf("%s event %d (%s): %s %q, want quarantined %s", d.Format, ev.Index, m.Kind, ev.Outcome, ev.ErrorCode, m.Code)
			case planted:
				d.dlq[ev.Index] = ev.DLQID
			default:
				committed++
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if n := ledger(); n != uint64(committed) {
		t.Fatalf("LEDGER holds %d entries, want the %d committed events", n, committed)
	}
	quarantined := func() int {
		var l api.ListReply
		mustCall(t, e.viewer, api.AuditList, api.ListRequest{Domain: dscsa.Name, Limit: 1}, &l)
		return l.Total
	}
	chains := quarantined()

	t.Run("a resend commits nothing twice", func(t *testing.T) {
		for _, d := range docs {
			e.publishDocument(t, d.Data)
		}
		natstest.CheckFor(t, 180*time.Second, 250*time.Millisecond, func() error {
			c, err := js.Consumer(context.Background(), subjects.EventsStream, subjects.ValidatorConsumer)
			if err != nil {
				return err
			}
			info, err := c.Info(context.Background())
			if err != nil {
				return err
			}
			if info.NumPending > 0 || info.NumAckPending > 0 {
				return fmt.Errorf("the validator has %d messages pending, %d unacknowledged", info.NumPending, info.NumAckPending)
			}
			return nil
		})
		if n := ledger(); n != uint64(committed) {
			t.Errorf("LEDGER holds %d entries after the resend, want %d", n, committed)
		}
		if n := quarantined(); n != chains {
			t.Errorf("%d chains quarantined after the resend, want %d", n, chains)
		}
	})

	// What a search must find: the planted mistakes whose payload holds
	// the lot, or names the pallet.
	byLot := map[string]string{}   // dlq id → kind
	ssccs := map[string][]string{} // pallet → dlq ids
	for _, d := range docs {
		for _, m := range d.Mistakes {
			if m.Lot == recalled[0] {
				byLot[d.dlq[m.Index]] = m.Kind
			}
			for _, s := range m.SSCCs {
				ssccs[s] = append(ssccs[s], d.dlq[m.Index])
			}
		}
	}
	kinds := map[string]bool{}
	for _, k := range byLot {
		kinds[k] = true
	}
	if len(byLot) < 4 || len(kinds) < 3 || len(ssccs) == 0 {
		t.Fatalf("the recalled lot has %d planted mistakes of %d kinds, %d pallets are named by one: too few for a recall", len(byLot), len(kinds), len(ssccs))
	}
	ids := func(items []api.Summary) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.DLQID)
		}
		slices.Sort(out)
		return out
	}

	t.Run("found by the lot and by a pallet", func(t *testing.T) {
		got := ids(e.found(t, api.ListRequest{Domain: dscsa.Name, Lot: recalled[0]}))
		if want := slices.Sorted(maps.Keys(byLot)); !slices.Equal(got, want) {
			t.Errorf("by the lot: %d found %v, want %d %v (kinds %v)", len(got), got, len(want), want, byLot)
		}
		for _, pallet := range slices.Sorted(maps.Keys(ssccs)) {
			got := ids(e.found(t, api.ListRequest{Domain: dscsa.Name, SSCC: pallet}))
			want := slices.Sorted(slices.Values(ssccs[pallet]))
			if !slices.Equal(got, slices.Compact(want)) {
				t.Errorf("by SSCC %s: found %v, want %v", pallet, got, want)
			}
		}
	})

	t.Run("one hold holds the lot at once", func(t *testing.T) {
		var placed api.HoldReply
		mustCall(t, e.inspector, api.HoldPlace, api.HoldPlaceRequest{CaseID: "RECALL-2026-39 <Müller & Söhne>", Reason: "FDA Class I recall of lot " + recalled[0],
			Target: api.HoldTarget{Filter: &api.HoldFilter{Domain: dscsa.Name, Lot: recalled[0]}}}, &placed)
		if n := placed.Count + placed.PendingCount; n != len(byLot) || len(placed.Failed) > 0 {
			t.Fatalf("the hold holds %d (%d pending, failed %v), want %d", placed.Count, placed.PendingCount, placed.Failed, len(byLot))
		}
		natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
			var g api.HoldReply
			mustCall(t, e.viewer, api.HoldGet, api.HoldGetRequest{ID: placed.Hold.ID}, &g)
			if g.Count != len(byLot) {
				return fmt.Errorf("%d held (%d pending), want %d", g.Count, g.PendingCount, len(byLot))
			}
			return nil
		})
		for _, it := range e.found(t, api.ListRequest{Domain: dscsa.Name, Lot: recalled[0]}) {
			if !slices.Contains(it.HoldIDs, placed.Hold.ID) {
				t.Errorf("%s (%s) is not held", it.DLQID, it.ErrorCode)
			}
		}
	})

	t.Run("the export of the lot holds each whole", func(t *testing.T) {
		var (
			epcis  exportsheet.EPCISBuilder
			sheets exportsheet.Builder
			got    []string
		)
		req := api.ExportRequest{Filter: api.ExportFilter{Domain: dscsa.Name, Lot: recalled[0]}, Reason: "FDA recall 2026-39: lot " + recalled[0], Limit: 3}
		for {
			var rep api.ExportReply
			mustCall(t, e.inspector, api.AuditExport, req, &rep)
			for _, c := range rep.Chains {
				epcis.Add(c)
				sheets.Add(c)
				got = append(got, c.DLQID)
			}
			if rep.NextCursor == "" {
				break
			}
			req.Cursor = rep.NextCursor
		}
		slices.Sort(got)
		if want := slices.Sorted(maps.Keys(byLot)); !slices.Equal(got, want) {
			t.Fatalf("exported %v, want %v", got, want)
		}
		// The sent events of the lot, by eventID (each event has one).
		sentByID := map[string]map[string]any{}
		// Those no EPCIS 2.0 document can hold, by eventID and dlq id.
		refusable, refusableDLQ := map[string]bool{}, map[string]bool{}
		for _, d := range docs {
			for _, m := range d.Mistakes {
				if m.Lot != recalled[0] {
					continue
				}
				ev := decode(t, d.events[m.Index])
				id, _ := ev["eventID"].(string)
				sentByID[id] = ev
				switch m.Code {
				case dscsa.InvalidBizStep, dscsa.UnsupportedEventType, codes.UnparseableEventTime, dscsa.InvalidDisposition:
					refusable[id], refusableDLQ[d.dlq[m.Index]] = true, true
				}
			}
		}

		t.Run("EPCIS 2.0", func(t *testing.T) {
			var out bytes.Buffer
			if err := epcis.WriteEPCIS(&out, time.Now()); err != nil {
				t.Fatal(err)
			}
			if err := exportsheet.CheckEPCIS(out.Bytes()); err != nil {
				t.Fatalf("the export breaks GS1's EPCIS 2.0 JSON Schema's rules: %v", err)
			}
			for _, r := range epcis.Refused {
				if !refusableDLQ[r.DLQID] {
					t.Errorf("refused %s (%s): %v", r.DLQID, byLot[r.DLQID], r.Err)
				}
			}
			back, err := document.Read(out.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			written := map[string]map[string]any{}
			for _, ev := range back.Events {
				m := decode(t, ev)
				id, _ := m["eventID"].(string)
				written[id] = m
			}
			for id, ev := range sentByID {
				w, ok := written[id]
				switch {
				case !ok && !refusable[id]:
					t.Errorf("event %s is not in the EPCIS export", id)
				case ok:
					for k := range ev {
						if _, has := w[k]; !has && k != "@context" {
							t.Errorf("event %s: %s dropped", id, k)
						}
					}
					if !slices.Equal(epcsOf(ev), epcsOf(w)) {
						t.Errorf("event %s: epcList %v, sent %v", id, epcsOf(w), epcsOf(ev))
					}
				}
			}
			if len(written)+len(epcis.Refused) != len(byLot) {
				t.Errorf("%d written, %d refused, want %d", len(written), len(epcis.Refused), len(byLot))
			}
		})

		t.Run("XLSX read back", func(t *testing.T) {
			var out bytes.Buffer
			if err := exportsheet.WriteXLSX(&out, sheets.Sheets()); err != nil {
				t.Fatal(err)
			}
			f, err := excelize.OpenReader(&out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			rows, err := f.GetRows(dscsa.Name)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) < 2 {
				t.Fatalf("the dscsa sheet has %d rows", len(rows))
			}
			col := func(name string) int {
				i := slices.Index(rows[0], name)
				if i < 0 {
					t.Fatalf("no column %q in %v", name, rows[0])
				}
				return i
			}
			idc, codec, lotc, epcc := col("dlq_id"), col("error_code"), col("dscsa.lot"), col("dscsa.epc_list")
			seen := map[string]bool{}
			for _, r := range rows[1:] {
				r = append(r, make([]string, len(rows[0]))...)
				kind, ok := byLot[r[idc]]
				if !ok {
					t.Errorf("row of %q: not a quarantined event of the lot", r[idc])
					continue
				}
				seen[r[idc]] = true
				if r[lotc] != recalled[0] {
					t.Errorf("%s (%s): lot %q, want %q", r[idc], kind, r[lotc], recalled[0])
				}
				if r[codec] == "" || (r[epcc] == "" && kind != "transformation-event") {
					t.Errorf("%s (%s): code %q, epcs %q", r[idc], kind, r[codec], r[epcc])
				}
			}
			if len(seen) != len(byLot) {
				t.Errorf("the dscsa sheet has %d of the lot's %d events", len(seen), len(byLot))
			}
		})
	})

	t.Run("a document whose events all committed", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			cfg   shipment.Config
			parts bool
		}{
			{"whole", shipment.Config{Seed: 3903, Format: shipment.XML12, ID: "DESADV-2026-3903 陈伟药房 <clean>", Lots: recalled[1:], Pallets: 2, CasesPerPallet: 3}, false},
			// More than a message's MiB in a few hundred events: cases of 100.
			{"in parts", shipment.Config{Seed: 3904, Format: shipment.JSONLD20, ID: "DESADV-2026-3904 Müller & Söhne \"clean\"", Lots: recalled[1:],
				Pallets: 6, CasesPerPallet: 20, ItemsPerCase: 100}, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s, err := shipment.Generate(tc.cfg)
				if err != nil {
					t.Fatal(err)
				}
				up := e.publishDocument(t, s.Data)
				if up.Parts > 0 != tc.parts {
					t.Fatalf("sent in %d parts", up.Parts)
				}
				d := e.outcomes(t, up.SHA256, s.Events)
				if d.Counts[api.ReconcileCommitted] != s.Events || d.Document.SHA256 != up.SHA256 || d.Document.Events != s.Events ||
					d.Document.ID != tc.cfg.ID || d.Document.Format != string(tc.cfg.Format) {
					t.Fatalf("%+v (counts %v), want its %d events committed", d.Document, d.Counts, s.Events)
				}
			})
		}
		t.Run("a document not kept here", func(t *testing.T) {
			var l api.ListReply
			mustCall(t, e.viewer, api.AuditList, api.ListRequest{Document: strings.Repeat("0b", 32)}, &l)
			if l.Document != nil || len(l.Items) != 0 {
				t.Fatalf("%+v, %d items: want none", l.Document, len(l.Items))
			}
		})
	})
}

// epcsOf returns an event's epcList or childEPCs, sorted.
func epcsOf(ev map[string]any) []string {
	var out []string
	for _, f := range []string{"epcList", "childEPCs"} {
		list, _ := ev[f].([]any)
		for _, v := range list {
			s, _ := v.(string)
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// decode decodes one event.
func decode(tb testing.TB, ev []byte) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(ev, &m); err != nil {
		tb.Fatal(err)
	}
	return m
}

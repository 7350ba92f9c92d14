package auditor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/export"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// exportAll pages audit.export with req and returns the checkpoint, the
// chains, the records left out, the number of pages and the pages.
func exportAll(tb testing.TB, e *env, req api.ExportRequest) (api.ExportedCheckpoint, []api.ExportChain, int, int, []api.ExportReply) {
	tb.Helper()
	var (
		cp        api.ExportedCheckpoint
		chains    []api.ExportChain
		uncovered int
		pages     []api.ExportReply
	)
	for {
		var rep api.ExportReply
		request(tb, e.nc, api.AuditExport, req, &rep)
		if len(pages) > 0 && rep.Checkpoint.AuditSeq != cp.AuditSeq {
			tb.Fatalf("page %d is proved against checkpoint %d, the first against %d", len(pages), rep.Checkpoint.AuditSeq, cp.AuditSeq)
		}
		cp = rep.Checkpoint
		pages = append(pages, rep)
		chains = append(chains, rep.Chains...)
		uncovered += rep.Uncovered
		if rep.NextCursor == "" {
			return cp, chains, uncovered, len(pages), pages
		}
		req.Cursor = rep.NextCursor
	}
}

// exportFile writes an export of the pages as JSONL.
func exportFile(tb testing.TB, pages []api.ExportReply) []byte {
	tb.Helper()
	var b bytes.Buffer
	h := api.ExportHeader{Format: api.ExportFormat, ExportedAt: t0, Reason: "test", Key: pages[0].Checkpoint.Key}
	if err := export.Write(&b, h, pages); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// exportLines splits a JSONL export into its lines, decoded.
func exportLines(tb testing.TB, file []byte) []api.ExportLine {
	tb.Helper()
	var out []api.ExportLine
	for _, l := range bytes.Split(bytes.TrimSpace(file), []byte("\n")) {
		var x api.ExportLine
		if err := json.Unmarshal(l, &x); err != nil {
			tb.Fatal(err)
		}
		out = append(out, x)
	}
	return out
}

// joinLines encodes lines as a JSONL export.
func joinLines(tb testing.TB, lines []api.ExportLine) []byte {
	tb.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, l := range lines {
		if l == (api.ExportLine{}) {
			continue // a line a tamper dropped
		}
		if err := enc.Encode(l); err != nil {
			tb.Fatal(err)
		}
	}
	return b.Bytes()
}

// flipHex changes the first hex digit of s.
func flipHex(s string) string {
	c := byte('0')
	if s[0] == '0' {
		c = '1'
	}
	return string(c) + s[1:]
}

// TestExportVerifiesOffline: an export paged through audit.export (pages
// of two chains) verifies with VerifyExport and the signer's public key
// alone; a copy with one byte changed, or any of the tampers below, is
// refused with a reason naming what failed.
func TestExportVerifiesOffline(t *testing.T) {
	e := newEnv(t)
	cfg, pub := signedConfig(t, t.TempDir())
	for _, r := range anchorFixture(t) {
		e.publish(t, r)
	}
	e.startAuditor(t, cfg, nil)
	cp, chains, uncovered, pages, replies := exportAll(t, e, api.ExportRequest{Reason: "inspection", Limit: 2})
	if len(chains) != 4 || pages != 2 || uncovered != 0 || cp.TreeSize != 6 || cp.Signature == "" || replies[0].Page.Signature == "" {
		t.Fatalf("export: %d chains in %d pages, %d uncovered, tree %d, signed %v, pages signed %v",
			len(chains), pages, uncovered, cp.TreeSize, cp.Signature != "", replies[0].Page.Signature != "")
	}
	file := exportFile(t, replies)
	rep, err := export.Verify(bytes.NewReader(file), pub)
	if err != nil || rep.Chains != 4 || rep.Records != 6 {
		t.Fatalf("VerifyExport = %+v, %v; want 4 chains, 6 records", rep, err)
	}
	t.Run("one byte of a payload", func(t *testing.T) {
		i := bytes.Index(file, []byte("TX-SECRET-PHI"))
		if i < 0 {
			t.Fatal("the export holds no payload")
		}
		bad := bytes.Clone(file)
		bad[i] = 'Y'
		if _, err := export.Verify(bytes.NewReader(bad), pub); !errors.Is(err, export.ErrRefused) || !strings.Contains(err.Error(), record.ProblemSealMismatch) {
			t.Fatalf("a changed byte: %v, want a seal mismatch", err)
		}
	})
	// The chain of two records (id(101), resolved).
	twoRecords := -1
	lines := exportLines(t, file)
	for i, l := range lines {
		if l.Chain != nil && len(l.Chain.Records) == 2 {
			twoRecords = i
		}
	}
	if twoRecords < 0 {
		t.Fatal("no chain of two records")
	}
	for _, tc := range []struct {
		name   string
		tamper func(ls []api.ExportLine)
		pubKey string
		reason string
	}{
		{"record detail", func(ls []api.ExportLine) {
			r := &ls[twoRecords].Chain.Records[0]
			r.Record = bytes.Replace(r.Record, []byte("rule failed"), []byte("rule passed"), 1)
		}, pub, record.ProblemSealMismatch},
		{"seal", func(ls []api.ExportLine) {
			r := &ls[twoRecords].Chain.Records[1]
			var m map[string]any
			_ = json.Unmarshal(r.Record, &m)
			m["audit_hash"] = flipHex(m["audit_hash"].(string))
			r.Record, _ = json.Marshal(m)
		}, pub, record.ProblemSealMismatch},
		{"checkpoint signature", func(ls []api.ExportLine) {
			cp := ls[1].Checkpoint
			first := "A"
			if cp.Signature[0] == 'A' {
				first = "B"
			}
			cp.Signature = first + cp.Signature[1:]
		}, pub, "signature"},
		{"checkpoint root", func(ls []api.ExportLine) {
			ls[1].Checkpoint.MerkleRoot = flipHex(ls[1].Checkpoint.MerkleRoot)
		}, pub, "signature"},
		{"another key", func([]api.ExportLine) {}, "ABJHLOVMPA4CI6R5KLNGOB4GSLNIY7IOUPAJC4YFNDLQVIOBYQGUWVLA", "signed by key"},
		{"proof hash", func(ls []api.ExportLine) {
			p := ls[twoRecords].Chain.Records[1].Proof
			p[0] = flipHex(p[0])
		}, pub, "inclusion proof"},
		{"leaf index", func(ls []api.ExportLine) {
			ls[twoRecords].Chain.Records[1].LeafIndex--
		}, pub, "inclusion proof"},
		{"sequence", func(ls []api.ExportLine) {
			ls[twoRecords].Chain.Records[1].Seq++
		}, pub, "inclusion proof"},
		{"drop the first record of a chain", func(ls []api.ExportLine) {
			c := ls[twoRecords].Chain
			c.Records = c.Records[1:]
		}, pub, record.ProblemIndexGap},
		{"drop the last record of a chain", func(ls []api.ExportLine) {
			c := ls[twoRecords].Chain
			c.Records = c.Records[:1]
		}, pub, "left out"},
		{"drop a chain, counts fixed", func(ls []api.ExportLine) {
			dropLine(ls, firstChain(ls))
			fixEnd(ls)
		}, pub, "left out"},
		{"drop the last page, counts fixed", func(ls []api.ExportLine) {
			last := pageLines(ls)[1]
			for i := last[0]; i <= last[1]; i++ {
				dropLine(ls, i)
			}
			fixEnd(ls)
		}, pub, "last pages are missing"},
		{"drop the first page, counts fixed", func(ls []api.ExportLine) {
			first := pageLines(ls)[0]
			for i := first[0]; i <= first[1]; i++ {
				dropLine(ls, i)
			}
			fixEnd(ls)
		}, pub, "first pages are missing"},
		{"a page's signature", func(ls []api.ExportLine) {
			p := ls[pageLines(ls)[0][1]].Page
			p.Chains++
		}, pub, "manifest"},
		{"a page claimed by another key", func(ls []api.ExportLine) {
			p := ls[pageLines(ls)[0][1]].Page
			p.Key = "ABJHLOVMPA4CI6R5KLNGOB4GSLNIY7IOUPAJC4YFNDLQVIOBYQGUWVLA"
		}, pub, "manifest"},
		{"reorder a chain", func(ls []api.ExportLine) {
			c := ls[twoRecords].Chain
			c.Records[0], c.Records[1] = c.Records[1], c.Records[0]
		}, pub, "record 0"},
		{"a record moved to another chain", func(ls []api.ExportLine) {
			for i := range ls {
				if ls[i].Chain != nil && i != twoRecords {
					ls[i].Chain.Records = append(ls[i].Chain.Records, ls[twoRecords].Chain.Records[1])
					ls[twoRecords].Chain.Records = ls[twoRecords].Chain.Records[:1]
					return
				}
			}
		}, pub, "chain"},
		{"no end line", func(ls []api.ExportLine) { dropLine(ls, len(ls)-1) }, pub, "cut short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls := exportLines(t, file) // fresh copies
			tc.tamper(ls)
			_, err := export.Verify(bytes.NewReader(joinLines(t, ls)), tc.pubKey)
			if !errors.Is(err, export.ErrRefused) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("VerifyExport: %v, want a refusal naming %q", err, tc.reason)
			}
		})
	}
	t.Run("cut short", func(t *testing.T) {
		cut := file[:bytes.LastIndexByte(bytes.TrimSpace(file), '\n')+1]
		if _, err := export.Verify(bytes.NewReader(cut), pub); !errors.Is(err, export.ErrRefused) || !strings.Contains(err.Error(), "cut short") {
			t.Fatalf("VerifyExport: %v, want cut short", err)
		}
	})
}

// TestExportPagesByBytes: a page ends before the chain that would take it
// past its byte budget (here about two chains, while the chain limit is
// 1000), and the pages still make the whole export.
func TestExportPagesByBytes(t *testing.T) {
	e := newEnv(t)
	cfg, pub := signedConfig(t, t.TempDir())
	for _, r := range anchorFixture(t) {
		e.publish(t, r)
	}
	a := e.startAuditor(t, cfg, nil)
	a.exportBudget = 4000 // a chain of one record takes about 1,500 bytes
	_, chains, _, pages, replies := exportAll(t, e, api.ExportRequest{Reason: "inspection"})
	if len(chains) != 4 || pages < 2 {
		t.Fatalf("%d chains in %d pages, want 4 in more than one", len(chains), pages)
	}
	if _, err := export.Verify(bytes.NewReader(exportFile(t, replies)), pub); err != nil {
		t.Fatal(err)
	}
}

// TestExportAfterTheCheckpoint: an export is proved against the
// checkpoint of its first page; records stored while it pages are left
// out and counted, and a chain quarantined meanwhile is not exported.
func TestExportAfterTheCheckpoint(t *testing.T) {
	e := newEnv(t)
	cfg, pub := signedConfig(t, t.TempDir())
	rs := anchorFixture(t)
	for _, r := range rs[:4] { // four first records
		e.publish(t, r)
	}
	a := e.startAuditor(t, cfg, nil)
	var p1 api.ExportReply
	request(t, e.nc, api.AuditExport, api.ExportRequest{Reason: "inspection", Limit: 2}, &p1)
	// Newest first: the page holds the chains of rs[3] and rs[2]; rs[1]
	// gets a record, and a new chain arrives, after the checkpoint.
	e.publish(t, rs[4])
	late := first(t, fixture{id: id(200), domain: "pharmacy", class: record.ClassValidation, code: codes.MalformedJSON, firstSeen: t0, quarantined: t0})
	e.publish(t, late)
	e.waitApplied(t, a)
	cp, chains, uncovered, _, replies := exportAll(t, e, api.ExportRequest{Reason: "inspection", Limit: 2, Cursor: p1.NextCursor})
	chains = append(p1.Chains, chains...)
	uncovered += p1.Uncovered
	if cp.AuditSeq != p1.Checkpoint.AuditSeq || len(chains) != 4 || uncovered != 1 {
		t.Fatalf("export: checkpoint %d (first page %d), %d chains, %d uncovered; want the same, 4, 1", cp.AuditSeq, p1.Checkpoint.AuditSeq, len(chains), uncovered)
	}
	for _, c := range chains {
		if c.DLQID == late.DLQID {
			t.Fatal("a chain quarantined after the checkpoint was exported")
		}
	}
	if _, err := export.Verify(bytes.NewReader(exportFile(t, append([]api.ExportReply{p1}, replies...))), pub); err != nil {
		t.Fatal(err)
	}
}

// firstChain returns the index of the first chain line.
func firstChain(ls []api.ExportLine) int {
	for i, l := range ls {
		if l.Chain != nil {
			return i
		}
	}
	return -1
}

// pageLines returns, per page, the index of its first line and of its
// manifest.
func pageLines(ls []api.ExportLine) [][2]int {
	var out [][2]int
	start := -1
	for i, l := range ls {
		switch {
		case l.Chain != nil && start < 0:
			start = i
		case l.Page != nil:
			if start < 0 {
				start = i
			}
			out = append(out, [2]int{start, i})
			start = -1
		}
	}
	return out
}

// dropLine blanks line i (joinLines leaves blank lines out).
func dropLine(ls []api.ExportLine, i int) { ls[i] = api.ExportLine{} }

// fixEnd makes the end line count what the lines hold.
func fixEnd(ls []api.ExportLine) {
	var chains, records int
	for _, l := range ls {
		if l.Chain != nil {
			chains++
			records += len(l.Chain.Records)
		}
	}
	end := ls[len(ls)-1].End
	end.Chains, end.Records = chains, records
}

// TestPayloadReadsAreRecorded: audit.get with include_payload and every
// export page write an access record to AUDIT before answering (who,
// when, what, why); audit.access lists them newest first, by user and
// time; reads do not change QUARANTINE.
func TestPayloadReadsAreRecorded(t *testing.T) {
	e := newEnv(t)
	rs := anchorFixture(t)
	for _, r := range rs {
		e.publish(t, r)
	}
	now := t0.Add(time.Hour)
	e.startAuditor(t, testConfig(), func() time.Time { return now })
	q, err := e.js.Stream(context.Background(), subjects.QuarantineStream)
	if err != nil {
		t.Fatal(err)
	}
	before := q.CachedInfo().State.LastSeq
	var g api.GetReply
	request(t, e.nc, api.AuditGet, api.GetRequest{DLQID: id(101), IncludePayload: true, Reason: "ticket 42"}, &g)
	if g.State.Payload == nil {
		t.Fatal("no payload")
	}
	now = now.Add(time.Minute)
	var x api.ExportReply
	request(t, e.nc, api.AuditExport, api.ExportRequest{Filter: api.ExportFilter{Status: "resolved"}, Reason: "inspection"}, &x)
	if len(x.Chains) != 1 || x.Chains[0].DLQID != id(101) || x.AccessSeq == 0 {
		t.Fatalf("export of the resolved chains: %+v", x)
	}
	request(t, e.nc, api.AuditGet, api.GetRequest{DLQID: id(100)}, &g) // no payload: not recorded
	var acc api.AccessReply
	request(t, e.nc, api.AuditAccess, api.AccessRequest{User: anonymous}, &acc)
	if len(acc.Items) != 2 {
		t.Fatalf("access records: %+v, want 2", acc.Items)
	}
	exp, get := acc.Items[0], acc.Items[1]
	if exp.Action != api.AccessExport || exp.Reason != "inspection" || exp.Count != 1 || exp.Filter == nil || exp.Filter.Status != "resolved" ||
		exp.IDsHash != idsHash([]string{id(101)}) || exp.Seq != x.AccessSeq {
		t.Errorf("export record: %+v", exp)
	}
	if get.Action != api.AccessGet || get.Reason != "ticket 42" || get.User != anonymous || len(get.DLQIDs) != 1 ||
		get.DLQIDs[0] != id(101) || !get.At.Equal(t0.Add(time.Hour)) {
		t.Errorf("get record: %+v", get)
	}
	for _, tc := range []struct {
		name string
		req  api.AccessRequest
		want int
	}{
		{"since", api.AccessRequest{Since: t0.Add(time.Hour + time.Second)}, 1},
		{"until", api.AccessRequest{Until: t0.Add(time.Hour)}, 1},
		{"another user", api.AccessRequest{User: "bob"}, 0},
		{"a page of one", api.AccessRequest{Limit: 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rep api.AccessReply
			request(t, e.nc, api.AuditAccess, tc.req, &rep)
			if len(rep.Items) != tc.want {
				t.Fatalf("%d items, want %d", len(rep.Items), tc.want)
			}
		})
	}
	var p1, p2 api.AccessReply
	request(t, e.nc, api.AuditAccess, api.AccessRequest{Limit: 1}, &p1)
	request(t, e.nc, api.AuditAccess, api.AccessRequest{Limit: 1, Cursor: p1.NextCursor}, &p2)
	if len(p2.Items) != 1 || p2.Items[0].Action != api.AccessGet || p2.NextCursor != "" {
		t.Fatalf("second page: %+v", p2)
	}
	info, err := q.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.LastSeq != before {
		t.Fatalf("QUARANTINE went from sequence %d to %d: a read changed a chain", before, info.State.LastSeq)
	}
}

// TestPayloadReadFailsClosed: when the access record cannot be written
// (AUDIT full: MaxMsgs reached with DiscardNew, a test-only
// configuration), a payload read and an export are refused UNAVAILABLE
// with no payload; a read without payload still answers.
func TestPayloadReadFailsClosed(t *testing.T) {
	e := newEnv(t)
	cfg, _ := signedConfig(t, t.TempDir())
	for _, r := range anchorFixture(t) {
		e.publish(t, r)
	}
	a := e.startAuditor(t, cfg, nil)
	var cp api.CheckpointReply
	request(t, e.nc, api.AuditCheckpoint, api.CheckpointRequest{}, &cp) // the export's checkpoint exists: only the access write fails
	ctx := context.Background()
	s, err := e.js.Stream(ctx, subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	c := s.CachedInfo().Config
	c.MaxMsgs, c.Discard = int64(s.CachedInfo().State.Msgs), jetstream.DiscardNew
	if _, err := e.js.UpdateStream(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, subject string
		req           any
	}{
		{"get", api.AuditGet, api.GetRequest{DLQID: id(101), IncludePayload: true, Reason: "ticket 42"}},
		{"export", api.AuditExport, api.ExportRequest{Reason: "inspection"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := json.Marshal(tc.req)
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			body, err := endpoint.CallRaw(cctx, e.nc, tc.subject, b)
			if api.CodeOf(err) != api.ErrUnavailable {
				t.Fatalf("%s: %v, want UNAVAILABLE", tc.subject, err)
			}
			if bytes.Contains(body, []byte("TX-SECRET")) || strings.Contains(err.Error(), "TX-SECRET") {
				t.Fatal("a payload left with the refusal")
			}
		})
	}
	var g api.GetReply
	request(t, e.nc, api.AuditGet, api.GetRequest{DLQID: id(101)}, &g)
	if !strings.Contains(a.logs.String(), "AUDIT_ACCESS_NOT_RECORDED") {
		t.Error("the refusal was not logged")
	}
	if strings.Contains(a.logs.String(), "TX-SECRET") {
		t.Error("a payload value was logged")
	}
}

// TestAccessPagesAcrossWindows: the access audit pages newest first past
// the window of AUDIT sequences it reads at a time, with checkpoints
// between the access records.
func TestAccessPagesAcrossWindows(t *testing.T) {
	e := newEnv(t)
	e.chainOf(t, fixture{id: id(1), domain: "pharmacy", class: record.ClassValidation, code: codes.MalformedJSON, firstSeen: t0, quarantined: t0})
	e.startAuditor(t, testConfig(), nil)
	const reads = accessScanWindow + 30
	for i := range reads {
		var g api.GetReply
		request(t, e.nc, api.AuditGet, api.GetRequest{DLQID: id(1), IncludePayload: true, Reason: "read " + strconv.Itoa(i)}, &g)
		if i == reads/2 {
			var cp api.CheckpointReply
			request(t, e.nc, api.AuditCheckpoint, api.CheckpointRequest{}, &cp)
		}
	}
	var all []api.AccessEntry
	req := api.AccessRequest{Limit: 1000}
	for {
		var rep api.AccessReply
		request(t, e.nc, api.AuditAccess, req, &rep)
		all = append(all, rep.Items...)
		if rep.NextCursor == "" {
			break
		}
		req.Cursor = rep.NextCursor
	}
	if len(all) != reads {
		t.Fatalf("%d access records, want %d", len(all), reads)
	}
	for i, it := range all {
		if want := "read " + strconv.Itoa(reads-1-i); it.Reason != want || (i > 0 && it.Seq >= all[i-1].Seq) {
			t.Fatalf("item %d: %q at seq %d, want %q, newest first", i, it.Reason, it.Seq, want)
		}
	}
}

// tradeRecord builds the sealed first record of a chain dlqID of domain
// dom whose event (of type eventType) is payload, quarantined at t0+i s.
func tradeRecord(tb testing.TB, dlqID, dom, eventType string, payload []byte, i int) record.Record {
	tb.Helper()
	at := t0.Add(time.Duration(i) * time.Second)
	r := record.FromFailure(record.Failure{
		Class: record.ClassExhausted, Code: codes.DownstreamUnavailable, Detail: "downstream 503", Domain: dom,
		Subject: "events." + dom + "." + eventType, Stream: subjects.EventsStream, Seq: uint64(i + 1),
		Deliveries: 5, Published: at, Payload: payload,
		Envelope: &envelope.Envelope{Domain: dom, EventType: eventType, IdempotencyKey: dlqID, PartyID: "SUP-00417"},
		FailedAt: at,
	}, at)
	if err := record.Seal(&r); err != nil {
		tb.Fatal(err)
	}
	return r
}

// TestExportWithAmpersandVerifies is the inspector's report: an FSMA
// event whose product description holds "&", "<" and ">", exported as
// JSONL through audit.export and written as dlqctl writes it, verifies
// offline with the audit key.
func TestExportWithAmpersandVerifies(t *testing.T) {
	e := newEnv(t)
	cfg, pub := signedConfig(t, t.TempDir())
	ev := []byte(`{"supplier_id":"SUP-00417","cte_type":"shipping","traceability_lot_code":"00860001000030-RL250312A",` +
		`"tlc_source":{"gln":"0860001000030"},"product_description":"Romaine & kale <fresh>","quantity":"600",` +
		`"unit_of_measure":"cases","ship_from":{"gln":"0860001000030"},"ship_to":{"gln":"0614141000012"},` +
		`"event_time":"2025-03-13T02:30:00Z","reference_document":{"type":"BOL","number":"BOL-778120"}}`)
	e.publish(t, tradeRecord(t, "fsma_"+strings.Repeat("a", 32), "fsma", "shipping", ev, 0))
	e.startAuditor(t, cfg, nil)
	_, _, _, _, replies := exportAll(t, e, api.ExportRequest{Reason: "FDA records request 2026-117"})
	file := exportFile(t, replies)
	if _, err := export.Verify(bytes.NewReader(file), pub); err != nil {
		t.Fatalf("a genuine export was refused: %v", err)
	}
}

// tradeEvents are one event per domain, as trading partners send them;
// tradeText sets the free text of the test on its text field.
var tradeEvents = []struct {
	domain, eventType, textField string
	doc                          string
}{
	{"pharmacy", "transfer_out", "actor_id", `{"transaction_id":"INV-2025-0183","registrant_dea":"BW4829137","ndc":"55150-123-10",` +
		`"lot":"C4410B","expiry":"2026-09-30","quantity_delta":"-20","unit":"EA","event_type":"transfer_out","dea_schedule":"II",` +
		`"occurred_at":"2025-03-14T15:42:10Z","actor_id":"RPH-0412","counterparty_dea":"RK5612088"}`},
	{"dscsa", "destroying", "example:destructionMethod", `{"type":"ObjectEvent","eventTime":"2024-06-03T08:00:00+02:00",` +
		`"eventTimeZoneOffset":"+02:00","epcList":["https://id.gs1.org/01/00360001234560/21/DX0093311?lot=A1&exp=260930"],` +
		`"action":"DELETE","bizStep":"destroying","disposition":"destroyed",` +
		`"readPoint":{"id":"https://id.gs1.org/414/0614141007776/254/12"},"bizLocation":{"id":"https://id.gs1.org/414/0614141007776"}}`},
	{"fsma", "shipping", "product_description", `{"supplier_id":"SUP-00417","cte_type":"shipping",` +
		`"traceability_lot_code":"00860001000030-RL250312A","tlc_source":{"gln":"0860001000030"},` +
		`"product_description":"Romaine hearts","quantity":"600","unit_of_measure":"cases",` +
		`"ship_from":{"gln":"0860001000030","name":"Müller & Söhne <Großhandel>"},"ship_to":{"gln":"0614141000012"},` +
		`"event_time":"2025-03-13T02:30:00Z","reference_document":{"type":"BOL","number":"BOL-778120"}}`},
}

// tradeText returns the event doc with field set to text, encoded as a
// publisher would: HTML-escaped (encoding/json's default) or not.
func tradeText(tb testing.TB, doc, field, text string, htmlEscaped bool) []byte {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		tb.Fatal(err)
	}
	m[field] = text
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(htmlEscaped)
	if err := enc.Encode(m); err != nil {
		tb.Fatal(err)
	}
	return bytes.TrimSpace(b.Bytes())
}

// TestExportOfTradeTextVerifies: for every domain, payloads holding every
// JSON- and HTML-significant character, control characters, line and
// paragraph separators, non-ASCII text and 100 KB strings export through
// audit.export (pages of three chains) and verify offline; the file holds
// "&", "<" and ">" as themselves; a file written as exports were before
// the one export form (records HTML-escaped) still verifies; a copy with
// one payload character changed is refused.
func TestExportOfTradeTextVerifies(t *testing.T) {
	var controls strings.Builder
	for c := rune(0); c < 0x20; c++ {
		controls.WriteRune(c)
	}
	texts := []struct{ name, text string }{
		{"ampersand and angle brackets", "Romaine & kale <fresh>"},
		{"json significant", `a "quoted" \ back\slash / slash \u0026 not an escape`},
		{"html significant", `<script>alert('x')</script> & "y" ' z`},
		{"control characters", "ctl:" + controls.String() + ":end"},
		{"line and paragraph separators", "line\u2028sep\u2029para"},
		{"non-ASCII", "Pharmacie Saint-Étienne, Müller & Söhne <Großhandel>, ü é 中文 🥬"},
		{"long", strings.Repeat("Romaine & kale <fresh> ü 中 ", 4200)}, // about 130 KB
		{"digital link query", "https://id.gs1.org/01/00360001234560/21/DX0093311?lot=A1&exp=260930&x=<y>"},
	}
	e := newEnv(t)
	cfg, pub := signedConfig(t, t.TempDir())
	n := 0
	for _, ev := range tradeEvents {
		for _, tx := range texts {
			for _, escaped := range []bool{false, true} {
				p := tradeText(t, ev.doc, ev.textField, tx.text, escaped)
				e.publish(t, tradeRecord(t, fmt.Sprintf("%s_%032d", ev.domain, n), ev.domain, ev.eventType, p, n))
				n++
			}
		}
	}
	e.startAuditor(t, cfg, nil)
	cp, chains, _, pages, replies := exportAll(t, e, api.ExportRequest{Reason: "inspection", Limit: 3})
	if len(chains) != n || pages < 2 || int(cp.TreeSize) != n {
		t.Fatalf("export: %d chains in %d pages, tree %d; want %d chains in several pages", len(chains), pages, cp.TreeSize, n)
	}
	file := exportFile(t, replies)
	if !bytes.Contains(file, []byte("Romaine & kale <fresh>")) {
		t.Error(`the export does not hold "Romaine & kale <fresh>" as written`)
	}
	// An older file: every line as encoding/json writes it by default.
	var old bytes.Buffer
	enc := json.NewEncoder(&old)
	for _, l := range exportLines(t, file) {
		if err := enc.Encode(l); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Contains(old.Bytes(), []byte(`Romaine \u0026 kale \u003cfresh\u003e`)) {
		t.Fatal("the older form is not HTML-escaped")
	}
	for _, tc := range []struct {
		name   string
		file   []byte
		reason string // "" verifies
	}{
		{"as written", file, ""},
		{"as written before the one export form", old.Bytes(), ""},
		{"one payload character changed", bytes.Replace(file, []byte("Saint-Étienne"), []byte("Saint-Etienne"), 1), record.ProblemSealMismatch},
		{"an escape changed", bytes.Replace(file, []byte(`\\u0026 not an escape`), []byte(`\\u0027 not an escape`), 1), record.ProblemSealMismatch},
		{"a control character changed", bytes.Replace(file, []byte(`\u0001`), []byte(`\u0002`), 1), record.ProblemSealMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.reason != "" && bytes.Equal(tc.file, file) {
				t.Fatal("the tamper changed nothing")
			}
			rep, err := export.Verify(bytes.NewReader(tc.file), pub)
			if tc.reason == "" {
				if err != nil || rep.Chains != n {
					t.Fatalf("VerifyExport = %+v, %v; want %d chains verified", rep, err, n)
				}
				return
			}
			if !errors.Is(err, export.ErrRefused) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("VerifyExport: %v, want a refusal naming %q", err, tc.reason)
			}
		})
	}
}

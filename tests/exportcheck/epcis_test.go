// Package exportcheck checks inspection exports as their readers take
// them: an EPCIS export of a shipment that came as EPCIS 1.2 XML, through
// the real services on an embedded server (this file), and the XLSX
// through LibreOffice (libreoffice.sh, make export-check).
package exportcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/exportsheet"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestEPCISExportOfXMLShipment: a distributor's EPCIS 1.2 XML shipment
// (an SBDH, CBV 1.2 URNs, the trade's text) with four planted mistakes
// goes through the validator; its quarantined events, exported as the
// inspector's audit.export pages give them, are written as one EPCIS 2.0
// JSON document that passes the EPCIS 2.0 rules with the bare CBV words,
// but for the event whose bizStep no EPCIS 2.0 word can name, left out
// and named INVALID_BIZSTEP; the DSCSA sheet of the same export names
// each event's source document and position.
func TestEPCISExportOfXMLShipment(t *testing.T) {
	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	startServices(t, srv)
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	natstest.WaitServing(t, nc, access.Validator, access.Quarantiner, access.Auditor)

	shipment, err := os.ReadFile("testdata/shipment-mistakes-1.2.xml")
	if err != nil {
		t.Fatal(err)
	}
	read, err := document.Read(shipment)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), subjects.Event(dscsa.Name, subjects.DocumentType), shipment); err != nil {
		t.Fatal(err)
	}
	// The planted mistakes, by the event's position in the document.
	want := map[int]codes.Code{1: dscsa.MissingExpiry, 2: dscsa.InvalidLocation, 3: dscsa.InvalidBizStep, 4: codes.MissingLot}
	var list api.ListReply
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		list = api.ListReply{}
		request(t, nc, api.AuditList, api.ListRequest{Domain: dscsa.Name}, &list)
		if len(list.Items) != len(want) {
			return fmt.Errorf("%d chains quarantined, want %d", len(list.Items), len(want))
		}
		return nil
	})

	req := api.ExportRequest{Filter: api.ExportFilter{Domain: dscsa.Name}, Reason: "return to trading partner after review"}
	var (
		epcis exportsheet.EPCISBuilder
		sheet exportsheet.Builder
	)
	for {
		var rep api.ExportReply
		request(t, nc, api.AuditExport, req, &rep)
		for _, ch := range rep.Chains {
			epcis.Add(ch)
			sheet.Add(ch)
		}
		if rep.NextCursor == "" {
			break
		}
		req.Cursor = rep.NextCursor
	}
	var out bytes.Buffer
	if err := epcis.WriteEPCIS(&out, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := exportsheet.CheckEPCIS(out.Bytes()); err != nil {
		t.Fatalf("the export breaks the EPCIS 2.0 rules: %v\n%s", err, out.Bytes())
	}
	if bytes.Contains(out.Bytes(), []byte("urn:epcglobal:cbv:bizstep:")) || bytes.Contains(out.Bytes(), []byte("urn:epcglobal:cbv:disp:")) ||
		bytes.Contains(out.Bytes(), []byte("urn:epcglobal:cbv:btt:")) || bytes.Contains(out.Bytes(), []byte("urn:epcglobal:cbv:sdt:")) {
		t.Errorf("a CBV 1.2 URN is left in the export:\n%s", out.Bytes())
	}
	if len(epcis.Refused) != 1 || codes.Of(epcis.Refused[0].Err) != dscsa.InvalidBizStep || epcis.Events() != len(want)-1 {
		t.Fatalf("%d events written, refused %v; want %d and the misspelled bizStep refused", epcis.Events(), epcis.Refused, len(want)-1)
	}
	// Each event written is the shipment's event in EPCIS 2.0 form: the
	// same members, CBV words for URNs, the trade's text as itself.
	back, err := document.Read(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	byTime := map[string]map[string]any{}
	for _, ev := range back.Events {
		m := decode(t, ev)
		byTime[m["eventTime"].(string)] = m
	}
	for i, code := range want {
		sent := decode(t, read.Events[i])
		got, ok := byTime[sent["eventTime"].(string)]
		if code == dscsa.InvalidBizStep {
			if ok {
				t.Errorf("event %d (%s) was written: %v", i, code, got)
			}
			continue
		}
		if !ok {
			t.Errorf("event %d (%s) is not in the export", i, code)
			continue
		}
		for k, v := range sent {
			if _, ok := got[k]; !ok {
				t.Errorf("event %d: %s (%v) was dropped", i, k, v)
			}
		}
		if s, _ := got["bizStep"].(string); s != strings.TrimPrefix(sent["bizStep"].(string), "urn:epcglobal:cbv:bizstep:") {
			t.Errorf("event %d: bizStep %q, sent %q", i, s, sent["bizStep"])
		}
	}
	if !bytes.Contains(out.Bytes(), []byte(`Spedition Müller & Söhne <Großhandel> \"Nord\" 陈伟`)) {
		t.Errorf("the trade's text is not written as itself:\n%s", out.Bytes())
	}

	t.Run("sheet", func(t *testing.T) {
		var dscsaSheet exportsheet.Sheet
		for _, s := range sheet.Sheets() {
			if s.Name == dscsa.Name {
				dscsaSheet = s
			}
		}
		col := func(name string) int {
			return slices.IndexFunc(dscsaSheet.Columns, func(c exportsheet.Column) bool { return c.Name == name })
		}
		id, pos, count, code := col("dscsa.source_document_id"), col("dscsa.source_document_event"), col("dscsa.source_document_events"), col("error_code")
		if id < 0 || pos < 0 || count < 0 || code < 0 || len(dscsaSheet.Rows) != len(want) {
			t.Fatalf("dscsa sheet: %d rows, columns %v", len(dscsaSheet.Rows), dscsaSheet.Columns)
		}
		for _, r := range dscsaSheet.Rows {
			p, _ := r[pos].(int64)
			if r[id] != read.ID || r[count] != int64(len(read.Events)) || r[code] != string(want[int(p)-1]) {
				t.Errorf("row %v: document %q event %v of %v with %v; want %q, the event with that code, of %d", r[:3], r[id], r[pos], r[count], r[code], read.ID, len(read.Events))
			}
		}
	})
}

// decode decodes an event.
func decode(tb testing.TB, ev []byte) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(ev, &m); err != nil {
		tb.Fatal(err)
	}
	return m
}

// startServices runs on srv what an export reads from: a validator, a
// quarantiner and an auditor (callers unchecked on a server without
// accounts).
func startServices(t *testing.T, srv *natstest.Server) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	v, err := validator.New(srv.Connect(t), validator.DefaultConfig(), log)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, "validator", v.Run)
	q, err := quarantiner.New(srv.Connect(t), quarantiner.DefaultConfig(), log)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, "quarantiner", q.Run)
	acfg := auditor.DefaultConfig()
	acfg.CheckpointInterval, acfg.ReconcileInterval = 0, 0
	acfg.AllowAnonymous = true
	a, err := auditor.New(srv.Connect(t), acfg, log)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, "auditor", a.Run)
}

// request calls an endpoint and decodes its reply into out.
func request(tb testing.TB, nc *nats.Conn, subject string, req, out any) {
	tb.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := endpoint.CallRaw(ctx, nc, subject, b)
	if err != nil {
		tb.Fatalf("%s: %v", subject, err)
	}
	if err := json.Unmarshal(body, out); err != nil {
		tb.Fatalf("%s reply: %v", subject, err)
	}
}

package replay

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/record"
)

// example reads a valid example of the schemas' test data.
func example(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile("../../../schemas/testdata/" + path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTarget: a replay goes to its original's domain and type; a
// correction to the type its payload names (bizStep, CTE type, event
// type), else the original's; a chain whose original is on no events
// subject has no target. Check answers the gate's verdict there, a
// document's event by event.
func TestTarget(t *testing.T) {
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	r := New(Config{Gate: g, Metrics: testMetrics()})
	ship := example(t, "dscsa/valid/shipping-pallets-sscc.json")
	misspelled := strings.Replace(ship, `"bizStep": "shipping"`, `"bizStep": "urn:epcglobal:cbv:bizstep:shiping"`, 1)
	fsmaShip := example(t, "fsma/valid/shipping-gln.json")
	dispense := `{"transaction_id":"TX-1 & <2>","registrant_dea":"BW4829137","ndc":"00406-0512-01","lot":"L1","expiry":"2026-09-30",` +
		`"quantity_delta":"500","unit":"EA","event_type":" Receive ","dea_schedule":"II","occurred_at":"2025-03-14T15:42:10Z","actor_id":"RPH-0412",` +
		`"drug_name":"Oxycodone & APAP <5/325> \"Percocet\" Müller & Söhne 陈伟"}`
	doc := `{"type":"EPCISDocument","schemaVersion":"2.0","creationDate":"2026-11-03T11:20:00Z","epcisBody":{"eventList":[` +
		ship + `,` + misspelled + `]}}`
	for _, tc := range []struct {
		name      string
		domain    string
		source    string
		payload   string
		corrected bool
		dom, typ  string
		err       error
		code      string // Check's code ("" when OK)
		document  bool
	}{
		{name: "original", domain: "dscsa", source: "events.dscsa.shiping", payload: misspelled, dom: "dscsa", typ: "shiping", code: "INVALID_BIZSTEP"},
		{name: "original with its publisher", domain: "dscsa", source: "events.acme-pharma.dscsa.other", payload: misspelled, dom: "dscsa", typ: "other", code: "INVALID_BIZSTEP"},
		{name: "bizStep corrected", domain: "dscsa", source: "events.acme-pharma.dscsa.other", payload: ship, corrected: true, dom: "dscsa", typ: "shipping"},
		{name: "bizStep still misspelled", domain: "dscsa", source: "events.dscsa.shiping", payload: misspelled, corrected: true, dom: "dscsa", typ: "shiping", code: "INVALID_BIZSTEP"},
		{name: "correction no JSON", domain: "dscsa", source: "events.dscsa.other", payload: `{"bizStep":`, corrected: true, dom: "dscsa", typ: "other", code: "MALFORMED_JSON"},
		{name: "cte type corrected", domain: "fsma", source: "events.fsma.receiving", payload: fsmaShip, corrected: true, dom: "fsma", typ: "shipping"},
		{name: "event type corrected", domain: "pharmacy", source: "events.pharmacy.dispense", payload: strings.Replace(dispense, `" Receive "`, `"receive"`, 1),
			corrected: true, dom: "pharmacy", typ: "receive"},
		{name: "event type corrected, padded: the schema refuses it", domain: "pharmacy", source: "events.pharmacy.dispense", payload: dispense,
			corrected: true, dom: "pharmacy", typ: "receive", code: "SCHEMA_VALIDATION_ERROR"},
		{name: "document corrected", domain: "dscsa", source: "events.dscsa.document", payload: doc, corrected: true, dom: "dscsa", typ: "document",
			code: "INVALID_BIZSTEP", document: true},
		{name: "no events subject", domain: "dscsa", source: "dlq.intake.dscsa", payload: ship, corrected: true, err: ErrNoEventsSubject},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := record.State{Domain: tc.domain, SourceSubject: tc.source}
			dom, typ, err := r.Target(st, []byte(tc.payload), tc.corrected)
			if !errors.Is(err, tc.err) || dom != tc.dom || typ != tc.typ {
				t.Fatalf("Target = %q, %q, %v; want %q, %q, %v", dom, typ, err, tc.dom, tc.typ, tc.err)
			}
			c, err := r.Check(st, []byte(tc.payload), tc.corrected)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Check: %v, want %v", err, tc.err)
			}
			if tc.err != nil {
				return
			}
			if c.Subject != "events."+tc.dom+"."+tc.typ || c.OK != (tc.code == "") || c.Code != tc.code || c.Document != tc.document {
				t.Fatalf("Check = %+v, want subject events.%s.%s, code %q, document %v", c, tc.dom, tc.typ, tc.code, tc.document)
			}
			if tc.document && !strings.Contains(c.Detail, "index 1") {
				t.Errorf("the document's verdict %q does not name its event at index 1", c.Detail)
			}
		})
	}
}

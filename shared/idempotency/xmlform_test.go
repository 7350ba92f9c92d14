package idempotency_test

import (
	"os"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/idempotency"
)

// TestXMLFormShowsReferenceID: an event of an XML document, checked as the
// validator checks it (document.DecodeEvent, gate.CheckEvent with XML),
// shows the event hash ID the reference implementation computes for the
// XML form (its recorded output), while its key and content hash are the
// ones the same event checked as JSON gets: the form changes what a
// person sees, never what makes a duplicate.
func TestXMLFormShowsReferenceID(t *testing.T) {
	const dir = "../domain/dscsa/eventhash/testdata/reference-id/"
	data, err := os.ReadFile(dir + "commissioning-lot-xml.xml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(dir + "commissioning-lot-xml.hashes")
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := strings.Fields(string(want))
	doc, err := document.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Format != document.FormatXML || len(doc.Events) != len(wantIDs) || len(wantIDs) == 0 {
		t.Fatalf("%s document of %d events, %d expected IDs", doc.Format, len(doc.Events), len(wantIDs))
	}
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	differs, checked := 0, 0
	for i, raw := range doc.Events {
		_, typ, decoded := document.DecodeEvent("", raw)
		fromXML, err := g.CheckEvent(gate.Event{Domain: dscsa.Name, Type: typ, Data: raw, Doc: decoded, XML: true})
		if err != nil {
			// The fixture is written for the hash (a TransformationEvent,
			// a commissioning without serials): the gate refuses it, in
			// either form alike.
			if _, e2 := g.CheckEvent(gate.Event{Domain: dscsa.Name, Type: typ, Data: raw}); codes.Of(e2) != codes.Of(err) {
				t.Errorf("event %d: refused %s from XML, %s as JSON", i, codes.Of(err), codes.Of(e2))
			}
			continue
		}
		checked++
		_, _, again := document.DecodeEvent("", raw)
		asJSON, err := g.CheckEvent(gate.Event{Domain: dscsa.Name, Type: typ, Data: raw, Doc: again})
		if err != nil {
			t.Fatalf("event %d as JSON: %v", i, err)
		}
		if fromXML.EventHashID != wantIDs[i] {
			t.Errorf("event %d: shown ID %s, the reference's for the XML form %s", i, fromXML.EventHashID, wantIDs[i])
		}
		if fromXML.EventHashID != asJSON.EventHashID {
			differs++
		}
		if fromXML.IdempotencyKey != asJSON.IdempotencyKey {
			t.Errorf("event %d: key %s from XML, %s as JSON", i, fromXML.IdempotencyKey, asJSON.IdempotencyKey)
		}
		fromXML.Document = &envelope.Document{Format: document.FormatXML}
		hx, hj := idempotency.CheckedDocHash(fromXML, raw, decoded), idempotency.CheckedDocHash(asJSON, raw, again)
		if hx != hj || hx != idempotency.ContentHash(dscsa.Name, raw) {
			t.Errorf("event %d: content hash %s from XML, %s as JSON, %s from the bytes", i, hx, hj, idempotency.ContentHash(dscsa.Name, raw))
		}
	}
	if differs == 0 {
		t.Fatalf("no event's shown ID depends on its form (%d of %d checked): the fixture tests nothing", checked, len(doc.Events))
	}
}

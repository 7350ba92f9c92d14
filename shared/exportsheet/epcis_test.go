package exportsheet

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
)

// TestWriteEPCIS: the DSCSA chains of an export, written as one EPCIS 2.0
// JSON document, read back as their events byte for byte (events read
// from a JSON and from an XML document, with the trade's text); chains of
// other domains, a whole document that could not be read and a payload
// that is no event are left out and counted.
func TestWriteEPCIS(t *testing.T) {
	var events [][]byte
	for _, f := range []string{"shipment.json", "shipment-1.2.xml"} {
		b, err := os.ReadFile("../domain/dscsa/document/testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := document.Read(b)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, doc.Events[0], doc.Events[4])
	}
	events = append(events, []byte(`{"type":"ObjectEvent","action":"OBSERVE","example:note":"Müller & Söhne <Großhandel> \"Pharmacie Saint-Étienne\""}`))
	var b EPCISBuilder
	for i, ev := range events {
		b.Add(chainOf(t, i, "dscsa", "shipping", string(ev)))
	}
	b.Add(chainOf(t, 10, "pharmacy", "dispense", `{"transaction_id":"TX-1"}`))
	b.Add(chainOf(t, 11, "dscsa", "document", `{"type":"EPCISDocument","epcisBody":`))
	b.Add(chainOf(t, 12, "dscsa", "shipping", `[1,2]`))
	if b.Events() != len(events) || b.Skipped != 3 {
		t.Fatalf("%d events, %d skipped", b.Events(), b.Skipped)
	}
	var out bytes.Buffer
	if err := b.WriteEPCIS(&out, time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	doc, err := document.Read(out.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, out.Bytes())
	}
	if len(doc.Events) != len(events) || doc.Created.IsZero() {
		t.Fatalf("%d events read back, info %+v", len(doc.Events), doc.Info)
	}
	for i := range events {
		if !bytes.HasSuffix(doc.Events[i], bytes.TrimPrefix(events[i], []byte("{"))) {
			t.Errorf("event %d:\n got %s\nwant %s", i, doc.Events[i], events[i])
		}
	}
}

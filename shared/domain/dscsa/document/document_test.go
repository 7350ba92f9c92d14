package document_test

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/domain/dscsa/eventhash"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
)

// result is the gate's outcome for one event of a document.
type result struct {
	code  codes.Code
	env   envelope.Envelope
	exact string // the event's eventhash.ExactDigest
}

func check(t *testing.T, g *gate.Gate, ev []byte) result {
	t.Helper()
	token := "other"
	if doc, err := gate.Decode(ev); err == nil {
		if et, err := (dscsa.Checker{}).EventType(doc); err == nil {
			token = et
		}
	}
	var exact string
	if doc, err := gate.Decode(ev); err == nil {
		exact = eventhash.ExactDigest(doc, nil)
	}
	env, err := g.Check("events.dscsa."+token, ev)
	if err != nil {
		return result{code: codes.Of(err), env: g.Identify("events.dscsa."+token, ev), exact: exact}
	}
	return result{env: env, exact: exact}
}

// TestShipmentTwins: one shipment (commissioning with lot and expiry,
// packing items into a case and the case onto an SSCC pallet, shipping
// with transactions and owning parties, receiving, unpacking,
// decommissioning) as EPCIS 2.0 JSON, EPCIS 1.2 XML and EPCIS 2.0 XML
// gives the same events: the same codes, keys and event hash IDs.
func TestShipmentTwins(t *testing.T) {
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	want := []codes.Code{"", "", "", "", dscsa.InvalidParentID, "", ""}
	var first []result
	for _, f := range []struct{ file, format string }{
		{"shipment.json", document.FormatJSON}, {"shipment-1.2.xml", document.FormatXML}, {"shipment-2.0.xml", document.FormatXML},
	} {
		t.Run(f.file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/" + f.file)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := document.Read(data)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if doc.Format != f.format || len(doc.Events) != len(want) {
				t.Fatalf("format %s, %d events", doc.Format, len(doc.Events))
			}
			var got []result
			for i, ev := range doc.Events {
				r := check(t, g, ev)
				got = append(got, r)
				if r.code != want[i] {
					t.Errorf("event %d: code %q, want %q\n%s", i, r.code, want[i], ev)
				}
				if !strings.HasPrefix(r.env.EventHashID, "ni:///sha-256;") {
					t.Errorf("event %d: no event hash ID", i)
				}
			}
			if first == nil {
				first = got
				return
			}
			for i := range got {
				if got[i].env.IdempotencyKey != first[i].env.IdempotencyKey || got[i].env.EventHashID != first[i].env.EventHashID ||
					got[i].env.OrderingKey != first[i].env.OrderingKey {
					t.Errorf("event %d differs from the JSON twin:\n got %+v\nwant %+v\n%s", i, got[i].env, first[i].env, doc.Events[i])
				}
				if got[i].exact != first[i].exact {
					t.Errorf("event %d: exact content differs from the JSON twin's:\n%s", i, doc.Events[i])
				}
			}
		})
	}
}

// TestJSONEventsVerbatim: a JSON document's events keep their own bytes;
// the document's @context is spliced in front of an event without one.
func TestJSONEventsVerbatim(t *testing.T) {
	data := []byte(`{"type":"EPCISDocument","@context":["x",{"ex":"urn:x:"}],"epcisBody":{"eventList":[
	  {"type":"ObjectEvent", "ex:a": "0.10"},
	  {"@context":"y","type":"ObjectEvent"},
	  {}]}}`)
	doc, err := document.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"@context":["x",{"ex":"urn:x:"}],"type":"ObjectEvent", "ex:a": "0.10"}`, `{"@context":"y","type":"ObjectEvent"}`,
		`{"@context":["x",{"ex":"urn:x:"}]}`}
	for i, ev := range doc.Events {
		if string(ev) != want[i] {
			t.Errorf("event %d = %s, want %s", i, ev, want[i])
		}
	}
}

// TestRefused: a document that cannot be read is refused whole, by a
// detail that quotes nothing of it.
func TestRefused(t *testing.T) {
	deep := strings.Repeat("<a>", 40) + strings.Repeat("</a>", 40)
	tests := []struct{ name, doc string }{
		{"truncated JSON", `{"type":"EPCISDocument","epcisBody":{"eventList":[{"type":"ObjectEvent"`},
		{"JSON array", `[{"type":"ObjectEvent"}]`},
		{"duplicate member", `{"type":"EPCISDocument","type":"EPCISDocument","epcisBody":{"eventList":[]}}`},
		{"not an EPCIS document", `{"type":"ObjectEvent","epcisBody":{"eventList":[]}}`},
		{"no event list", `{"type":"EPCISDocument","epcisBody":{}}`},
		{"data after the document", `{"type":"EPCISDocument","epcisBody":{"eventList":[]}} {}`},
		{"invalid UTF-8", "{\"type\":\"EPCISDocument\",\"x\":\"\xff\"}"},
		{"XML with a DTD (billion laughs)", `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>` +
			`<epcis:EPCISDocument xmlns:epcis="urn:epcglobal:epcis:xsd:1"><EPCISBody><EventList><ObjectEvent><action>&lol2;</action></ObjectEvent></EventList></EPCISBody></epcis:EPCISDocument>`},
		{"XML external entity", `<?xml version="1.0"?><epcis:EPCISDocument xmlns:epcis="urn:epcglobal:epcis:xsd:1"><EPCISBody><EventList><ObjectEvent><action>&xxe;</action></ObjectEvent></EventList></EPCISBody></epcis:EPCISDocument>`},
		{"XML in ISO-8859-1", `<?xml version="1.0" encoding="ISO-8859-1"?><epcis:EPCISDocument xmlns:epcis="urn:epcglobal:epcis:xsd:1"/>`},
		{"XML too deep", `<epcis:EPCISDocument xmlns:epcis="urn:epcglobal:epcis:xsd:2">` + deep + `</epcis:EPCISDocument>`},
		{"XML not EPCIS", `<EPCISDocument xmlns="urn:example"><EPCISBody><EventList/></EPCISBody></EPCISDocument>`},
		{"XML without event list", `<epcis:EPCISDocument xmlns:epcis="urn:epcglobal:epcis:xsd:2"><EPCISBody/></epcis:EPCISDocument>`},
		{"XML not closed", `<epcis:EPCISDocument xmlns:epcis="urn:epcglobal:epcis:xsd:2"><EPCISBody>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := document.Read([]byte(tt.doc))
			if codes.Of(err) != dscsa.MalformedDocument {
				t.Fatalf("Read = %+v, %v; want MALFORMED_DOCUMENT", doc, err)
			}
			if d := codes.DetailOf(err); strings.Contains(d, "lol") || strings.Contains(d, "xxe") || strings.Contains(d, "ObjectEvent\"") {
				t.Errorf("detail %q quotes the document", d)
			}
		})
	}
}

func fuzzSeeds(f *testing.F, files ...string) {
	for _, name := range files {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
}

// FuzzReadJSON: any input is read or refused with MALFORMED_DOCUMENT,
// never a panic, and every event read is one JSON value.
func FuzzReadJSON(f *testing.F) {
	fuzzSeeds(f, "shipment.json")
	f.Add([]byte(`{"type":"EPCISQueryDocument","epcisBody":{"queryResults":{"resultsBody":{"eventList":[{}]}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, data) })
}

// FuzzReadXML: the same for the XML reader.
func FuzzReadXML(f *testing.F) {
	fuzzSeeds(f, "shipment-1.2.xml", "shipment-2.0.xml")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, data) })
}

func fuzzRead(t *testing.T, data []byte) {
	var evs []document.Event
	info, err := document.Scan(data, func(ev document.Event) error {
		evs = append(evs, ev)
		return nil
	})
	if err != nil {
		if codes.Of(err) != dscsa.MalformedDocument {
			t.Fatalf("code %q: %v", codes.Of(err), err)
		}
		if len(evs) != 0 {
			t.Fatalf("refused after %d events", len(evs))
		}
		return
	}
	if len(evs) > document.MaxEvents || len(evs) != info.Count {
		t.Fatalf("%d events, count %d", len(evs), info.Count)
	}
	for i, ev := range evs {
		if !utf8.Valid(ev.Data) {
			t.Fatalf("event %d is not UTF-8", i)
		}
	}
	checkOffsets(t, data, info.Format, evs)
	n := 0
	sinfo, err := document.ScanSource(func() (io.Reader, error) { return iotest.HalfReader(bytes.NewReader(data)), nil },
		func(ev document.Event) error {
			if n >= len(evs) || !bytes.Equal(ev.Data, evs[n].Data) || ev.Offset != evs[n].Offset {
				t.Fatalf("streamed event %d differs", n)
			}
			n++
			return nil
		})
	if err != nil || *sinfo != *info || n != len(evs) {
		t.Fatalf("streamed: %v, %+v, %d events; in memory %+v", err, sinfo, n, info)
	}
}

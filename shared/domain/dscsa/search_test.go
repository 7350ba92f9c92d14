package dscsa_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/gate"
)

// chainOf is the chain the auditor sees of a quarantined event: its
// ordering key and party (Check's for an event that passed the gate,
// Identify's for one that did not), the identifiers its first record
// lists (Spec.Listed) and, when withPayload, those of its verbatim
// payload (Search.Identifiers).
func chainOf(t *testing.T, data []byte, withPayload bool) domain.Chain {
	t.Helper()
	g := newGate(t)
	spec := dscsa.Spec()
	env, err := g.Check(subjectFor(data), data)
	if err != nil {
		env = g.Identify(subjectFor(data), data)
	}
	c := domain.Chain{OrderingKey: env.OrderingKey, PartyID: env.PartyID, IdempotencyKey: env.IdempotencyKey, DLQID: "dscsa_1"}
	for _, name := range spec.Listed {
		if v := env.Identifiers[name]; v != "" {
			c.Listed = append(c.Listed, name, v)
		}
	}
	if withPayload {
		doc, err := gate.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		c.PayloadIdentifiers = spec.Search.Identifiers(doc)
	}
	return c
}

// Events of one recall, as partners send them: a pallet shipment (two
// pallets, a loose case and an item), a case packed onto a pallet, a
// commissioning whose Digital Link GTIN has a wrong check digit (the gate
// refuses it, GTIN_CHECK_DIGIT_FAILED), a shipping event with an unknown
// bizStep (INVALID_BIZSTEP: nothing of it is checked), and a receiving
// event whose lot is in an LGTIN class.
var (
	shipment = `{"type":"ObjectEvent","action":"OBSERVE","bizStep":"shipping","eventTime":"2026-11-03T06:12:40-05:00",
		"epcList":["urn:epc:id:sscc:0304094.0000001234","https://id.gs1.org/00/303040940000098716",
			"urn:epc:id:sgtin:0304094.588820.CASE%2F0001","https://id.gs1.org/01/00304094888200/10/L%26%3C24%3E/21/SN%26%3C1%3E"],
		"readPoint":{"id":"urn:epc:id:sgln:0304094.00001.0"},
		"sourceList":[{"type":"owning_party","source":"urn:epc:id:pgln:0304094.00001"}],
		"example:carrier":"Müller & Söhne <Spedition> 陈伟"}`
	packing = `{"type":"AggregationEvent","action":"ADD","bizStep":"packing","eventTime":"2026-11-02T21:48:03Z",
		"parentID":"https://id.gs1.org/00/303040940000098716",
		"childEPCs":["urn:epc:id:sgtin:0304094.588820.CASE%2F0002","urn:epc:id:sscc:0304094.1000001234"],
		"readPoint":{"id":"urn:epc:id:sgln:0304094.00001.12"}}`
	badCheck = `{"type":"ObjectEvent","action":"ADD","bizStep":"commissioning","eventTime":"2026-11-01T08:00:00+01:00",
		"epcList":["https://id.gs1.org/01/00304094888209/21/SN-42%22%C3%9C%22","urn:epc:id:sgtin:0304094.088820.SN-43"],
		"readPoint":{"id":"urn:epc:id:sgln:0304094.00001.0"},
		"ilmd":{"cbvmda:lotNumber":"L&24<B>017 \"Ü\"","cbvmda:itemExpirationDate":"2028-01-31"}}`
	unknownStep = `{"type":"ObjectEvent","action":"OBSERVE","bizStep":"shipping_with_care","eventTime":"2026-11-03T06:12:40-05:00",
		"epcList":["urn:epc:id:sscc:0304094.0000005678"],"ilmd":{"lotNumber":12345}}`
	lgtinLot = `{"type":"ObjectEvent","action":"OBSERVE","bizStep":"receiving","eventTime":"2026-11-04T06:12:40-05:00",
		"epcList":["urn:epc:id:sgtin:0304094.088820.SN-99"],
		"quantityList":[{"epcClass":"urn:epc:class:lgtin:0304094.088820.LOT%2F7%C3%9C","quantity":12,"uom":"EA"}]}`
)

// TestSearchEveryIdentifier: a search finds a DSCSA event by every
// identifier its payload holds (GTIN, serial alone, SGTIN, SSCC in
// epcList, parentID and childEPCs, lot of ILMD, Digital Link /10/ or an
// LGTIN class, NDC), each in every form a person pastes it, whatever the
// event failed on; the records route alone (no payload read) finds it by
// its ordering key and listed lot.
func TestSearchEveryIdentifier(t *testing.T) {
	spec := dscsa.Spec()
	tests := []struct {
		name    string
		event   string
		search  map[string]string
		payload bool // the chain holds its payload's identifiers
		want    bool
	}{
		{"pallet SSCC 18 digits (ordering key)", shipment, map[string]string{"sscc": "003040940000012346"}, false, true},
		{"second pallet by URN, payload", shipment, map[string]string{"sscc": "urn:epc:id:sscc:0304094.3000009871"}, true, true},
		{"second pallet, records only", shipment, map[string]string{"sscc": "303040940000098716"}, false, false},
		{"second pallet by Digital Link with a query", shipment, map[string]string{"sscc": "https://example.com/00/303040940000098716?a=1&b=<2>"}, true, true},
		{"case GTIN-14", shipment, map[string]string{"gtin": "50304094888205"}, true, true},
		{"case SGTIN URN", shipment, map[string]string{"gtin": "urn:epc:id:sgtin:0304094.588820.CASE%2F0001"}, true, true},
		{"item GTIN-13 padded", shipment, map[string]string{"gtin": "0304094888200"}, true, true},
		{"item serial alone, escapes decoded", shipment, map[string]string{"serial": "SN&<1>"}, true, true},
		{"item GTIN and serial together", shipment, map[string]string{"gtin": "00304094888200", "serial": "SN&<1>"}, true, true},
		{"item GTIN with the case's serial: not one item", shipment, map[string]string{"gtin": "00304094888200", "serial": "CASE/0001"}, true, false},
		{"lot of a Digital Link /10/", shipment, map[string]string{"lot": "L&<24>"}, true, true},
		{"NDC 4-4-2", shipment, map[string]string{"ndc": "0409-4888-20"}, true, true},
		{"NDC-11", shipment, map[string]string{"ndc": "00409-4888-20"}, true, true},
		{"NDC-11 plain", shipment, map[string]string{"ndc": "00409488820"}, true, true},
		{"another NDC", shipment, map[string]string{"ndc": "0409-4888-21"}, true, false},
		{"pallet and case together", shipment, map[string]string{"sscc": "003040940000012346", "gtin": "50304094888205"}, true, true},
		{"an SSCC it does not hold", shipment, map[string]string{"sscc": "103040940000012343"}, true, false},
		{"parent SSCC (ordering key)", packing, map[string]string{"sscc": "urn:epc:id:sscc:0304094.3000009871"}, false, true},
		{"child SSCC", packing, map[string]string{"sscc": "103040940000012343"}, true, true},
		{"child case serial", packing, map[string]string{"serial": "CASE/0002"}, true, true},
		{"bad check digit: GTIN as written", badCheck, map[string]string{"gtin": "00304094888209"}, true, true},
		{"bad check digit: Digital Link as written", badCheck, map[string]string{"gtin": "https://id.gs1.org/01/00304094888209/21/SN-42%22%C3%9C%22"}, true, true},
		{"bad check digit: serial alone", badCheck, map[string]string{"serial": `SN-42"Ü"`}, true, true},
		{"bad check digit: the second item", badCheck, map[string]string{"gtin": "urn:epc:id:sgtin:0304094.088820.SN-43"}, true, true},
		{"bad check digit: lot, records only", badCheck, map[string]string{"lot": `L&24<B>017 "Ü"`}, false, true},
		{"bad check digit: NDC", badCheck, map[string]string{"ndc": "0409-4888-20"}, true, true},
		{"bad check digit: GTIN, records only", badCheck, map[string]string{"gtin": "00304094888209"}, false, false},
		{"unknown bizStep: SSCC", unknownStep, map[string]string{"sscc": "003040940000056784"}, true, true},
		{"unknown bizStep: numeric lot as written", unknownStep, map[string]string{"lot": "12345"}, true, true},
		{"LGTIN lot", lgtinLot, map[string]string{"lot": "LOT/7Ü"}, true, true},
		{"LGTIN lot with the item's GTIN", lgtinLot, map[string]string{"lot": "LOT/7Ü", "gtin": "00304094888200"}, true, true},
		{"lot is case-sensitive", lgtinLot, map[string]string{"lot": "lot/7ü"}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := chainOf(t, []byte(tt.event), tt.payload)
			m, err := spec.Search.Parse(tt.search)
			if err != nil {
				t.Fatalf("Parse(%v): %v", tt.search, err)
			}
			if got := m(c); got != tt.want {
				t.Fatalf("match = %v, want %v (chain %+v)", got, tt.want, c)
			}
		})
	}
}

// TestSearchRefused: a search value that names no identifier of its field
// is refused naming the field, never quoting the value.
func TestSearchRefused(t *testing.T) {
	spec := dscsa.Spec()
	for _, tt := range []struct {
		name   string
		search map[string]string
		field  string
	}{
		{"gtin of 15 digits", map[string]string{"gtin": "003040948882001"}, "gtin"},
		{"gtin with letters", map[string]string{"gtin": "Müller & Söhne"}, "gtin"},
		{"digital link without serial", map[string]string{"gtin": "https://id.gs1.org/01/00304094888200"}, "gtin"},
		{"an SSCC as the GTIN", map[string]string{"gtin": "urn:epc:id:sscc:0304094.0000001234"}, "gtin"},
		{"sscc check digit", map[string]string{"sscc": "003040940000012347"}, "sscc"},
		{"ndc of another layout", map[string]string{"ndc": "0409-48888-2"}, "ndc"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := spec.Search.Parse(tt.search)
			se, ok := err.(*domain.SearchError)
			if !ok || se.Field != tt.field {
				t.Fatalf("err %v, want a SearchError of %s", err, tt.field)
			}
			for _, v := range tt.search {
				if strings.Contains(se.Rule, v) {
					t.Errorf("rule %q quotes the value", se.Rule)
				}
			}
		})
	}
}

// TestPayloadIdentifiersTolerant: the identifiers of any decoded JSON,
// however far from an EPCIS event, are read without a panic.
func TestPayloadIdentifiersTolerant(t *testing.T) {
	spec := dscsa.Spec()
	for _, raw := range []string{
		`{}`, `{"epcList":null}`, `{"epcList":[1,{"a":2},null,"",[]]}`, `{"parentID":7,"childEPCs":"x"}`,
		`{"epcList":["urn:epc:id:sgtin:","urn:epc:id:sgtin:1.2.3","urn:epc:id:sscc:.","https://","https://h/01","https://h/01/","https://h/00/","https://h/01/x/21/%zz/10"]}`,
		`{"quantityList":[{"epcClass":5},{"epcClass":"urn:epc:class:lgtin:"},"x"],"ilmd":{"cbvmda:lotNumber":{"@value":5}}}`,
		`{"ilmd":[],"childQuantityList":{}}`,
	} {
		var doc domain.Doc
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			t.Fatal(err)
		}
		_ = spec.Search.Identifiers(doc)
	}
}

// BenchmarkPayloadIdentifiers reads the identifiers of a pallet shipment
// as published (3 SSCCs, bizTransactions, sources: the decoded JSON of
// valid/shipping-pallets-sscc.json) and of one of 1,000 items (SGTIN URNs
// and Digital Links) and 2 SSCCs.
func BenchmarkPayloadIdentifiers(b *testing.B) {
	example, err := gate.Decode(fileData(b, "valid/shipping-pallets-sscc.json"))
	if err != nil {
		b.Fatal(err)
	}
	list := []any{"urn:epc:id:sscc:0304094.0000001234", "https://id.gs1.org/00/303040940000098716"}
	for i := range 1000 {
		if i%2 == 0 {
			list = append(list, "urn:epc:id:sgtin:0304094.088820.SN-"+strconv.Itoa(i))
		} else {
			list = append(list, "https://id.gs1.org/01/00304094888200/21/SN%26"+strconv.Itoa(i))
		}
	}
	big := domain.Doc{"type": "ObjectEvent", "epcList": list, "ilmd": map[string]any{"cbvmda:lotNumber": "L&24<B>017"}}
	spec := dscsa.Spec()
	for _, bc := range []struct {
		name  string
		doc   domain.Doc
		sscc  int
		items int
	}{{"shipping-pallets-sscc", example, 3, 0}, {"1000-items", big, 2, 1000}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ids := spec.Search.Identifiers(bc.doc)
				if len(ids["sgtin"]) != bc.items || len(ids["sscc"]) != bc.sscc {
					b.Fatalf("identifiers %v", ids)
				}
			}
		})
	}
}

// BenchmarkMatchPayload matches a GTIN + serial search against a chain
// holding the identifiers of a 48-case pallet shipment (a miss: every
// value is looked at).
func BenchmarkMatchPayload(b *testing.B) {
	list := []any{"urn:epc:id:sscc:0304094.0000001234"}
	for i := range 48 {
		list = append(list, "urn:epc:id:sgtin:0304094.588820.CASE-"+strconv.Itoa(i))
	}
	spec := dscsa.Spec()
	c := domain.Chain{OrderingKey: "003040940000012346", PayloadIdentifiers: spec.Search.Identifiers(domain.Doc{"epcList": list})}
	m, err := spec.Search.Parse(map[string]string{"gtin": "50304094888205", "serial": "CASE-999"})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if m(c) {
			b.Fatal("matched")
		}
	}
}

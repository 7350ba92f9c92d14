package eventhash_test

import (
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/domain/dscsa/eventhash"
)

// shipping is a DSCSA shipping event with every kind of field the
// algorithm orders: lists, typed lists, locations, ILMD-free extensions.
const shipping = `{
  "@context": ["https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld",
    {"example": "https://ns.example.com/epcis/"}],
  "type": "ObjectEvent",
  "eventTime": "2024-03-12T09:15:00.118-05:00",
  "eventTimeZoneOffset": "-05:00",
  "epcList": [
    "urn:epc:id:sgtin:0614141.012345.10016550749981",
    "urn:epc:id:sgtin:0614141.012345.10016550749982"
  ],
  "action": "OBSERVE",
  "bizStep": "shipping",
  "disposition": "in_transit",
  "readPoint": {"id": "urn:epc:id:sgln:0614141.00777.0"},
  "bizTransactionList": [
    {"type": "po", "bizTransaction": "urn:epcglobal:cbv:bt:0860001234565:PO-778120"},
    {"type": "desadv", "bizTransaction": "urn:epcglobal:cbv:bt:0614141000005:ASN-20240312-0042"}
  ],
  "sourceList": [{"type": "owning_party", "source": "urn:epc:id:pgln:0614141.00000"}],
  "destinationList": [{"type": "owning_party", "destination": "urn:epc:id:pgln:0860001.23456"}],
  "example:shipTo": {"example:name": "Müller & Söhne <Großhandel>", "example:dock": "7"}
}`

func TestPreHashOfShipping(t *testing.T) {
	want := "eventType=ObjectEvent" +
		"eventTime=2024-03-12T14:15:00.118ZeventTimeZoneOffset=-05:00" +
		"epcListepc=https://id.gs1.org/01/00614141123452/21/10016550749981epc=https://id.gs1.org/01/00614141123452/21/10016550749982" +
		"action=OBSERVEbizStep=https://ref.gs1.org/cbv/BizStep-shippingdisposition=https://ref.gs1.org/cbv/Disp-in_transit" +
		"readPointid=https://id.gs1.org/414/0614141007776" +
		"bizTransactionListtype=https://ref.gs1.org/cbv/BTT-desadvbizTransaction=urn:epcglobal:cbv:bt:0614141000005:ASN-20240312-0042" +
		"type=https://ref.gs1.org/cbv/BTT-pobizTransaction=urn:epcglobal:cbv:bt:0860001234565:PO-778120" +
		"destinationListtype=https://ref.gs1.org/cbv/SDT-owning_partydestination=https://id.gs1.org/417/0860001234565" +
		"sourceListtype=https://ref.gs1.org/cbv/SDT-owning_partysource=https://id.gs1.org/417/0614141000005" +
		"{https://ns.example.com/epcis/}shipTo{https://ns.example.com/epcis/}dock=7{https://ns.example.com/epcis/}name=Müller & Söhne <Großhandel>"
	if got := eventhash.PreHash(decode(t, []byte(shipping)), nil); got != want {
		t.Fatalf("pre-hash\n got %s\nwant %s", got, want)
	}
	id := eventhash.ID(decode(t, []byte(shipping)), nil)
	if !strings.HasPrefix(id, "ni:///sha-256;") || !strings.HasSuffix(id, "?ver=CBV2.0") || len(id) != len("ni:///sha-256;?ver=CBV2.0")+64 {
		t.Fatalf("ID = %q", id)
	}
}

// TestSameEvent: the algorithm's text names what must not change the ID
// (representation) and what must (content).
func TestSameEvent(t *testing.T) {
	base := eventhash.ID(decode(t, []byte(shipping)), nil)
	r := strings.NewReplacer
	tests := []struct {
		name string
		edit *strings.Replacer
		same bool
	}{
		{"EPCs reordered", r(`"urn:epc:id:sgtin:0614141.012345.10016550749981",
    "urn:epc:id:sgtin:0614141.012345.10016550749982"`, `"urn:epc:id:sgtin:0614141.012345.10016550749982", "urn:epc:id:sgtin:0614141.012345.10016550749981"`), true},
		{"business transactions reordered", r(`{"type": "po", "bizTransaction": "urn:epcglobal:cbv:bt:0860001234565:PO-778120"},
    {"type": "desadv", "bizTransaction": "urn:epcglobal:cbv:bt:0614141000005:ASN-20240312-0042"}`,
			`{"bizTransaction": "urn:epcglobal:cbv:bt:0614141000005:ASN-20240312-0042", "type": "desadv"}, {"type": "po", "bizTransaction": "urn:epcglobal:cbv:bt:0860001234565:PO-778120"}`), true},
		{"members reordered", r(`"action": "OBSERVE",
  "bizStep": "shipping",`, `"bizStep": "shipping", "action": "OBSERVE",`), true},
		{"other namespace prefix", r(`"example"`, `"ex"`, `"example:`, `"ex:`), true},
		{"same instant in UTC", r(`"2024-03-12T09:15:00.118-05:00"`, `"2024-03-12T14:15:00.118Z"`), true},
		{"same instant at +01:00 with more digits", r(`"2024-03-12T09:15:00.118-05:00"`, `"2024-03-12T15:15:00.11800+01:00"`), true},
		{"same instant as local time in eventTimeZoneOffset", r(`"2024-03-12T09:15:00.118-05:00"`, `"2024-03-12T09:15:00.118"`), true},
		{"sub-millisecond rounded half up", r(`"2024-03-12T09:15:00.118-05:00"`, `"2024-03-12T09:15:00.1175-05:00"`), true},
		{"CBV URNs", r(`"shipping"`, `"urn:epcglobal:cbv:bizstep:shipping"`, `"in_transit"`, `"urn:epcglobal:cbv:disp:in_transit"`, `"po"`, `"urn:epcglobal:cbv:btt:po"`), true},
		{"CBV web URIs", r(`"shipping"`, `"https://ref.gs1.org/cbv/BizStep-shipping"`, `"in_transit"`, `"https://ref.gs1.org/cbv/Disp-in_transit"`), true},
		{"compact IRIs of the EPCIS context's cbv prefix", r(`"in_transit"`, `"cbv:Disp-in_transit"`, `"shipping"`, `"cbv:BizStep-shipping"`), true},
		{"compact IRIs of a declared prefix", r(`{"example": "https://ns.example.com/epcis/"}`, `{"example": "https://ns.example.com/epcis/", "c": "https://ref.gs1.org/cbv/"}`, `"in_transit"`, `"c:Disp-in_transit"`), true},
		{"EPC as Digital Link on another host with a query", r(`"urn:epc:id:sgtin:0614141.012345.10016550749981"`, `"https://dl.example.com/01/00614141123452/10/A24B017/21/10016550749981?linkType=all"`), true},
		{"location as Digital Link", r(`"urn:epc:id:sgln:0614141.00777.0"`, `"https://id.gs1.org/414/0614141007776"`), true},
		{"eventID, recordTime and errorDeclaration ignored", r(`"action"`, `"eventID": "urn:uuid:0b7f6a52-9e0c-4c8f-a7d2-2d7e4f6c9a10", "recordTime": "2024-03-12T15:00:00Z", "errorDeclaration": {"declarationTime": "2024-03-13T00:00:00Z"}, "action"`), true},
		{"whitespace around values", r(`"OBSERVE"`, `"  OBSERVE "`), true},
		{"another time-zone offset field", r(`"eventTimeZoneOffset": "-05:00"`, `"eventTimeZoneOffset": "-06:00"`), false},
		{"one millisecond later", r(`.118-05:00`, `.119-05:00`), false},
		{"another serial", r(`10016550749982"`, `10016550749983"`), false},
		{"an EPC fewer", r(`"urn:epc:id:sgtin:0614141.012345.10016550749981",`, ``), false},
		{"another namespace", r(`"https://ns.example.com/epcis/"`, `"https://ns.example.org/epcis/"`), false},
		{"an extension value", r(`"7"`, `"8"`), false},
		{"an extension added", r(`"action"`, `"example:seal": "S-1", "action"`), false},
		{"another business transaction type", r(`"po"`, `"inv"`), false},
		{"source and destination swapped", r(`"source": "urn:epc:id:pgln:0614141.00000"`, `"source": "urn:epc:id:pgln:0860001.23456"`,
			`"destination": "urn:epc:id:pgln:0860001.23456"`, `"destination": "urn:epc:id:pgln:0614141.00000"`), false},
		{"another action", r(`"OBSERVE"`, `"ADD"`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := tt.edit.Replace(shipping)
			if doc == shipping {
				t.Fatal("edit changed nothing")
			}
			got := eventhash.ID(decode(t, []byte(doc)), nil)
			if (got == base) != tt.same {
				t.Errorf("same ID = %v, want %v\n pre-hash %s\n     base %s", got == base, tt.same,
					eventhash.PreHash(decode(t, []byte(doc)), nil), eventhash.PreHash(decode(t, []byte(shipping)), nil))
			}
		})
	}
}

// TestQuantities: numbers lose trailing zeros, whether JSON numbers or
// strings (the algorithm's rule 6).
func TestQuantities(t *testing.T) {
	ev := func(q string) string {
		return eventhash.PreHash(decode(t, []byte(`{"type":"ObjectEvent","action":"OBSERVE","quantityList":[{"epcClass":"urn:epc:class:lgtin:0614141.012345.A24B017","quantity":`+q+`,"uom":"KGM"}]}`)), nil)
	}
	want := "eventType=ObjectEventquantityListquantityElementepcClass=https://id.gs1.org/01/00614141123452/10/A24B017quantity=600uom=KGMaction=OBSERVE"
	for _, q := range []string{`600`, `600.0`, `"600.00"`, `6e2`, `"+600"`} {
		if got := ev(q); got != want {
			t.Errorf("quantity %s: pre-hash %s, want %s", q, got, want)
		}
	}
	if got := ev(`0.3430`); !strings.Contains(got, "quantity=0.343uom") {
		t.Errorf("quantity 0.3430: %s", got)
	}
}

func TestDigitalLink(t *testing.T) {
	tests := []struct{ in, want string }{
		{"urn:epc:id:sgtin:0614141.112345.400", "https://id.gs1.org/01/10614141123459/21/400"},
		{"urn:epc:id:sgtin:0614141.012345.A%2FB(1)", "https://id.gs1.org/01/00614141123452/21/A%2FB%281%29"},
		{"URN:EPC:ID:SSCC:0614141.1234567890", "https://id.gs1.org/00/106141412345678908"},
		{"urn:epc:id:sgln:0614141.00777.0", "https://id.gs1.org/414/0614141007776"},
		{"urn:epc:id:sgln:0614141.00777.Dock-7", "https://id.gs1.org/414/0614141007776/254/Dock-7"},
		{"urn:epc:id:pgln:0860001.23456", "https://id.gs1.org/417/0860001234565"},
		{"urn:epc:class:lgtin:0614141.012345.L1", "https://id.gs1.org/01/00614141123452/10/L1"},
		{"urn:epc:idpat:sgtin:0614141.012345.*", "https://id.gs1.org/01/00614141123452"},
		{"https://example.com/gtin/614141123452/lot/L1/ser/S1?x=1", "https://id.gs1.org/01/00614141123452/21/S1"},
		{"https://id.gs1.org/01/00614141123452/22/V2/10/L1", "https://id.gs1.org/01/00614141123452/10/L1"},
		{"http://h.example/prefix/414/0614141007776/254/7#frag", "https://id.gs1.org/414/0614141007776/254/7"},
	}
	for _, tt := range tests {
		if got, ok := eventhash.DigitalLink(tt.in); !ok || got != tt.want {
			t.Errorf("DigitalLink(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
	for _, in := range []string{"urn:epcglobal:cbv:bt:0614141000005:ASN-1", "geo:47.5,11.1", "https://example.com/po/12345", "urn:epc:id:sgtin:0614141.12345.1"} {
		if got, ok := eventhash.DigitalLink(in); ok {
			t.Errorf("DigitalLink(%q) = %q, want not a GS1 key", in, got)
		}
	}
}

// FuzzID: any JSON object has an ID and an exact content digest, the same
// each time, and reordering its members does not change them (encoding/json map order is random, so
// two decodes already differ in iteration order).
func FuzzID(f *testing.F) {
	f.Add([]byte(shipping))
	f.Add([]byte(`{"type":"AggregationEvent","parentID":"urn:epc:id:sscc:0614141.1234567890","childEPCs":[],"sensorElementList":[{"sensorReport":[{"type":"Temperature","value":"2.50"}]}]}`))
	f.Add([]byte(`{"type":1,"epcList":[null,{},[]],"readPoint":"x","ilmd":{"a:b":[1,"2"]},"@context":[{"a":"urn:x:"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, ok := tryDecode(data)
		if !ok {
			return
		}
		id, exact := eventhash.ID(doc, nil), eventhash.ExactDigest(doc, nil)
		again, _ := tryDecode(data)
		if id2 := eventhash.ID(again, nil); id2 != id {
			t.Fatalf("ID %s, then %s", id, id2)
		}
		if exact2 := eventhash.ExactDigest(again, nil); exact2 != exact {
			t.Fatalf("exact content digest %s, then %s", exact, exact2)
		}
	})
}

// BenchmarkID measures the event hash ID of a typical shipping event.
func BenchmarkID(b *testing.B) {
	ev := decode(b, []byte(shipping))
	b.ReportAllocs()
	for b.Loop() {
		_ = eventhash.ID(ev, nil)
	}
}

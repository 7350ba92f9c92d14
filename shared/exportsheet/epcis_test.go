package exportsheet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
)

// readEvents reads the events of an EPCIS document file as the validator
// does (package document: XML mapped to JSON, @context spliced in).
func readEvents(tb testing.TB, path string) [][]byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	doc, err := document.Read(b)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return doc.Events
}

// exportFixtures are the events of the test shipments: EPCIS 1.2 XML (with
// an SBDH, CBV 1.2 URNs of every vocabulary, an error declaration),
// EPCIS 2.0 XML (sensor data as attribute text, persistent dispositions),
// EPCIS 2.0 JSON-LD (web URIs and compact IRIs, a local eventTime, a
// missing eventTimeZoneOffset), and the domain's own shipments, with the
// trade's text (& < > quotes, Müller & Söhne, 陈伟).
var exportFixtures = []string{
	"testdata/returns-1.2.xml", "testdata/sensors-2.0.xml", "testdata/forms-2.0.jsonld",
	"../domain/dscsa/document/testdata/shipment-1.2.xml", "../domain/dscsa/document/testdata/shipment-2.0.xml",
	"../domain/dscsa/document/testdata/shipment.json",
}

// TestWriteEPCIS: the DSCSA chains of an export, written as one EPCIS 2.0
// JSON document, pass the EPCIS 2.0 JSON Schema's rules (epcis2.schema.json
// and, independently of it, the vocabulary forms checked here): every CBV
// 1.2 URN of the XML events is its bare word, every other value is kept
// (read back member by member), an event already in EPCIS 2.0 form is
// written byte for byte; chains of other domains, a whole document that
// could not be read and a payload that is no event are left out and
// counted, an event that cannot be EPCIS 2.0 is left out and named with
// its code.
func TestWriteEPCIS(t *testing.T) {
	var events [][]byte
	for _, f := range exportFixtures {
		events = append(events, readEvents(t, f)...)
	}
	var b EPCISBuilder
	for i, ev := range events {
		b.Add(chainOf(t, i, "dscsa", "shipping", string(ev)))
	}
	b.Add(chainOf(t, 100, "pharmacy", "dispense", `{"transaction_id":"TX-1"}`))
	b.Add(chainOf(t, 101, "dscsa", "document", `{"type":"EPCISDocument","epcisBody":`))
	b.Add(chainOf(t, 102, "dscsa", "shipping", `[1,2]`))
	misspelled := bytes.Replace(events[1], []byte("urn:epcglobal:cbv:bizstep:shipping"), []byte("urn:epcglobal:cbv:bizstep:shiping"), 1)
	b.Add(chainOf(t, 103, "dscsa", "shipping", string(misspelled)))
	if b.Events() != len(events) || b.Skipped != 3 || len(b.Refused) != 1 {
		t.Fatalf("%d events of %d, %d skipped, refused %v", b.Events(), len(events), b.Skipped, b.Refused)
	}
	if r := b.Refused[0]; codes.Of(r.Err) != dscsa.InvalidBizStep || !errors.Is(r.Err, ErrNotEPCIS20) ||
		r.DLQID != chainOf(t, 103, "dscsa", "shipping", "{}").DLQID || strings.Contains(r.Err.Error(), "shiping") {
		t.Errorf("refusal %s: %v (code %s)", r.DLQID, r.Err, codes.Of(r.Err))
	}
	var out bytes.Buffer
	if err := b.WriteEPCIS(&out, time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out.Bytes(), []byte(`Müller & Söhne <Großhandel> \"Nord\"`)) || !bytes.Contains(out.Bytes(), []byte("陈伟")) {
		t.Errorf("the trade's text is not written as itself:\n%s", out.Bytes())
	}

	t.Run("schema", func(t *testing.T) {
		if err := CheckEPCIS(out.Bytes()); err != nil {
			t.Fatalf("%v\n%s", err, out.Bytes())
		}
		if err := CheckEPCIS(bytes.Replace(out.Bytes(), []byte(`"bizStep":"shipping"`), []byte(`"bizStep":"urn:epcglobal:cbv:bizstep:shipping"`), 1)); codes.Of(err) != dscsa.InvalidBizStep {
			t.Errorf("a CBV 1.2 URN passes CheckEPCIS: %v", err)
		}
	})

	got, err := document.Read(out.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, out.Bytes())
	}
	if len(got.Events) != len(events) || got.Created.IsZero() {
		t.Fatalf("%d events read back, info %+v", len(got.Events), got.Info)
	}
	for i := range events {
		t.Run(fmt.Sprintf("event %d", i), func(t *testing.T) {
			in, outEv := flatten(t, events[i]), flatten(t, got.Events[i])
			checkForms(t, outEv)
			for path, v := range in {
				w, ok := outEv[path]
				if !ok {
					t.Errorf("%s (%q) was dropped", path, v)
					continue
				}
				if w != v && conversions[v] != w && !(strings.HasSuffix(path, "/eventTime") && w == v+in["/eventTimeZoneOffset"]) {
					t.Errorf("%s: %q became %q", path, v, w)
				}
			}
			for path, w := range outEv {
				if _, ok := in[path]; !ok && !(path == "/eventTimeZoneOffset" && strings.HasPrefix(w, "+")) {
					t.Errorf("%s (%q) was added", path, w)
				}
			}
			if !changes(in) && !bytes.HasSuffix(got.Events[i], bytes.TrimPrefix(events[i], []byte("{"))) {
				t.Errorf("an event in EPCIS 2.0 form was not kept byte for byte:\n got %s\nwant %s", got.Events[i], events[i])
			}
		})
	}
}

// conversions are the value changes the export makes: CBV 1.2 URNs, CBV
// 2.0 web URIs and compact IRIs to bare words, GS1 web vocabulary terms,
// XML attribute text to JSON numbers (the same decimal) and booleans.
var conversions = map[string]string{
	"urn:epcglobal:cbv:bizstep:commissioning":      "commissioning",
	"urn:epcglobal:cbv:bizstep:shipping":           "shipping",
	"urn:epcglobal:cbv:bizstep:receiving":          "receiving",
	"urn:epcglobal:cbv:bizstep:decommissioning":    "decommissioning",
	"urn:epcglobal:cbv:bizstep:packing":            "packing",
	"urn:epcglobal:cbv:bizstep:unpacking":          "unpacking",
	"urn:epcglobal:cbv:bizstep:inspecting":         "inspecting",
	"https://ref.gs1.org/cbv/BizStep-shipping":     "shipping",
	"urn:epcglobal:cbv:disp:active":                "active",
	"urn:epcglobal:cbv:disp:in_transit":            "in_transit",
	"urn:epcglobal:cbv:disp:in_progress":           "in_progress",
	"urn:epcglobal:cbv:disp:inactive":              "inactive",
	"urn:epcglobal:cbv:disp:sellable_accessible":   "sellable_accessible",
	"urn:epcglobal:cbv:disp:completeness_inferred": "completeness_inferred",
	"urn:epcglobal:cbv:disp:completeness_verified": "completeness_verified",
	"cbv:Disp-in_transit":                          "in_transit",
	"urn:epcglobal:cbv:btt:po":                     "po",
	"urn:epcglobal:cbv:btt:desadv":                 "desadv",
	"urn:epcglobal:cbv:btt:inv":                    "inv",
	"urn:epcglobal:cbv:btt:recadv":                 "recadv",
	"https://ref.gs1.org/cbv/BTT-po":               "po",
	"urn:epcglobal:cbv:sdt:owning_party":           "owning_party",
	"urn:epcglobal:cbv:sdt:possessing_party":       "possessing_party",
	"urn:epcglobal:cbv:sdt:location":               "location",
	"cbv:SDT-owning_party":                         "owning_party",
	"https://ref.gs1.org/cbv/SDT-possessing_party": "possessing_party",
	"urn:epcglobal:cbv:er:incorrect_data":          "incorrect_data",
	"gs1:Temperature":                              "Temperature",
	"gs1:RelativeHumidity":                         "RelativeHumidity",
	"gs1:Length":                                   "Length",
	"https://gs1.org/voc/Molar_concentration":      "gs1:Molar_concentration",
	"gs1:ALARM_CONDITION":                          "ALARM_CONDITION",
	"https://gs1.org/voc/ERROR_CONDITION":          "ERROR_CONDITION",
	"cbv:Comp-latitude":                            "latitude",
	// The same values as the XML reader writes them now: web URIs.
	"https://gs1.org/voc/Temperature":       "Temperature",
	"https://gs1.org/voc/RelativeHumidity":  "RelativeHumidity",
	"https://gs1.org/voc/Length":            "Length",
	"https://gs1.org/voc/ALARM_CONDITION":   "ALARM_CONDITION",
	"https://ref.gs1.org/cbv/Comp-latitude": "latitude",
	"+7.50":                                 "7.5",
	".5":                                    "0.5",
	"1":                                     "true",
}

// changes reports whether an event's values include one the export
// converts.
func changes(flat map[string]string) bool {
	if _, ok := flat["/eventTimeZoneOffset"]; !ok {
		return true
	}
	for p, v := range flat {
		if _, ok := conversions[v]; ok || strings.HasPrefix(v, "urn:epcglobal:cbv:") && !strings.HasSuffix(p, "/bizTransaction") {
			return true
		}
		if strings.Contains(p, "/sensorReport/") {
			return true // attribute text
		}
		if strings.HasSuffix(p, "/eventTime") && len(v) > 10 && !strings.ContainsAny(v[10:], "Z+-") {
			return true
		}
	}
	return false
}

// flatten maps an event to its leaves: a JSON pointer of member names and
// indexes to the value as text (a number its literal).
func flatten(tb testing.TB, data []byte) map[string]string {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		tb.Fatalf("%v: %s", err, data)
	}
	out := map[string]string{}
	var walk func(p string, v any)
	walk = func(p string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(p+"/"+k, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s/%d", p, i), e)
			}
		default:
			out[p] = fmt.Sprint(x)
		}
	}
	walk("", v)
	return out
}

// cbvWords are CBV 2.0 words the fixtures use, as GS1's EPCIS 2.0 JSON
// Schema lists them (written here apart from epcis2.schema.json).
var cbvWords = map[string][]string{
	"bizStep":     {"commissioning", "shipping", "receiving", "decommissioning", "packing", "unpacking", "inspecting"},
	"disposition": {"active", "in_transit", "in_progress", "inactive", "sellable_accessible", "completeness_inferred", "completeness_verified"},
	"type":        {"po", "desadv", "inv", "recadv", "owning_party", "possessing_party", "location"},
	"reason":      {"incorrect_data", "did_not_occur"},
}

// checkForms checks an exported event's vocabulary, identifier and time
// members the way GS1's EPCIS 2.0 JSON Schema does, without
// epcis2.schema.json: a CBV term is a CBV word or a URI that is no CBV
// URN; EPCs and locations are URIs; times carry an offset.
func checkForms(tb testing.TB, flat map[string]string) {
	tb.Helper()
	for p, v := range flat {
		parts := strings.Split(p, "/")
		last := parts[len(parts)-1]
		if isIndex(last) {
			last = parts[len(parts)-2]
		}
		switch {
		case last == "bizStep" || last == "disposition" || last == "set" || last == "unset" ||
			(last == "type" && len(parts) > 2 && !strings.Contains(p, "sensor")) || last == "reason":
			key := map[string]string{"set": "disposition", "unset": "disposition"}[last]
			if key == "" {
				key = last
			}
			if !slices.Contains(cbvWords[key], v) && (strings.HasPrefix(v, "urn:epcglobal:cbv") || !strings.Contains(v, ":")) {
				tb.Errorf("%s = %q: not a CBV 2.0 word nor a user vocabulary URI", p, v)
			}
		case strings.Contains(p, "/sensorReport/") && (last == "type" || last == "exception"):
			if strings.HasPrefix(v, "https://gs1.org/voc/") || strings.HasPrefix(v, "gs1:") && v != "gs1:Molar_concentration" {
				tb.Errorf("%s = %q: a GS1 web vocabulary term is written bare", p, v)
			}
		case last == "epcList" || last == "childEPCs" || last == "parentID" || last == "id":
			if !strings.HasPrefix(v, "urn:epc:id:") && !strings.HasPrefix(v, "https://id.gs1.org/") {
				tb.Errorf("%s = %q: not an EPC URN or GS1 Digital Link", p, v)
			}
		case last == "eventTime" || last == "declarationTime" || last == "time":
			if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
				tb.Errorf("%s = %q: not an RFC 3339 date-time with an offset", p, v)
			}
		case last == "eventTimeZoneOffset":
			if _, err := time.Parse("-07:00", v); err != nil || len(v) != 6 {
				tb.Errorf("%s = %q: not ±hh:mm", p, v)
			}
		case last == "value" || last == "minValue" || last == "maxValue" || last == "meanValue" || last == "quantity":
			var n json.Number
			if json.Unmarshal([]byte(v), &n) != nil {
				tb.Errorf("%s = %q: not a number", p, v)
			}
		}
	}
	if _, ok := flat["/eventTimeZoneOffset"]; !ok {
		tb.Errorf("no eventTimeZoneOffset")
	}
}

func isIndex(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// TestEPCISConvert: one event at a time, what the export writes or why it
// refuses it (the code of the member that fails, never its value).
func TestEPCISConvert(t *testing.T) {
	x, err := newEPCIS20()
	if err != nil {
		t.Fatal(err)
	}
	const head = `{"type":"ObjectEvent","eventTime":"2025-03-12T08:00:00.5Z","eventTimeZoneOffset":"+01:00","epcList":["urn:epc:id:sgtin:4012345.011111.1"],"action":"OBSERVE"`
	for _, tc := range []struct {
		name, in string
		want     string     // the event written ("" when refused)
		code     codes.Code // the refusal's code
	}{
		{"already EPCIS 2.0, kept byte for byte", head + `,"bizStep":"shipping","example:x":"Müller \u0026 Söhne <GmbH>"}` + "\n",
			head + `,"bizStep":"shipping","example:x":"Müller \u0026 Söhne <GmbH>"}`, ""},
		{"CBV 1.2 URNs", head + `,"bizStep":"urn:epcglobal:cbv:bizstep:shipping","disposition":"urn:epcglobal:cbv:disp:in_transit",` +
			`"bizTransactionList":[{"type":"urn:epcglobal:cbv:btt:desadv","bizTransaction":"urn:epcglobal:cbv:bt:4012345000009:A&B"}],` +
			`"sourceList":[{"type":"urn:epcglobal:cbv:sdt:owning_party","source":"urn:epc:id:pgln:4012345.00000"}],` +
			`"errorDeclaration":{"declarationTime":"2025-03-12T09:00:00Z","reason":"urn:epcglobal:cbv:er:did_not_occur"}}`,
			head + `,"bizStep":"shipping","disposition":"in_transit",` +
				`"bizTransactionList":[{"type":"desadv","bizTransaction":"urn:epcglobal:cbv:bt:4012345000009:A&B"}],` +
				`"sourceList":[{"type":"owning_party","source":"urn:epc:id:pgln:4012345.00000"}],` +
				`"errorDeclaration":{"declarationTime":"2025-03-12T09:00:00Z","reason":"did_not_occur"}}`, ""},
		{"URN case of the scheme ignored", head + `,"bizStep":"URN:EPCGLOBAL:CBV:BIZSTEP:receiving"}`, head + `,"bizStep":"receiving"}`, ""},
		{"user vocabulary kept", head + `,"bizStep":"urn:example:bizstep:relabelling","disposition":"https://ns.example.com/disp/held"}`,
			head + `,"bizStep":"urn:example:bizstep:relabelling","disposition":"https://ns.example.com/disp/held"}`, ""},
		{"local eventTime takes eventTimeZoneOffset", `{"type":"ObjectEvent","eventTime":"2025-03-12T08:00:00","eventTimeZoneOffset":"-05:00","epcList":[],"action":"OBSERVE"}`,
			`{"type":"ObjectEvent","eventTime":"2025-03-12T08:00:00-05:00","eventTimeZoneOffset":"-05:00","epcList":[],"action":"OBSERVE"}`, ""},
		{"eventTimeZoneOffset from eventTime", `{"type":"AggregationEvent","eventTime":"2025-03-12T08:00:00Z","parentID":"urn:epc:id:sscc:4012345.0000000042","action":"DELETE"}`,
			`{"type":"AggregationEvent","eventTime":"2025-03-12T08:00:00Z","parentID":"urn:epc:id:sscc:4012345.0000000042","action":"DELETE","eventTimeZoneOffset":"+00:00"}`, ""},
		{"quantity text", head + `,"quantityList":[{"epcClass":"urn:epc:class:lgtin:4012345.011111.L1","quantity":"12.50","uom":"KGM"}]}`,
			head + `,"quantityList":[{"epcClass":"urn:epc:class:lgtin:4012345.011111.L1","quantity":12.50,"uom":"KGM"}]}`, ""},
		{"XML quantity without a value (xsi:nil)", head + `,"quantityList":[{"epcClass":"urn:epc:class:lgtin:4012345.011111.L1","quantity":""}]}`,
			head + `,"quantityList":[{"epcClass":"urn:epc:class:lgtin:4012345.011111.L1"}]}`, ""},
		{"persistentDisposition on an aggregation (GS1's schema takes it on object and transformation events only)",
			`{"type":"AggregationEvent","eventTime":"2025-03-12T08:00:00Z","eventTimeZoneOffset":"+01:00","parentID":"urn:epc:id:sscc:4012345.0000000042","childEPCs":["urn:epc:id:sgtin:4012345.011111.1"],"action":"ADD",` +
				`"persistentDisposition":{"set":["urn:epcglobal:cbv:disp:completeness_inferred"]}}`, "", codes.SchemaValidation},
		{"misspelled CBV URN", head + `,"bizStep":"urn:epcglobal:cbv:bizstep:shiping"}`, "", dscsa.InvalidBizStep},
		{"bare word not CBV", head + `,"bizStep":"shiping"}`, "", dscsa.InvalidBizStep},
		{"misspelled disposition URN", head + `,"disposition":"urn:epcglobal:cbv:disp:in_transt"}`, "", codes.SchemaValidation},
		{"EPC not a URI", `{"type":"ObjectEvent","eventTime":"2025-03-12T08:00:00Z","eventTimeZoneOffset":"+01:00","epcList":["0614141.107346 2018"],"action":"OBSERVE"}`, "", dscsa.InvalidEPC},
		{"identifiers with text a URI cannot hold are percent-encoded",
			`{"type":"ObjectEvent","eventTime":"2025-03-12T08:00:00Z","eventTimeZoneOffset":"+01:00","epcList":["https://id.gs1.org/01/04012345111118/21/7?x=<y>","urn:epc:id:sgtin:4012345.011111.R&D%2F\"Ä\" 5%"],` +
				`"action":"OBSERVE","bizTransactionList":[{"type":"po","bizTransaction":"urn:epcglobal:cbv:bt:0860001234565:PO-2026-11-0042&A<1>"}],"example:note":"<kept> \"as is\""}`,
			`{"type":"ObjectEvent","eventTime":"2025-03-12T08:00:00Z","eventTimeZoneOffset":"+01:00","epcList":["https://id.gs1.org/01/04012345111118/21/7?x=%3Cy%3E","urn:epc:id:sgtin:4012345.011111.R&D%2F%22%C3%84%22%205%25"],` +
				`"action":"OBSERVE","bizTransactionList":[{"type":"po","bizTransaction":"urn:epcglobal:cbv:bt:0860001234565:PO-2026-11-0042&A%3C1%3E"}],"example:note":"<kept> \"as is\""}`, ""},
		{"no offset anywhere", `{"type":"ObjectEvent","eventTime":"2025-03-12T08:00:00","epcList":[],"action":"OBSERVE"}`, "", codes.UnparseableEventTime},
		{"offset out of range", `{"type":"ObjectEvent","eventTime":"2025-03-12T08:00:00Z","eventTimeZoneOffset":"+15:00","epcList":[],"action":"OBSERVE"}`, "", codes.UnparseableEventTime},
		{"sensor value not a number", head + `,"sensorElementList":[{"sensorReport":[{"type":"Temperature","value":"warm"}]}]}`, "", codes.SchemaValidation},
		{"ilmd on an observation", head + `,"ilmd":{"cbvmda:lotNumber":"L1"}}`, "", codes.SchemaValidation},
		{"extension name not a URI", head + `,"my_ext:note":"x"}`, "", codes.SchemaValidation},
		{"no action", `{"type":"ObjectEvent","eventTime":"2025-03-12T08:00:00Z","eventTimeZoneOffset":"+01:00","epcList":[]}`, "", codes.SchemaValidation},
		{"repeated member", head + `,"bizStep":"shipping","bizStep":"receiving"}`, "", codes.MalformedJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := x.convert([]byte(tc.in))
			if tc.code != "" {
				if err == nil || codes.Of(err) != tc.code || !errors.Is(err, ErrNotEPCIS20) {
					t.Fatalf("convert = %s, %v (code %s); want a refusal %s", got, err, codes.Of(err), tc.code)
				}
				for _, secret := range []string{"shiping", "in_transt", "warm", "2018", "L1"} {
					if strings.Contains(tc.in, secret) && strings.Contains(err.Error(), secret) {
						t.Errorf("the refusal quotes the value %q: %v", secret, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("convert: %v", err)
			}
			if string(got) != tc.want {
				t.Errorf("convert:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestEPCISSchemaRefuses: the schema itself refuses what GS1's EPCIS 2.0
// JSON Schema refuses in a document (so that a converter bug cannot pass
// the tests above through a lax schema).
func TestEPCISSchemaRefuses(t *testing.T) {
	x, err := newEPCIS20()
	if err != nil {
		t.Fatal(err)
	}
	const ev = `{"type":"ObjectEvent","eventTime":"2025-03-12T08:00:00Z","eventTimeZoneOffset":"+01:00","epcList":["urn:epc:id:sgtin:4012345.011111.1"],"action":"OBSERVE"%s}`
	doc := func(head, event string) string {
		return `{"@context":["https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld"]` + head + `,"epcisBody":{"eventList":[` + event + `]}}`
	}
	const head = `,"type":"EPCISDocument","schemaVersion":"2.0","creationDate":"2025-03-12T08:00:00Z"`
	for _, tc := range []struct {
		name, doc string
		ok        bool
	}{
		{"valid", doc(head, fmt.Sprintf(ev, `,"bizStep":"shipping","disposition":"in_transit","example:x":"Müller & Söhne"`)), true},
		{"valid user vocabulary", doc(head, fmt.Sprintf(ev, `,"bizStep":"https://ref.gs1.org/cbv/BizStep-relabelling"`)), true},
		{"bizStep URN", doc(head, fmt.Sprintf(ev, `,"bizStep":"urn:epcglobal:cbv:bizstep:shipping"`)), false},
		{"disposition URN", doc(head, fmt.Sprintf(ev, `,"disposition":"urn:epcglobal:cbv:disp:in_transit"`)), false},
		{"btt URN", doc(head, fmt.Sprintf(ev, `,"bizTransactionList":[{"type":"urn:epcglobal:cbv:btt:po","bizTransaction":"urn:x:1"}]`)), false},
		{"sdt URN", doc(head, fmt.Sprintf(ev, `,"sourceList":[{"type":"urn:epcglobal:cbv:sdt:owning_party","source":"urn:x:1"}]`)), false},
		{"er URN", doc(head, fmt.Sprintf(ev, `,"errorDeclaration":{"declarationTime":"2025-03-12T08:00:00Z","reason":"urn:epcglobal:cbv:er:incorrect_data"}`)), false},
		{"ns.gs1.org URI", doc(head, fmt.Sprintf(ev, `,"bizStep":"https://ns.gs1.org/cbv/BizStep-shipping"`)), false},
		{"sensor type as GS1 web URI", doc(head, fmt.Sprintf(ev, `,"sensorElementList":[{"sensorReport":[{"type":"https://gs1.org/voc/Temperature"}]}]`)), false},
		{"sensor value as text", doc(head, fmt.Sprintf(ev, `,"sensorElementList":[{"sensorReport":[{"type":"Temperature","value":"4.5"}]}]`)), false},
		{"no eventTimeZoneOffset", doc(head, `{"type":"ObjectEvent","eventTime":"2025-03-12T08:00:00Z","epcList":[],"action":"OBSERVE"}`), false},
		{"eventTime without offset", doc(head, `{"type":"ObjectEvent","eventTime":"2025-03-12T08:00:00","eventTimeZoneOffset":"+01:00","epcList":[],"action":"OBSERVE"}`), false},
		{"EPC not a URI", doc(head, `{"type":"ObjectEvent","eventTime":"2025-03-12T08:00:00Z","eventTimeZoneOffset":"+01:00","epcList":["4012345.011111.1"],"action":"OBSERVE"}`), false},
		{"aggregation without children", doc(head, `{"type":"AggregationEvent","eventTime":"2025-03-12T08:00:00Z","eventTimeZoneOffset":"+01:00","parentID":"urn:epc:id:sscc:4012345.0000000042","action":"ADD"}`), false},
		{"no schemaVersion", doc(`,"type":"EPCISDocument","creationDate":"2025-03-12T08:00:00Z"`, fmt.Sprintf(ev, "")), false},
		{"no creationDate", doc(`,"type":"EPCISDocument","schemaVersion":"2.0"`, fmt.Sprintf(ev, "")), false},
		{"unknown document member", doc(head+`,"note":"x"`, fmt.Sprintf(ev, "")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v any
			dec := json.NewDecoder(strings.NewReader(tc.doc))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			err := x.document.Validate(v)
			if (err == nil) != tc.ok {
				t.Errorf("valid = %v, want %v: %v", err == nil, tc.ok, err)
			}
		})
	}
}

// TestEPCISValidExamples: every DSCSA event the gate takes (the schema
// examples the validator's tests commit) is written as EPCIS 2.0 JSON, so
// a valid event in quarantine for a transient failure always goes back to
// its partner.
func TestEPCISValidExamples(t *testing.T) {
	files, err := filepath.Glob("../../schemas/testdata/dscsa/valid/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	var b EPCISBuilder
	for i, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Add(chainOf(t, i, "dscsa", "shipping", string(data)))
	}
	for _, r := range b.Refused {
		t.Errorf("chain %s refused: %v", r.DLQID, r.Err)
	}
	if b.Events() != len(files) {
		t.Fatalf("%d of %d events written", b.Events(), len(files))
	}
}

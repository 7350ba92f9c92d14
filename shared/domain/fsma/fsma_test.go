package fsma_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/fsma"
	"github.com/deadletter/deadletter/shared/envelope"
)

// TestTestdata runs every example event through the gate: valid ones give
// a complete envelope, invalid ones the exact code their name starts with.
func TestTestdata(t *testing.T) {
	g := newGate(t)
	files := loadTestdata(t)
	nValid, nInvalid := 0, 0
	for _, f := range files {
		if f.valid {
			nValid++
		} else {
			nInvalid++
		}
		t.Run(f.name, func(t *testing.T) {
			env, err := g.Check(subjectFor(f.data), f.data)
			if f.valid {
				if err != nil {
					t.Fatalf("valid event rejected: %v", err)
				}
				checkEnvelope(t, env)
				return
			}
			if got := codes.Of(err); got != f.code {
				t.Fatalf("code = %q (%v), want %q", got, err, f.code)
			}
		})
	}
	if nValid < 15 || nInvalid < 25 {
		t.Errorf("testdata has %d valid and %d invalid events, want at least 15 and 25", nValid, nInvalid)
	}
}

// TestEveryCTEHasValidExample makes sure the examples cover every CTE type.
func TestEveryCTEHasValidExample(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range loadTestdata(t) {
		if f.valid {
			seen[strings.TrimPrefix(subjectFor(f.data), "events.fsma.")] = true
		}
	}
	for _, cte := range fsma.CTETypes() {
		if !seen[cte] {
			t.Errorf("no valid example of %s", cte)
		}
	}
}

// TestDetailsNeverQuoteValues checks that no error detail of an invalid
// example repeats a string value of its payload.
func TestDetailsNeverQuoteValues(t *testing.T) {
	g := newGate(t)
	ctes := map[string]bool{}
	for _, c := range fsma.CTETypes() {
		ctes[c] = true // closed vocabulary, not payload data
	}
	for _, f := range loadTestdata(t) {
		if f.valid {
			continue
		}
		t.Run(f.name, func(t *testing.T) {
			_, err := g.Check(subjectFor(f.data), f.data)
			detail := codes.DetailOf(err)
			var doc any
			if json.Unmarshal(f.data, &doc) != nil {
				return
			}
			for _, v := range stringLeaves(doc) {
				if len(v) >= 5 && !ctes[v] && strings.Contains(detail, v) {
					t.Errorf("detail %q quotes a payload value", detail)
				}
			}
		})
	}
}

// stringLeaves returns every string value in a decoded JSON value.
func stringLeaves(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, stringLeaves(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, e := range x {
			out = append(out, stringLeaves(e)...)
		}
		return out
	}
	return nil
}

// TestRequiredKDEs removes, from every valid example, each KDE its CTE
// requires in turn: the gate must answer MISSING_KDE naming it.
func TestRequiredKDEs(t *testing.T) {
	g := newGate(t)
	for _, f := range loadTestdata(t) {
		if !f.valid {
			continue
		}
		subject := subjectFor(f.data)
		cte := strings.TrimPrefix(subject, "events.fsma.")
		for _, kde := range fsma.RequiredKDEs(cte) {
			t.Run(f.name+"/"+kde, func(t *testing.T) {
				doc := decodeMap(t, f.data)
				for _, field := range strings.Split(kde, " or ") {
					delete(doc, field)
				}
				_, err := g.Check(subject, encode(t, doc))
				if codes.Of(err) != fsma.MissingKDE {
					t.Fatalf("code = %q (%v), want MISSING_KDE", codes.Of(err), err)
				}
				want := cte + " requires " + kde
				if got := codes.DetailOf(err); got != want {
					t.Errorf("detail = %q, want %q", got, want)
				}
			})
		}
	}
}

// TestChecks covers individual rules with named mutations of valid
// examples.
func TestChecks(t *testing.T) {
	g := newGate(t)
	set := func(kv ...any) func(map[string]any) {
		return func(doc map[string]any) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i+1] == nil {
					delete(doc, kv[i].(string))
				} else {
					doc[kv[i].(string)] = kv[i+1]
				}
			}
		}
	}
	gln := func(s string) map[string]any { return map[string]any{"gln": s} }
	cases := []struct {
		name    string
		file    string
		mutate  func(map[string]any)
		subject string // default: derived from the document
		code    codes.Code
		detail  string // substring of the detail, when set
	}{
		{"subject names another CTE", "valid/shipping-gln.json", set(), "events.fsma.receiving", codes.SubjectMismatch, "cte_type"},
		{"subject token in upper case", "valid/shipping-gln.json", set(), "events.fsma.SHIPPING", "", ""},
		{"quantity number with fraction", "valid/shipping-gln.json", set("quantity", json.Number("12.5")), "", "", ""},
		{"quantity string padded", "valid/shipping-gln.json", set("quantity", " 600 "), "", "", ""},
		{"quantity with exponent", "valid/shipping-gln.json", set("quantity", json.Number("6e2")), "", codes.InvalidQuantity, "quantity"},
		{"quantity with plus sign", "valid/shipping-gln.json", set("quantity", "+600"), "", codes.InvalidQuantity, "quantity"},
		{"quantity negative string", "valid/shipping-gln.json", set("quantity", "-1"), "", codes.InvalidQuantity, "quantity"},
		{"quantity zero number", "valid/shipping-gln.json", set("quantity", json.Number("0")), "", codes.InvalidQuantity, "greater than zero"},
		{"quantity trailing point", "valid/shipping-gln.json", set("quantity", "600."), "", codes.InvalidQuantity, "quantity"},
		{"quantity 16 integer digits", "valid/shipping-gln.json", set("quantity", "1234567890123456"), "", codes.InvalidQuantity, "15 digits"},
		{"quantity 7 fraction digits", "valid/shipping-gln.json", set("quantity", "0.1234567"), "", codes.InvalidQuantity, "6 digits"},
		{"quantity NaN text", "valid/shipping-gln.json", set("quantity", "NaN"), "", codes.InvalidQuantity, "quantity"},
		{"quantity boolean", "valid/shipping-gln.json", set("quantity", true), "", codes.SchemaValidation, "/quantity"},
		{"gln 14 digits", "valid/shipping-gln.json", set("ship_from", gln("00614141000012")), "", fsma.InvalidGLN, "ship_from.gln"},
		{"gln with spaces inside", "valid/shipping-gln.json", set("ship_to", gln("0614141 000012")), "", fsma.InvalidGLN, "digits only"},
		{"gln padded with spaces", "valid/shipping-gln.json", set("ship_to", gln(" 0614141000012 ")), "", "", ""},
		{"gln and name together", "valid/shipping-gln.json", set("ship_to", map[string]any{"gln": "0614141000012", "name": "DC 4"}), "", "", ""},
		{"empty gln falls back to name and address", "valid/shipping-gln.json",
			set("ship_to", map[string]any{"gln": "", "name": "DC 4", "address": "1 Main St"}), "", "", ""},
		{"empty gln without address", "valid/shipping-gln.json",
			set("ship_to", map[string]any{"gln": " ", "name": "DC 4"}), "", fsma.MissingKDE, "ship_to (gln, or name and address)"},
		{"optional location with bad gln", "valid/receiving-gln.json",
			set("previous_source_location", gln("0614141000013")), "", fsma.InvalidGLN, "previous_source_location.gln"},
		{"location on a CTE that does not need it is still checked", "valid/harvesting-gln.json",
			set("ship_to", gln("123")), "", fsma.InvalidGLN, "ship_to.gln"},
		{"tlc_source incomplete without reference", "valid/shipping-gln.json",
			set("tlc_source", map[string]any{"name": "Packhouse"}), "", fsma.MissingKDE, "tlc_source (gln, or name and address)"},
		{"tlc_source incomplete with reference", "valid/shipping-gln.json",
			set("tlc_source", map[string]any{"name": "Packhouse"}, "tlc_source_reference", "FFR 1"), "", fsma.MissingKDE, "tlc_source requires"},
		{"several KDEs missing are all named", "valid/transformation-three-inputs.json",
			set("input_tlcs", []any{}, "unit_of_measure", "", "reference_document", map[string]any{}), "",
			fsma.MissingKDE, "transformation requires unit_of_measure, input_tlcs, reference_document.type, reference_document.number"},
		{"reference document without type", "valid/shipping-gln.json",
			set("reference_document", map[string]any{"number": "BOL-1"}), "", fsma.MissingKDE, "shipping requires reference_document.type"},
		{"supplier checked before TLC", "valid/shipping-gln.json",
			set("supplier_id", nil, "traceability_lot_code", nil), "", fsma.MissingSupplier, "supplier_id"},
		{"TLC checked before KDEs", "valid/shipping-gln.json",
			set("traceability_lot_code", "", "ship_to", nil), "", fsma.MissingTLC, "traceability_lot_code"},
		{"KDEs checked before event time", "valid/shipping-gln.json",
			set("ship_to", nil, "event_time", "yesterday"), "", fsma.MissingKDE, "ship_to"},
		{"event time checked before GLN", "valid/shipping-gln.json",
			set("event_time", "2025-03-13 02:30:00Z", "ship_to", gln("1")), "", codes.UnparseableEventTime, "event_time"},
		{"event time offset without colon", "valid/shipping-gln.json",
			set("event_time", "2025-03-13T02:30:00+0000"), "", codes.UnparseableEventTime, "event_time"},
		{"event time blank", "valid/shipping-gln.json", set("event_time", "  "), "", fsma.MissingKDE, "event_time"},
		{"input tlc blank", "valid/transformation-three-inputs.json",
			set("input_tlcs", []any{"A-1", " "}), "", fsma.MissingTLC, "input_tlcs[1]"},
		{"input_tlcs on another CTE are checked too", "valid/shipping-gln.json",
			set("input_tlcs", []any{""}), "", fsma.MissingTLC, "input_tlcs[0]"},
		{"harvest date impossible", "valid/initial-packing-with-cooling.json",
			set("harvest_date", "2025-02-30"), "", codes.SchemaValidation, "harvest_date"},
		{"cooling date with time", "valid/initial-packing-with-cooling.json",
			set("cooling_date", "2025-03-12T10:20:00Z"), "", codes.SchemaValidation, "cooling_date"},
		{"blank optional cooling date", "valid/initial-packing-with-cooling.json", set("cooling_date", ""), "", "", ""},
		{"one-day fishing trip", "valid/first-land-based-receiving-tuna.json",
			set("harvest_date_start", "2025-06-01", "harvest_date_end", "2025-06-01"), "", "", ""},
		{"unknown top-level field allowed", "valid/shipping-gln.json", set("x_carrier_scac", "ABCD"), "", "", ""},
		{"unknown location field rejected", "valid/shipping-gln.json",
			set("ship_to", map[string]any{"gln": "0614141000012", "dock": "7"}), "", codes.SchemaValidation, "additionalProperties"},
		{"cte_type in upper case", "valid/shipping-gln.json", set("cte_type", "SHIPPING"), "events.fsma.shipping", codes.SchemaValidation, "/cte_type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := mutate(t, tc.file, tc.mutate)
			subject := tc.subject
			if subject == "" {
				subject = subjectFor(data)
			}
			env, err := g.Check(subject, data)
			if got := codes.Of(err); got != tc.code {
				t.Fatalf("code = %q (%v), want %q", got, err, tc.code)
			}
			if tc.code == "" {
				checkEnvelope(t, env)
				return
			}
			if !strings.Contains(codes.DetailOf(err), tc.detail) {
				t.Errorf("detail = %q, want it to contain %q", codes.DetailOf(err), tc.detail)
			}
		})
	}
}

// TestEnvelope checks the envelope of a known event field by field.
func TestEnvelope(t *testing.T) {
	g := newGate(t)
	env, err := g.Check("events.fsma.transformation", readTestdata(t, "valid/transformation-three-inputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := envelope.Envelope{
		Domain:         "fsma",
		EventType:      "transformation",
		IdempotencyKey: env.IdempotencyKey,
		KeySource:      "supplier_id+tlc+cte_type+event_date+reference_document",
		OrderingKey:    "SUP-00052.FCF-SAL-250316-L2",
		EventTime:      time.Date(2025, 3, 16, 15, 45, 0, 0, time.UTC),
		PartyID:        "SUP-00052",
	}
	if env.Domain != want.Domain || env.EventType != want.EventType || env.KeySource != want.KeySource ||
		env.OrderingKey != want.OrderingKey || !env.EventTime.Equal(want.EventTime) ||
		env.EventTime.Location() != time.UTC || env.PartyID != want.PartyID {
		t.Errorf("envelope = %+v\nwant       %+v", env, want)
	}
	ids := map[string]string{
		"supplier_id":     "SUP-00052",
		"tlc":             "FCF-SAL-250316-L2",
		"location_gln":    "0812345000108",
		"input_tlc_count": "3",
	}
	if len(env.Identifiers) != len(ids) {
		t.Errorf("Identifiers = %v, want %v", env.Identifiers, ids)
	}
	for k, v := range ids {
		if env.Identifiers[k] != v {
			t.Errorf("Identifiers[%s] = %q, want %q", k, env.Identifiers[k], v)
		}
	}
	// A location by name and address has no location_gln; only a
	// transformation counts its inputs.
	env, err = g.Check("events.fsma.shipping", readTestdata(t, "valid/shipping-tlc-source-reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := env.Identifiers["location_gln"]; ok {
		t.Errorf("Identifiers = %v, want no location_gln", env.Identifiers)
	}
	if _, ok := env.Identifiers["input_tlc_count"]; ok {
		t.Errorf("Identifiers = %v, want no input_tlc_count", env.Identifiers)
	}
}

// TestIdempotencyKey checks which differences change the key and which do
// not.
func TestIdempotencyKey(t *testing.T) {
	g := newGate(t)
	const base = "valid/shipping-gln.json"
	key := func(t *testing.T, data []byte) string {
		t.Helper()
		env, err := g.Check(subjectFor(data), data)
		if err != nil {
			t.Fatalf("check: %v", err)
		}
		return env.IdempotencyKey
	}
	baseKey := key(t, readTestdata(t, base))
	set := func(k string, v any) func(map[string]any) {
		return func(doc map[string]any) { doc[k] = v }
	}
	ref := func(typ, num string) map[string]any { return map[string]any{"type": typ, "number": num} }
	same := []struct {
		name string
		data []byte
	}{
		{"compact re-encoding, other field order", mutate(t, base, func(map[string]any) {})},
		{"same instant, another offset", mutate(t, base, set("event_time", "2025-03-12T19:30:00-07:00"))},
		{"same instant, fractional zero", mutate(t, base, set("event_time", "2025-03-13T02:30:00.000Z"))},
		{"later on the same UTC day", mutate(t, base, set("event_time", "2025-03-13T23:59:59Z"))},
		{"ids with surrounding spaces", mutate(t, base, func(doc map[string]any) {
			doc["supplier_id"] = " SUP-00417 "
			doc["traceability_lot_code"] = "00860001000030-RL250312A\t"
		})},
		{"document type in another case", mutate(t, base, set("reference_document", ref("bol", "BOL-778120")))},
		{"quantity and description do not matter", mutate(t, base, func(doc map[string]any) {
			doc["quantity"] = json.Number("600")
			doc["product_description"] = "Romaine hearts"
		})},
		{"string quantity vs number", mutate(t, base, set("quantity", json.Number("600")))},
	}
	for _, tc := range same {
		t.Run("same/"+tc.name, func(t *testing.T) {
			if k := key(t, tc.data); k != baseKey {
				t.Errorf("key = %s, want the base key %s", k, baseKey)
			}
		})
	}
	different := []struct {
		name string
		data []byte
	}{
		{"second shipment same day, other BOL", readTestdata(t, "valid/shipping-second-customer-same-day.json")},
		{"other document number", mutate(t, base, set("reference_document", ref("BOL", "BOL-778199")))},
		{"other document type", mutate(t, base, set("reference_document", ref("invoice", "BOL-778120")))},
		{"document number case matters", mutate(t, base, set("reference_document", ref("BOL", "bol-778120")))},
		{"next UTC day", mutate(t, base, set("event_time", "2025-03-14T02:30:00Z"))},
		{"same local day, other UTC day", mutate(t, base, set("event_time", "2025-03-12T16:59:00-07:00"))},
		{"other TLC", mutate(t, base, set("traceability_lot_code", "00860001000030-RL250312B"))},
		{"TLC leading zero kept", mutate(t, base, set("traceability_lot_code", "0860001000030-RL250312A"))},
		{"other supplier", mutate(t, base, set("supplier_id", "SUP-00418"))},
		{"other CTE, same lot and document", mutate(t, "valid/receiving-gln.json",
			set("event_time", "2025-03-13T02:30:00Z"))},
	}
	seen := map[string]string{baseKey: "base"}
	for _, tc := range different {
		t.Run("different/"+tc.name, func(t *testing.T) {
			k := key(t, tc.data)
			if prev, dup := seen[k]; dup {
				t.Errorf("key %s equals the key of %q", k, prev)
			}
			seen[k] = tc.name
		})
	}
}

// TestEventType covers the token a publisher derives from a document.
func TestEventType(t *testing.T) {
	cases := []struct {
		name string
		doc  map[string]any
		want string
		code codes.Code
	}{
		{"canonical", map[string]any{"cte_type": "first_land_based_receiving"}, "first_land_based_receiving", ""},
		{"upper case and spaces", map[string]any{"cte_type": " Receiving "}, "receiving", ""},
		{"absent", map[string]any{}, "", codes.SchemaValidation},
		{"nil document", nil, "", codes.SchemaValidation},
		{"not a string", map[string]any{"cte_type": json.Number("3")}, "", codes.SchemaValidation},
		{"unknown", map[string]any{"cte_type": "depacking"}, "", codes.SchemaValidation},
		{"hyphenated", map[string]any{"cte_type": "initial-packing"}, "", codes.SchemaValidation},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fsma.Checker{}.EventType(tc.doc)
			if got != tc.want || codes.Of(err) != tc.code {
				t.Errorf("EventType = %q, %v; want %q, %q", got, err, tc.want, tc.code)
			}
		})
	}
}

// TestCheckWithoutSchema calls Check directly on documents the schema would
// reject: it must still return a coded error, never panic.
func TestCheckWithoutSchema(t *testing.T) {
	full := decodeMap(t, readTestdata(t, "valid/transformation-three-inputs.json"))
	with := func(k string, v any) map[string]any {
		doc := make(map[string]any, len(full))
		for kk, vv := range full {
			doc[kk] = vv
		}
		doc[k] = v
		return doc
	}
	cases := []struct {
		name string
		doc  map[string]any
		code codes.Code
	}{
		{"nil document", nil, codes.SchemaValidation},
		{"supplier a number", with("supplier_id", json.Number("417")), fsma.MissingSupplier},
		{"tlc an array", with("traceability_lot_code", []any{"A"}), fsma.MissingTLC},
		{"input tlc a number", with("input_tlcs", []any{json.Number("1")}), fsma.MissingTLC},
		{"input tlc null", with("input_tlcs", []any{nil}), fsma.MissingTLC},
		{"input_tlcs a string", with("input_tlcs", "A-1"), fsma.MissingKDE},
		{"location a string", with("location", "Plant 2"), fsma.MissingKDE},
		{"location gln a number", with("location", map[string]any{"gln": json.Number("812345000108")}), fsma.MissingKDE},
		{"quantity a boolean", with("quantity", true), fsma.MissingKDE},
		{"reference document a string", with("reference_document", "WO-1"), fsma.MissingKDE},
		{"event time a number", with("event_time", json.Number("1742139900")), fsma.MissingKDE},
		{"harvest date a number", with("harvest_date", json.Number("20250312")), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fsma.Checker{}.Check(fsma.Transformation, tc.doc)
			if got := codes.Of(err); got != tc.code {
				t.Errorf("code = %q (%v), want %q", got, err, tc.code)
			}
		})
	}
}

// TestShippingReceivingLocations: shipping and receiving require the KDEs
// of 21 CFR 1.1340(a) and 1.1345(a) exactly: one shipped-from location
// (ship_from, or the CTE's location) and one shipped-to location (ship_to;
// for receiving, where received: ship_to or location), never both fields
// for the same place (issue 15, bug 10: location was required besides
// ship_from, and besides ship_to).
func TestShippingReceivingLocations(t *testing.T) {
	g := newGate(t)
	drop := func(fields ...string) func(map[string]any) {
		return func(doc map[string]any) {
			for _, f := range fields {
				delete(doc, f)
			}
		}
	}
	cases := []struct {
		name, file string
		mutate     func(map[string]any)
		code       codes.Code
		detail     string
		gln        string // location_gln wanted when valid ("" for none)
	}{
		{"shipping without location", "valid/shipping-gln.json", drop("location"), "", "", "0860001000030"},
		{"shipping with location, without ship_from", "valid/shipping-gln.json", drop("ship_from"), "", "", "0860001000030"},
		{"shipping without either shipped-from field", "valid/shipping-gln.json", drop("ship_from", "location"),
			fsma.MissingKDE, "shipping requires ship_from or location", ""},
		{"shipping without ship_to", "valid/shipping-gln.json", drop("ship_to"),
			fsma.MissingKDE, "shipping requires ship_to", ""},
		{"receiving without location", "valid/receiving-gln.json", drop("location"), "", "", ""},
		{"receiving with location, without ship_to", "valid/receiving-gln.json", drop("ship_to"), "", "", ""},
		{"receiving without either received-at field", "valid/receiving-gln.json", drop("ship_to", "location"),
			fsma.MissingKDE, "receiving requires ship_to or location", ""},
		{"receiving without previous source", "valid/receiving-gln.json", drop("ship_from"),
			fsma.MissingKDE, "receiving requires ship_from", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := mutate(t, c.file, c.mutate)
			env, err := g.Check(subjectFor(data), data)
			if codes.Of(err) != c.code && !(c.code == "" && err == nil) {
				t.Fatalf("code = %q (%v), want %q", codes.Of(err), err, c.code)
			}
			if c.code != "" {
				if got := codes.DetailOf(err); got != c.detail {
					t.Errorf("detail = %q, want %q", got, c.detail)
				}
				return
			}
			if c.gln != "" && env.Identifiers["location_gln"] != c.gln {
				t.Errorf("location_gln = %q, want %q", env.Identifiers["location_gln"], c.gln)
			}
		})
	}
}

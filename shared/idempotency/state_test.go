package idempotency

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/eventhash"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
)

// TestContentHash: two payloads are the same content when their RFC 8785
// canonical forms are equal (member order, whitespace and string escapes
// do not count), and any difference of a value does.
func TestContentHash(t *testing.T) {
	base := `{"registrant_dea":"BW4829137","transaction_id":"X","quantity_delta":"-30","supplier":"Müller & Söhne <Großhandel>"}`
	for _, tc := range []struct {
		name, other string
		same        bool
	}{
		{"byte-identical", base, true},
		{"members reordered", `{"transaction_id":"X","supplier":"Müller & Söhne <Großhandel>","quantity_delta":"-30","registrant_dea":"BW4829137"}`, true},
		{"whitespace", "{\n  \"registrant_dea\": \"BW4829137\",\n  \"transaction_id\": \"X\",\n  \"quantity_delta\": \"-30\",\n  \"supplier\": \"Müller & Söhne <Großhandel>\"\n}", true},
		{"escaped non-ASCII", `{"registrant_dea":"BW4829137","transaction_id":"X","quantity_delta":"-30","supplier":"M\u00fcller \u0026 S\u00f6hne \u003cGro\u00dfhandel\u003e"}`, true},
		{"another quantity", `{"registrant_dea":"BW4829137","transaction_id":"X","quantity_delta":"-300","supplier":"Müller & Söhne <Großhandel>"}`, false},
		{"a member more", `{"registrant_dea":"BW4829137","transaction_id":"X","quantity_delta":"-30","supplier":"Müller & Söhne <Großhandel>","note":""}`, false},
		{"no JSON", `{"registrant_dea":`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := ContentHash("pharmacy", []byte(base)), ContentHash("pharmacy", []byte(tc.other))
			if len(a) != 64 || len(b) != 64 {
				t.Fatalf("hashes %q, %q: want 64 hex digits", a, b)
			}
			if (a == b) != tc.same {
				t.Errorf("same content %v, want %v", a == b, tc.same)
			}
		})
	}
	if ContentHash("dscsa", []byte(`{"a":`)) == ContentHash("dscsa", []byte(`{"a": `)) {
		t.Error("bytes that are no JSON are hashed as they are")
	}
}

// BenchmarkContentHash is what the content check adds per event in the
// validator (one canonicalization and SHA-256 of a typical event).
func BenchmarkContentHash(b *testing.B) {
	event := []byte(`{"transaction_id":"INV-2025-0181","registrant_dea":"BW4829137","ndc":"00406-0512-01","lot":"L24A0917",` +
		`"expiry":"2026-09-30","quantity_delta":"-30","unit":"EA","event_type":"dispense","dea_schedule":"II",` +
		`"occurred_at":"2025-03-14T15:42:10Z","actor_id":"RPH-0412 Pharmacie Saint-Étienne"}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(event)))
	for b.Loop() {
		_ = ContentHash("pharmacy", event)
	}
}

// shippingEvent is a DSCSA shipping event with an eventID (so every row of
// TestContentHashDSCSA shares one idempotency key), lists, a quantity and
// compact IRIs; edit changes its members.
func shippingEvent(t testing.TB, edit func(ev map[string]any)) []byte {
	t.Helper()
	ev := map[string]any{
		"@context":            []any{"https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld", map[string]any{"example": "https://ns.example.com/epcis/"}},
		"type":                "ObjectEvent",
		"eventID":             "urn:uuid:3f4e5d6c-7b8a-4998-a7b6-c5d4e3f2a1b0",
		"eventTime":           "2024-03-12T09:15:00-05:00",
		"eventTimeZoneOffset": "-05:00",
		"epcList":             []any{"urn:epc:id:sgtin:0614141.012345.10016550749981", "urn:epc:id:sgtin:0614141.012345.10016550749982"},
		"action":              "OBSERVE",
		"bizStep":             "cbv:BizStep-shipping",
		"disposition":         "cbv:Disp-in_transit",
		"readPoint":           map[string]any{"id": "urn:epc:id:sgln:0614141.00777.0"},
		"bizTransactionList": []any{
			map[string]any{"type": "po", "bizTransaction": "urn:epcglobal:cbv:bt:0860001234565:PO-778120"},
			map[string]any{"type": "desadv", "bizTransaction": "urn:epcglobal:cbv:bt:0614141000005:ASN-20240312-0042"},
		},
		"sourceList": []any{
			map[string]any{"type": "urn:epcglobal:cbv:sdt:possessing_party", "source": "https://id.gs1.org/417/0350881000102"},
			map[string]any{"type": "urn:epcglobal:cbv:sdt:owning_party", "source": "https://id.gs1.org/417/0614141000005"},
		},
		"quantityList":    []any{map[string]any{"epcClass": "urn:epc:class:lgtin:0614141.012345.A24B017", "quantity": json.Number("2"), "uom": "EA"}},
		"example:shipper": "Müller & Söhne <Großhandel>",
	}
	if edit != nil {
		edit(ev)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// place puts member (`"name":value`) into an event: into its ilmd or its
// quantity element by name, else at its top level.
func place(t testing.TB, ev []byte, member string) []byte {
	t.Helper()
	switch {
	case strings.HasPrefix(member, `"quantity"`):
		return bytes.Replace(ev, []byte(`"uom":"EA"`), []byte(member+`,"uom":"EA"`), 1)
	case strings.HasPrefix(member, `"cbvmda:`):
		return bytes.Replace(ev, []byte(`"ilmd":{`), []byte(`"ilmd":{`+member+","), 1)
	}
	return bytes.Replace(ev, []byte(`"action"`), []byte(member+`,"action"`), 1)
}

// reverse reverses a list member of ev.
func reverse(ev map[string]any, name string) {
	l := ev[name].([]any)
	slices.Reverse(l)
}

// TestContentHashDSCSA: DSCSA's content identity is the CBV 2.0 event hash
// ID and the event's exact content: what the standard says does not change
// an event (list order, CBV URNs or compact IRIs, EPC URNs or Digital
// Links, the eventTime's offset, recordTime, the @context a document
// splices in, a quantity's trailing zeros) is the same content; a changed
// bizStep, quantity or EPC is other content, and so is a difference the
// event hash ID does not see (E10: a quantity beyond a float's digits, a
// time's sub-millisecond digits, an extension element's structure, a lot's
// leading zeros). Other domains keep the canonical JSON; every identity is
// recorded by name, a hash recorded without one is the canonical one, and
// one recorded by the event hash ID alone (before the exact content) keeps
// matching its event (HashMatches).
func TestContentHashDSCSA(t *testing.T) {
	const dom = "dscsa"
	if Identity(dom) != dscsa.ContentIdentityExact || Identity("pharmacy") != IdentityJCS || Identity("nosuchdomain") != IdentityJCS ||
		StoredIdentity(dom) != dscsa.ContentIdentityExact || StoredIdentity("pharmacy") != "" || dscsa.ContentIdentityExact != "cbv2-event-hash+exact" {
		t.Fatalf("identities %q %q %q", Identity(dom), Identity("pharmacy"), Identity("nosuchdomain"))
	}
	base := shippingEvent(t, nil)
	dl, ok := eventhash.DigitalLink("urn:epc:id:sgtin:0614141.012345.10016550749981")
	if !ok {
		t.Fatal("no Digital Link")
	}
	for _, tc := range []struct {
		name string
		edit func(ev map[string]any)
		same bool
	}{
		{"byte-identical", func(map[string]any) {}, true},
		{"lists reordered", func(ev map[string]any) {
			reverse(ev, "epcList")
			reverse(ev, "bizTransactionList")
			reverse(ev, "sourceList")
		}, true},
		{"CBV URNs instead of compact IRIs", func(ev map[string]any) {
			ev["bizStep"], ev["disposition"] = "urn:epcglobal:cbv:bizstep:shipping", "urn:epcglobal:cbv:disp:in_transit"
		}, true},
		{"a Digital Link instead of the EPC URN", func(ev map[string]any) { ev["epcList"].([]any)[0] = dl }, true},
		{"eventTime in UTC", func(ev map[string]any) { ev["eventTime"] = "2024-03-12T14:15:00.000Z" }, true},
		{"a recordTime", func(ev map[string]any) { ev["recordTime"] = "2024-03-12T15:00:00Z" }, true},
		{"another prefix for the extension's namespace", func(ev map[string]any) {
			ev["@context"] = []any{map[string]any{"ns1": "https://ns.example.com/epcis/"}, "https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld"}
			ev["ns1:shipper"] = ev["example:shipper"]
			delete(ev, "example:shipper")
		}, true},
		{"a document's @context spliced in (more declarations)", func(ev map[string]any) {
			ev["@context"] = append(ev["@context"].([]any), map[string]any{"gs1": "https://gs1.org/voc/", "sbdh": "http://www.unece.org/cefact/namespaces/StandardBusinessDocumentHeader"})
		}, true},
		{"another bizStep", func(ev map[string]any) { ev["bizStep"] = "cbv:BizStep-receiving" }, false},
		{"another quantity", func(ev map[string]any) {
			ev["quantityList"].([]any)[0].(map[string]any)["quantity"] = json.Number("3")
		}, false},
		{"another EPC", func(ev map[string]any) { ev["epcList"].([]any)[1] = "urn:epc:id:sgtin:0614141.012345.10016550749983" }, false},
		{"another extension value", func(ev map[string]any) { ev["example:shipper"] = "Pharmacie Saint-Étienne" }, false},
		{"a quantity with trailing zeros (2.0: the same decimal)", func(ev map[string]any) {
			ev["quantityList"].([]any)[0].(map[string]any)["quantity"] = json.Number("2.0")
		}, true},
		{"a quantity as 2e0", func(ev map[string]any) {
			ev["quantityList"].([]any)[0].(map[string]any)["quantity"] = json.Number("2e0")
		}, true},
		{"E10: 2.0000000000000001 (the same float)", func(ev map[string]any) {
			ev["quantityList"].([]any)[0].(map[string]any)["quantity"] = json.Number("2.0000000000000001")
		}, false},
		{"E10: a sub-millisecond digit of eventTime (the same millisecond)", func(ev map[string]any) {
			ev["eventTime"] = "2024-03-12T09:15:00.0004-05:00"
		}, false},
		{"E10: an extension element's structure ({\"#text\"} for the text)", func(ev map[string]any) {
			ev["example:shipper"] = map[string]any{"#text": "Müller & Söhne <Großhandel>"}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := shippingEvent(t, tc.edit)
			a, b := ContentHash(dom, base), ContentHash(dom, other)
			if len(a) != 64 || len(b) != 64 {
				t.Fatalf("hashes %q, %q: want 64 hex digits", a, b)
			}
			if (a == b) != tc.same {
				t.Errorf("same content %v, want %v", a == b, tc.same)
			}
			// The checked envelope's event hash ID gives the same hash.
			var doc map[string]any
			dec := json.NewDecoder(bytes.NewReader(other))
			dec.UseNumber()
			if err := dec.Decode(&doc); err != nil {
				t.Fatal(err)
			}
			env := envelope.Envelope{Domain: dom, EventHashID: eventhash.ID(doc, nil)}
			if CheckedContentHash(env, other) != b {
				t.Error("CheckedContentHash differs from ContentHash")
			}
			// A hash recorded before the identity (the canonical JSON's,
			// no identity) and one recorded by it both match; neither
			// matches under the other's name.
			if !HashMatches(dom, "", CanonicalHash(other), other) || !HashMatches(dom, Identity(dom), b, other) ||
				HashMatches(dom, Identity(dom), CanonicalHash(other), other) || HashMatches(dom, "", b, other) ||
				HashMatches(dom, "some-future-identity", b, other) {
				t.Error("HashMatches does not follow the recorded identity")
			}
		})
	}
	// E10's pairs: one event hash ID (the pre-hash reads a number as a
	// float, and the ILMD lot 007 as the number 7), two contents.
	for _, pair := range []struct{ name, a, b string }{
		{"quantity 9007199254740993 vs 9007199254740992", `"quantity":9007199254740993`, `"quantity":9007199254740992`},
		{"quantity 2 vs 2.0000000000000001", `"quantity":2`, `"quantity":2.0000000000000001`},
		{"lot 007 vs 7", `"cbvmda:lotNumber":"007"`, `"cbvmda:lotNumber":"7"`},
		{"extension {\"#text\":\"500\"} vs \"500\"", `"example:net":{"#text":"500"}`, `"example:net":"500"`},
	} {
		t.Run("E10 "+pair.name, func(t *testing.T) {
			ev := func(member string) []byte {
				return []byte(`{"@context":["https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld",{"example":"https://ns.example.com/epcis/"}],` +
					`"type":"ObjectEvent","eventID":"urn:uuid:3f4e5d6c-7b8a-4998-a7b6-c5d4e3f2a1b1","eventTime":"2024-03-12T09:15:00-05:00",` +
					`"eventTimeZoneOffset":"-05:00","action":"ADD","bizStep":"commissioning","ilmd":{"cbvmda:itemExpirationDate":"2026-01-31"},` +
					`"quantityList":[{"epcClass":"urn:epc:class:lgtin:0614141.012345.A24B017","uom":"EA"}],"example:x":"Müller & Söhne"}`)
			}
			a := place(t, ev(""), pair.a)
			b := place(t, ev(""), pair.b)
			da, _ := gate.Decode(a)
			db, _ := gate.Decode(b)
			if eventhash.ID(da, nil) != eventhash.ID(db, nil) {
				t.Fatalf("event hash IDs differ: not an E10 pair")
			}
			if ContentHash(dom, a) == ContentHash(dom, b) {
				t.Errorf("one content hash: the difference is hidden")
			}
		})
	}
	// A hash recorded by the event hash ID alone, as deadletter computed it
	// before the exact content was added (identity cbv2-event-hash),
	// matches its event and no other.
	legacy := func(data []byte) string {
		doc, err := gate.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := eventhash.Digest(eventhash.LegacyID(doc, nil))
		return d
	}
	other := shippingEvent(t, func(ev map[string]any) { ev["bizStep"] = "cbv:BizStep-receiving" })
	if !HashMatches(dom, dscsa.ContentIdentityEventHash, legacy(base), base) || HashMatches(dom, dscsa.ContentIdentityEventHash, legacy(base), other) ||
		HashMatches("pharmacy", dscsa.ContentIdentityEventHash, legacy(base), base) {
		t.Error("a hash recorded as cbv2-event-hash does not match its event alone")
	}
	// Bytes that are no JSON object fall back to the canonical hash.
	if ContentHash(dom, []byte(`["a"]`)) != CanonicalHash([]byte(`["a"]`)) {
		t.Error("a JSON array is not hashed canonically")
	}
}

// BenchmarkContentHashDSCSA is what the content rule costs per DSCSA event:
// before (the canonical JSON's hash), in the validator (the digest of the
// event hash ID the gate put in the envelope) and from the bytes alone (the
// redriver, reconciliation, a LEDGER entry read back).
func BenchmarkContentHashDSCSA(b *testing.B) {
	event := shippingEvent(b, nil)
	doc, err := gate.Decode(event)
	if err != nil {
		b.Fatal(err)
	}
	env := envelope.Envelope{Domain: "dscsa", EventHashID: eventhash.ID(doc, nil)}
	for _, bc := range []struct {
		name string
		f    func() string
	}{
		{"canonical JSON (before)", func() string { return CanonicalHash(event) }},
		{"from the checked envelope", func() string { return CheckedContentHash(env, event) }},
		{"from the bytes", func() string { return ContentHash("dscsa", event) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = bc.f()
			}
		})
	}
}

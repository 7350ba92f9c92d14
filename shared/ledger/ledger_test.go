package ledger

import "testing"

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
			a, b := ContentHash([]byte(base)), ContentHash([]byte(tc.other))
			if len(a) != 64 || len(b) != 64 {
				t.Fatalf("hashes %q, %q: want 64 hex digits", a, b)
			}
			if (a == b) != tc.same {
				t.Errorf("same content %v, want %v", a == b, tc.same)
			}
		})
	}
	if ContentHash([]byte(`{"a":`)) == ContentHash([]byte(`{"a": `)) {
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
		_ = ContentHash(event)
	}
}

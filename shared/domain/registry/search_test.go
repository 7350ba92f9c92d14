package registry_test

import (
	"testing"

	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestSearchPayloadIdentifiers: the pharmacy and FSMA searches find a
// quarantined event by every identifier its payload holds (NDC in any
// layout, lot, registrant, transaction id; TLC as tlc or lot, input TLCs),
// also when the gate refused the very identifier searched (an NDC of ten
// plain digits, a DEA number with a wrong check digit), and the records
// route alone (the chain's ordering key and listed identifiers) keeps
// finding what it found before. The DSCSA rows are TestSearchEveryIdentifier.
func TestSearchPayloadIdentifiers(t *testing.T) {
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	const (
		dispense = `{"transaction_id":"INV-2026-0042 <Müller & Söhne>","registrant_dea":"BW4829137","ndc":"0409-4888-20","lot":"A1&B<2>\"Ü\"",
			"drug_name":"Hydromorphone HCl 2 mg/mL <CII>","quantity_delta":"-2","unit":"ML","event_type":"dispense","dea_schedule":"II",
			"occurred_at":"2026-11-03T10:15:00-05:00","actor_id":"RPH-陈伟"}`
		// INVALID_NDC (ten plain digits are ambiguous) and a registrant
		// with a wrong check digit: no ordering key.
		badNDC = `{"transaction_id":"INV-2026-0043","registrant_dea":"BW4829138","ndc":"0409488820","lot":"A1&B<2>\"Ü\"",
			"quantity_delta":"-2","unit":"ML","event_type":"dispense","dea_schedule":"II","occurred_at":"2026-11-03T10:15:00-05:00","actor_id":"RPH-1"}`
		transform = `{"supplier_id":"Müller & Söhne <Frischware>","cte_type":"transformation","traceability_lot_code":"TLC-SALAD-7 \"Ü\"",
			"input_tlcs":["00860001000030-RL250312A","TLC-KALE-<9>"],"event_time":"2026-11-03T02:30:00Z","location":{"gln":"0860001000030"}}`
		// Refused by the FSMA rules (no product description, no quantity).
		badFSMA = `{"supplier_id":"SUP-00417","cte_type":"shipping","traceability_lot_code":"TLC-ROMAINE-陈伟 & <1>","event_time":"yesterday"}`
	)
	tests := []struct {
		name, domain, event string
		search              map[string]string
		payload             bool
		want                bool
	}{
		{"pharmacy ndc 4-4-2, records only", "pharmacy", dispense, map[string]string{"ndc": "0409-4888-20"}, false, true},
		{"pharmacy ndc-11 and lot", "pharmacy", dispense, map[string]string{"ndc": "00409488820", "lot": `A1&B<2>"Ü"`}, true, true},
		{"pharmacy registrant lower case", "pharmacy", dispense, map[string]string{"registrant": "bw4829137"}, true, true},
		{"pharmacy transaction id", "pharmacy", dispense, map[string]string{"transaction_id": "INV-2026-0042 <Müller & Söhne>"}, true, true},
		{"pharmacy other lot", "pharmacy", dispense, map[string]string{"lot": "A1"}, true, false},
		{"refused ndc: its ndc-11, payload", "pharmacy", badNDC, map[string]string{"ndc": "00409-4888-20"}, true, true},
		{"refused ndc: records only", "pharmacy", badNDC, map[string]string{"ndc": "00409-4888-20"}, false, false},
		{"refused ndc: lot, payload", "pharmacy", badNDC, map[string]string{"lot": `A1&B<2>"Ü"`}, true, true},
		{"refused ndc: transaction id alone", "pharmacy", badNDC, map[string]string{"transaction_id": "INV-2026-0043"}, true, true},
		{"refused ndc: another ndc", "pharmacy", badNDC, map[string]string{"ndc": "0409-4888-21"}, true, false},
		{"fsma own tlc, records only", "fsma", transform, map[string]string{"tlc": `TLC-SALAD-7 "Ü"`}, false, true},
		{"fsma input tlc as lot", "fsma", transform, map[string]string{"lot": "TLC-KALE-<9>"}, true, true},
		{"fsma input tlc, records only", "fsma", transform, map[string]string{"tlc": "00860001000030-RL250312A"}, false, false},
		{"fsma refused event by its tlc", "fsma", badFSMA, map[string]string{"tlc": "TLC-ROMAINE-陈伟 & <1>"}, true, true},
		{"fsma refused event, another tlc", "fsma", badFSMA, map[string]string{"tlc": "TLC-ROMAINE"}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, ok := registry.Lookup(tt.domain)
			if !ok {
				t.Fatalf("no domain %s", tt.domain)
			}
			doc, err := gate.Decode([]byte(tt.event))
			if err != nil {
				t.Fatal(err)
			}
			typ, _ := spec.Checker.EventType(doc)
			subject := subjects.Event(tt.domain, typ)
			env, err := g.Check(subject, []byte(tt.event))
			if err != nil {
				env = g.Identify(subject, []byte(tt.event))
			}
			c := domain.Chain{OrderingKey: env.OrderingKey, PartyID: env.PartyID, IdempotencyKey: env.IdempotencyKey, DLQID: env.IdempotencyKey}
			for _, name := range spec.Listed {
				if v := env.Identifiers[name]; v != "" {
					c.Listed = append(c.Listed, name, v)
				}
			}
			if tt.payload {
				c.PayloadIdentifiers = spec.Search.Identifiers(doc)
			}
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

package hold

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/record"
)

// pharmacyPayload is a pharmacy event as published, with a lot and
// transaction id as the trade writes them; its registrant and NDC read.
const pharmacyPayload = `{"transaction_id":"INV-2026-0042 <Müller & Söhne>","registrant_dea":"BW4829137","ndc":"0409-4888-20",` +
	`"lot":"A1&B<2>\"Ü\"","quantity_delta":"-30","unit":"EA","event_type":"dispense","dea_schedule":"II","occurred_at":"2025-03-14T15:42:10"}`

// TestPayloadIdentifiers: what a domain reads of an event's identity from
// its verbatim payload, whatever it failed on; nothing, never a panic,
// from what is no JSON object.
func TestPayloadIdentifiers(t *testing.T) {
	for _, tc := range []struct {
		name, dom, payload string
		okey               string
		pairs              []string
	}{
		{"pharmacy, a time without offset", "pharmacy", pharmacyPayload, "BW4829137.00409488820.A1&B<2>\"Ü\"",
			// The listed identifiers, then every one the domain's search
			// reads (its NDC as NDC-11, its lot, its registrant).
			[]string{"registrant_dea", "BW4829137", "transaction_id", "INV-2026-0042 <Müller & Söhne>",
				"lot", "A1&B<2>\"Ü\"", "ndc", "00409488820", "registrant", "BW4829137"}},
		{"fsma, a tlc", "fsma", `{"supplier_id":"陈伟 & Co","cte_type":"shipping","traceability_lot_code":"RL-2026 <Ü>"}`, "陈伟 & Co.RL-2026 <Ü>", []string{"tlc", "RL-2026 <Ü>"}},
		{"not JSON", "pharmacy", `{"transaction_id":"INV-1",`, "", nil},
		{"an array", "pharmacy", `[{"transaction_id":"INV-1"}]`, "", nil},
		{"null", "pharmacy", `null`, "", nil},
		{"numbers where strings go", "pharmacy", `{"transaction_id":7,"registrant_dea":[1],"ndc":{"a":1},"lot":null}`, "", nil},
		{"an unknown domain", "recall <x>", pharmacyPayload, "", nil},
		{"empty", "pharmacy", ``, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			okey, _, pairs := PayloadIdentifiers(tc.dom, []byte(tc.payload))
			if okey != tc.okey {
				t.Errorf("ordering key %q, want %q", okey, tc.okey)
			}
			if !slices.Equal(pairs, tc.pairs) {
				t.Errorf("identifiers %q, want %q", pairs, tc.pairs)
			}
		})
	}
}

// TestRecordPayload: a stored record's text payload, nothing from a
// base64 one or a record without one.
func TestRecordPayload(t *testing.T) {
	raw := func(p *record.Payload) []byte {
		b, _ := json.Marshal(map[string]any{"dlq_id": "pharmacy_1", "payload": p})
		return b
	}
	if got := RecordPayload(raw(record.NewPayload([]byte(pharmacyPayload)))); string(got) != pharmacyPayload {
		t.Errorf("text payload: %q", got)
	}
	for name, b := range map[string][]byte{"base64": raw(record.NewPayload([]byte{0xff, 0xfe})), "none": []byte(`{"dlq_id":"x"}`), "not JSON": []byte(`{`)} {
		if got := RecordPayload(b); got != nil {
			t.Errorf("%s: %q", name, got)
		}
	}
}

// TestCompile: a set of events holds exactly those; a filter's
// identifiers match the chain's, its payload's among them (a subject of
// a folded state reads them from its original payload); an identifier
// that does not read is a BAD_REQUEST naming its field.
func TestCompile(t *testing.T) {
	orig := record.NewPayload([]byte(pharmacyPayload))
	st := record.State{DLQID: "pharmacy_01", Domain: "pharmacy", PartyID: "BW4829137", ErrorCode: "UNPARSEABLE_EVENT_TIME", OriginalPayload: orig}
	fromState := FromState(st)
	withIDs := Subject{DLQID: "pharmacy_02", Domain: "pharmacy", PartyID: "BW4829137",
		Chain: domain.Chain{DLQID: "pharmacy_02", PartyID: "BW4829137", Listed: []string{"transaction_id", "INV-9"}}}
	lot := `A1&B<2>"Ü"`
	for _, tc := range []struct {
		name   string
		target api.HoldTarget
		sub    Subject
		want   bool
	}{
		{"a set holds its member", api.HoldTarget{DLQIDs: []string{"pharmacy_00", "pharmacy_01"}}, fromState, true},
		{"a set holds no other", api.HoldTarget{DLQIDs: []string{"pharmacy_00"}}, fromState, false},
		{"lot and ndc from the original payload", api.HoldTarget{Filter: &api.HoldFilter{Lot: lot, NDC: "00409-4888-20"}}, fromState, true},
		{"another lot", api.HoldTarget{Filter: &api.HoldFilter{Lot: "A1"}}, fromState, false},
		{"transaction id by name=value", api.HoldTarget{Filter: &api.HoldFilter{Identifiers: map[string]string{"transaction_id": "INV-9"}}}, withIDs, true},
		{"a lot and another party", api.HoldTarget{Filter: &api.HoldFilter{Lot: lot, PartyID: "AB1234563"}}, fromState, false},
		{"a pharmacy lot does not hold an fsma chain", api.HoldTarget{Filter: &api.HoldFilter{Domain: "fsma", Lot: lot}},
			Subject{Domain: "fsma", Chain: domain.Chain{Listed: []string{"tlc", "other"}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Compile(tc.target)
			if err != nil {
				t.Fatal(err)
			}
			if got := m(tc.sub); got != tc.want {
				t.Errorf("match %v, want %v", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		f     api.HoldFilter
		field string
	}{
		{"a bad ndc", api.HoldFilter{NDC: "0409-48B8-20"}, "ndc"},
		{"a tlc of the pharmacy domain", api.HoldFilter{Domain: "pharmacy", TLC: "RL-1"}, "tlc"},
		{"a field no domain has", api.HoldFilter{Identifiers: map[string]string{"colour": "red"}}, "identifiers"},
	} {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			_, err := Compile(api.HoldTarget{Filter: &tc.f})
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != api.ErrBadRequest || ae.Field != tc.field || strings.Contains(ae.Message, "0409-48B8-20") {
				t.Errorf("%v, want BAD_REQUEST naming %q", err, tc.field)
			}
		})
	}
	// Refuse: an active lot hold holds the chain before its record is
	// written, read from the payload.
	h := api.Hold{ID: "hold-lot", Status: api.HoldActive, Target: api.HoldTarget{Filter: &api.HoldFilter{Lot: lot}}}
	if err := Refuse(st, []api.Hold{h}); api.CodeOf(err) != api.ErrHeld {
		t.Errorf("Refuse: %v, want HELD", err)
	}
}

// TestMerge: a payload's identifiers join the chain's, the chain's value
// first for a name both give (each value once), sorted by name.
func TestMerge(t *testing.T) {
	c := Merge(domain.Chain{Listed: []string{"lot", "L1"}}, "K", "P", []string{"transaction_id", "T", "lot", "L2", "lot", "L1", "event_type", "x"})
	if c.OrderingKey != "K" || c.PartyID != "P" || !slices.Equal(c.Listed, []string{"event_type", "x", "lot", "L1", "lot", "L2", "transaction_id", "T"}) ||
		c.Identifier("lot") != "L1" || !c.Has("lot", "L2") {
		t.Errorf("%+v", c)
	}
	if c := Merge(domain.Chain{OrderingKey: "A", PartyID: "B"}, "K", "P", nil); c.OrderingKey != "A" || c.PartyID != "B" {
		t.Errorf("%+v", c)
	}
}

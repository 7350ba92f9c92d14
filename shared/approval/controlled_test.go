package approval_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
)

// Pharmacy payloads as a registrant's system writes them (schemas/
// testdata/pharmacy), and an FSMA 204 critical tracking event.
const (
	scheduleIIDispense = `{"transaction_id":"INV-2025-0181","registrant_dea":"BW4829137","ndc":"00406-0512-01","lot":"L24A0917","expiry":"2026-09-30","quantity_delta":"-30","unit":"EA","event_type":"dispense","dea_schedule":"II","occurred_at":"2025-03-14T15:42:10Z","actor_id":"RPH-0412","x_note":"Müller & Söhne <Apotheke> \"Nord\""}`
	scheduleIVReturn   = `{"transaction_id":"RTS-2025-0077","registrant_dea":"BW4829137","ndc":"0093-0058-01","quantity_delta":"12","unit":"EA","event_type":"return","dea_schedule":"iv","occurred_at":"2025-03-15T09:01:00Z","actor_id":"RPH-陈伟","x_note":"returned to stock"}`
	// noSchedule is a pharmacy event quarantined for naming no DEA
	// schedule (INVALID_DEA_SCHEDULE): a legend drug sent by mistake.
	noSchedule   = `{"transaction_id":"INV-2025-0190","registrant_dea":"BW4829137","ndc":"0781-1506-10","lot":"A1234","quantity_delta":"-60","unit":"EA","event_type":"dispense","dea_schedule":"","occurred_at":"2025-03-14T16:00:00Z","actor_id":"RPH-0412","x_note":"Amoxicillin & clavulanate"}`
	fsmaShipping = `{"cte":"shipping","traceability_lot_code":"TLC-00012345","product_description":"Romaine lettuce <whole heads> & hearts","quantity":"120","unit":"cases","location":"Müller & Söhne Frischdienst","event_time":"2025-03-14T06:00:00Z","reference_document":"BOL-778"}`
)

// TestNeedsControlled: under the default policy (issue #40 O1) a
// correction of a pharmacy event of a controlled substance, or one that
// changes a pharmacy event's quantity, NDC, lot or registrant, needs a
// second person; other domains keep the identity rule.
func TestNeedsControlled(t *testing.T) {
	def := approval.DefaultPolicy()
	if def.Corrections != approval.CorrectionsControlled {
		t.Fatalf("the default policy's corrections = %q, want %q", def.Corrections, approval.CorrectionsControlled)
	}
	identity := def
	identity.Corrections = approval.CorrectionsIdentity
	change := func(doc, from, to string) []byte {
		if !strings.Contains(doc, from) {
			t.Fatalf("%q is not in the test payload", from)
		}
		return []byte(strings.Replace(doc, from, to, 1))
	}
	correct := func(domain, eventType, original string, corrected []byte) approval.Action {
		return approval.Action{Kind: api.ActionCorrect, Domain: domain, SubjectEventType: eventType, Original: []byte(original), Corrected: corrected}
	}
	tests := []struct {
		name   string
		policy approval.Policy
		action approval.Action
		needed bool
		diff   []string
	}{
		{"Schedule II quantity change", def, correct("pharmacy", "dispense", scheduleIIDispense, change(scheduleIIDispense, `"-30"`, `"-3"`)), true, []string{pharmacy.FieldQuantity}},
		{"Schedule IV, any correction (a note)", def, correct("pharmacy", "return", scheduleIVReturn, change(scheduleIVReturn, "returned to stock", "returned to stock by 陈伟")), true, nil},
		{"Schedule IV lower-case, the expiry added", def, correct("pharmacy", "return", scheduleIVReturn, change(scheduleIVReturn, `"unit"`, `"expiry":"2027-01-31","unit"`)), true, nil},
		{"not controlled, NDC change", def, correct("pharmacy", "dispense", noSchedule, change(noSchedule, "0781-1506-10", "0781-1506-01")), true, []string{approval.FieldOrderingKey, pharmacy.FieldNDC}},
		{"not controlled, note change", def, correct("pharmacy", "dispense", noSchedule, change(noSchedule, "Amoxicillin & clavulanate", "Amoxicillin & clavulanate 875 mg")), false, nil},
		{"not controlled, NDC written in another layout", def, correct("pharmacy", "dispense", noSchedule, change(noSchedule, "0781-1506-10", "00781-1506-10")), false, nil},
		{"not controlled, registrant upper-cased", def, correct("pharmacy", "dispense", noSchedule, change(noSchedule, `"BW4829137"`, `"bw4829137"`)), false, nil},
		{"not controlled, lot change", def, correct("pharmacy", "dispense", noSchedule, change(noSchedule, `"A1234"`, `"A1243"`)), true, []string{approval.FieldOrderingKey, pharmacy.FieldLot}},
		{"not controlled, a JSON number quantity fixed as a string: the same quantity", def, correct("pharmacy", "dispense", string(change(noSchedule, `"-60"`, `-60`)), []byte(noSchedule)), false, nil},
		{"not controlled, a JSON number quantity fixed to another", def, correct("pharmacy", "dispense", string(change(noSchedule, `"-60"`, `-60`)), change(noSchedule, `"-60"`, `"-6"`)), true, []string{pharmacy.FieldQuantity}},
		{"not controlled made Schedule II", def, correct("pharmacy", "dispense", noSchedule, change(noSchedule, `"dea_schedule":""`, `"dea_schedule":"II"`)), true, nil},
		{"Schedule II made not controlled", def, correct("pharmacy", "dispense", scheduleIIDispense, change(scheduleIIDispense, `"dea_schedule":"II"`, `"dea_schedule":""`)), true, nil},
		{"registrant change", def, correct("pharmacy", "dispense", noSchedule, change(noSchedule, "BW4829137", "AB1234563")), true, []string{approval.FieldIdempotencyKey, approval.FieldOrderingKey, pharmacy.FieldRegistrant}},
		{"unparseable record fixed", def, correct("pharmacy", "dispense", `{"transaction_id": "INV-2025-0190",`, []byte(noSchedule)), true, []string{approval.FieldIdempotencyKey, approval.FieldOrderingKey, pharmacy.FieldQuantity, pharmacy.FieldNDC, pharmacy.FieldLot, pharmacy.FieldRegistrant}},
		{"FSMA quantity change keeps the identity rule", def, correct("fsma", "shipping", fsmaShipping, change(fsmaShipping, `"120"`, `"112"`)), false, nil},
		{"FSMA naming a DEA schedule keeps the identity rule", def, correct("fsma", "shipping", fsmaShipping, change(fsmaShipping, `"unit"`, `"dea_schedule":"II","unit"`)), false, nil},
		{"Schedule II quantity change, an existing store's identity policy", identity, correct("pharmacy", "dispense", scheduleIIDispense, change(scheduleIIDispense, `"-30"`, `"-3"`)), false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := approval.Needs(tt.policy, tt.action)
			if err != nil {
				t.Fatal(err)
			}
			if d.Needed != tt.needed || !slices.Equal(d.DiffFields(), tt.diff) {
				t.Fatalf("Needed %v diff %v (reasons %q), want %v %v", d.Needed, d.DiffFields(), d.Reasons, tt.needed, tt.diff)
			}
			if d.Needed && len(d.Reasons) == 0 {
				t.Error("no reason given")
			}
			for _, r := range d.Reasons {
				for _, v := range []string{"-30", "-3", "0781", "A1234", "BW4829137", "陈伟", "Müller"} {
					if strings.Contains(r, v) {
						t.Errorf("a reason names the value %q: %q", v, r)
					}
				}
			}
		})
	}
	t.Run("the diff of a Schedule II quantity change", func(t *testing.T) {
		d, _ := approval.Needs(def, tests[0].action)
		want := []api.IdentityChange{{Field: pharmacy.FieldQuantity, Before: "-30", After: "-3"}}
		if !slices.Equal(d.Diff, want) {
			t.Fatalf("Diff = %+v, want %+v", d.Diff, want)
		}
		if r := strings.Join(d.Reasons, "; "); !strings.Contains(r, "controlled substance") || !strings.Contains(r, pharmacy.FieldQuantity) {
			t.Fatalf("reasons %q name neither the schedule rule nor the field", r)
		}
	})
}

// TestPolicyControlledDefault: a store without a policy record gets the
// controlled default; a store with one keeps it (identity) until a person
// changes it, and that change is in AUDIT.
func TestPolicyControlledDefault(t *testing.T) {
	tests := []struct {
		name     string
		stored   *approval.Policy
		want     string
		isDefalt bool
	}{
		{"new store", nil, approval.CorrectionsControlled, true},
		{"existing store with the former default", &approval.Policy{Corrections: approval.CorrectionsIdentity, ReleasePoison: true, HoldLift: true, PendingTTL: "72h"}, approval.CorrectionsIdentity, false},
		{"existing store with every correction", &approval.Policy{Corrections: approval.CorrectionsAll, PendingTTL: "24h"}, approval.CorrectionsAll, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.stored != nil {
				if _, err := e.policy.Set(ctx(t), policyman, api.PolicySetRequest{Policy: *tt.stored, Reason: "set in 2025 & kept"}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := e.policy.Get(ctx(t))
			if err != nil || got.Policy.Corrections != tt.want || got.Default != tt.isDefalt {
				t.Fatalf("Get = %+v, %v; want corrections %q, default %v", got, err, tt.want, tt.isDefalt)
			}
			// The rule follows the policy in force: a Schedule II
			// quantity change.
			d, err := approval.Needs(got.Policy, approval.Action{Kind: api.ActionCorrect, Domain: "pharmacy", SubjectEventType: "dispense",
				Original: []byte(scheduleIIDispense), Corrected: []byte(strings.Replace(scheduleIIDispense, `"-30"`, `"-3"`, 1))})
			if err != nil || d.Needed != (tt.want != approval.CorrectionsIdentity) {
				t.Fatalf("Needs under %q = %+v, %v", tt.want, d, err)
			}
		})
	}
	t.Run("controlled can be set and is audited", func(t *testing.T) {
		e := newEnv(t)
		old := approval.Policy{Corrections: approval.CorrectionsIdentity, PendingTTL: "72h"}
		if _, err := e.policy.Set(ctx(t), policyman, api.PolicySetRequest{Policy: old, Reason: "the former default"}); err != nil {
			t.Fatal(err)
		}
		p := approval.DefaultPolicy()
		set, err := e.policy.Set(ctx(t), policyman, api.PolicySetRequest{Policy: p, Reason: "DEA registrant: two people for controlled substances"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.policy.Get(ctx(t))
		if err != nil || got.Policy.Corrections != approval.CorrectionsControlled || got.SetBy != policyman.User || got.Revision != set.Revision {
			t.Fatalf("Get = %+v, %v", got, err)
		}
	})
}

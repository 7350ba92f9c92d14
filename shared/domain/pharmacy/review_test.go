package pharmacy_test

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
)

// Pharmacy events as a registrant's system writes them (schemas/testdata/
// pharmacy), with the notes people type.
const (
	scheduleIIDispense = `{"transaction_id":"INV-2025-0181","registrant_dea":"BW4829137","ndc":"00406-0512-01","lot":"L24A0917","expiry":"2026-09-30","quantity_delta":"-30","unit":"EA","event_type":"dispense","dea_schedule":"II","occurred_at":"2025-03-14T15:42:10Z","actor_id":"RPH-0412","x_note":"Müller & Söhne <Apotheke> \"Nord\""}`
	scheduleIVReturn   = `{"transaction_id":"RTS-2025-0077","registrant_dea":"BW4829137","ndc":"0093-0058-01","quantity_delta":"12","unit":"EA","event_type":"return","dea_schedule":"iv","occurred_at":"2025-03-15T09:01:00Z","actor_id":"RPH-陈伟","x_note":"returned to stock"}`
	// noSchedule is an event quarantined for naming no DEA schedule
	// (INVALID_DEA_SCHEDULE): a legend drug sent by mistake.
	noSchedule = `{"transaction_id":"INV-2025-0190","registrant_dea":"BW4829137","ndc":"0781-1506-10","lot":"A1234","quantity_delta":"-60","unit":"EA","event_type":"dispense","dea_schedule":"","occurred_at":"2025-03-14T16:00:00Z","actor_id":"RPH-0412","x_note":"Amoxicillin & clavulanate"}`
)

// TestSecondPerson: the pharmacy domain's second-person rule (issue #40,
// O1): a correction of an event of a controlled substance (Schedules
// II–V, in either payload), or one that changes the quantity, NDC, lot
// or registrant, needs a second person, and the Review lists those
// changes with their values; reasons name no value.
func TestSecondPerson(t *testing.T) {
	change := func(doc, from, to string) string {
		t.Helper()
		if !strings.Contains(doc, from) {
			t.Fatalf("%q is not in the test payload", from)
		}
		return strings.Replace(doc, from, to, 1)
	}
	tests := []struct {
		name                string
		original, corrected string
		controlled          bool
		changes             []domain.Change
	}{
		{"Schedule II quantity change", scheduleIIDispense, change(scheduleIIDispense, `"-30"`, `"-3"`), true,
			[]domain.Change{{Field: pharmacy.FieldQuantity, Before: "-30", After: "-3"}}},
		{"Schedule IV, any correction (a note)", scheduleIVReturn, change(scheduleIVReturn, "returned to stock", "returned to stock by 陈伟"), true, nil},
		{"Schedule IV lower-case, the expiry added", scheduleIVReturn, change(scheduleIVReturn, `"unit"`, `"expiry":"2027-01-31","unit"`), true, nil},
		{"Schedule I named (refused by the rules, controlled all the same)", change(noSchedule, `"dea_schedule":""`, `"dea_schedule":" i "`), noSchedule, true, nil},
		{"not controlled, NDC change", noSchedule, change(noSchedule, "0781-1506-10", "0781-1506-01"), false,
			[]domain.Change{{Field: pharmacy.FieldNDC, Before: "0781-1506-10", After: "0781-1506-01"}}},
		{"not controlled, note change", noSchedule, change(noSchedule, "Amoxicillin & clavulanate", "Amoxicillin & clavulanate 875 mg <b>"), false, nil},
		{"not controlled, NDC written in another layout", noSchedule, change(noSchedule, "0781-1506-10", "00781-1506-10"), false, nil},
		{"not controlled, NDC that does not normalize, changed", change(noSchedule, "0781-1506-10", "NDC <unknown> & Co"), change(noSchedule, "0781-1506-10", "NDC <unknown> & Co."), false,
			[]domain.Change{{Field: pharmacy.FieldNDC, Before: "NDC <unknown> & Co", After: "NDC <unknown> & Co."}}},
		{"not controlled, registrant upper-cased", noSchedule, change(noSchedule, `"BW4829137"`, `"bw4829137"`), false, nil},
		{"not controlled, lot change", noSchedule, change(noSchedule, `"A1234"`, `"A1243"`), false,
			[]domain.Change{{Field: pharmacy.FieldLot, Before: "A1234", After: "A1243"}}},
		{"not controlled, lot trimmed", noSchedule, change(noSchedule, `"A1234"`, `"  A1234 "`), false, nil},
		{"a JSON number quantity fixed as a string: the same quantity", change(noSchedule, `"-60"`, `-60`), noSchedule, false, nil},
		{"a JSON number quantity fixed to another", change(noSchedule, `"-60"`, `-60`), change(noSchedule, `"-60"`, `"-6"`), false,
			[]domain.Change{{Field: pharmacy.FieldQuantity, Before: "-60", After: "-6"}}},
		{"not controlled made Schedule II", noSchedule, change(noSchedule, `"dea_schedule":""`, `"dea_schedule":"II"`), true, nil},
		{"Schedule II made not controlled", scheduleIIDispense, change(scheduleIIDispense, `"dea_schedule":"II"`, `"dea_schedule":""`), true, nil},
		{"registrant change", noSchedule, change(noSchedule, "BW4829137", "AB1234563"), false,
			[]domain.Change{{Field: pharmacy.FieldRegistrant, Before: "BW4829137", After: "AB1234563"}}},
		{"lot removed (null)", noSchedule, change(noSchedule, `"A1234"`, `null`), false,
			[]domain.Change{{Field: pharmacy.FieldLot, Before: "A1234", After: ""}}},
		{"unparseable record fixed", `{"transaction_id": "INV-2025-0190",`, noSchedule, false, []domain.Change{
			{Field: pharmacy.FieldQuantity, Before: "", After: "-60"}, {Field: pharmacy.FieldNDC, Before: "", After: "0781-1506-10"},
			{Field: pharmacy.FieldLot, Before: "", After: "A1234"}, {Field: pharmacy.FieldRegistrant, Before: "", After: "BW4829137"}}},
		{"neither decodes", `["Müller & Söhne"]`, `{"lot": "A1234",`, false, nil},
		{"no change at all", scheduleIVReturn, scheduleIVReturn, true, nil},
	}
	spec := pharmacy.Spec()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := domain.Decode([]byte(tt.original))
			after, _ := domain.Decode([]byte(tt.corrected))
			r := spec.ReviewCorrection(before, after)
			if !slices.Equal(r.Changes, tt.changes) {
				t.Errorf("Changes = %+v, want %+v", r.Changes, tt.changes)
			}
			if got := pharmacy.Controlled(before) || pharmacy.Controlled(after); got != tt.controlled {
				t.Errorf("Controlled = %v, want %v", got, tt.controlled)
			}
			if want := tt.controlled || len(tt.changes) > 0; r.Needed() != want {
				t.Errorf("Needed = %v (reasons %q), want %v", r.Needed(), r.Reasons, want)
			}
			reasons := strings.Join(r.Reasons, "; ")
			if tt.controlled != strings.Contains(reasons, "controlled substance (DEA Schedule II–V)") {
				t.Errorf("reasons %q: the controlled-substance rule is named = %v, want %v", reasons, !tt.controlled, tt.controlled)
			}
			for _, c := range tt.changes {
				if !strings.Contains(reasons, c.Field) {
					t.Errorf("reasons %q do not name the changed field %s", reasons, c.Field)
				}
			}
			for _, v := range []string{"-30", "-3", "0781", "A1234", "BW4829137", "陈伟", "Müller", "NDC <unknown>"} {
				if strings.Contains(reasons, v) {
					t.Errorf("a reason names the value %q: %q", v, reasons)
				}
			}
		})
	}
}

// TestChangeHidesValues: a Change printed or logged shows its field, never
// the values (they are payload values).
func TestChangeHidesValues(t *testing.T) {
	c := domain.Change{Field: pharmacy.FieldLot, Before: "A1&B<2>", After: "陈伟-Müller"}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("correction", "change", c, "changes", []domain.Change{c})
	for _, out := range []string{fmt.Sprint(c), fmt.Sprintf("%v", []domain.Change{c}), logged.String()} {
		if !strings.Contains(out, pharmacy.FieldLot) || strings.Contains(out, "A1&B") || strings.Contains(out, "Müller") {
			t.Errorf("printed %q", out)
		}
	}
}

package redrive

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/record"
)

// TestFailedCorrectionTakesItsFailuresClass: a corrected validation event
// whose replay fails at the downstream becomes exhausted (code
// DOWNSTREAM_UNAVAILABLE) and a default drain replays and commits it once
// the downstream is back; one whose correction the gate refuses again
// stays validation and a default drain leaves it alone.
func TestFailedCorrectionTakesItsFailuresClass(t *testing.T) {
	e := newEnv(t)
	e.startRedriver(t, redriverConfig())
	e.identityCorrections(t)
	for i, tc := range []struct {
		name    string
		fix     func(doc map[string]any)
		down    bool
		class   record.Class
		code    codes.Code
		drained bool // a default drain commits it
	}{
		{"corrected, the downstream down", func(map[string]any) {}, true, record.ClassExhausted, codes.DownstreamUnavailable, true},
		{"corrected wrongly", func(doc map[string]any) { doc["dea_schedule"] = "C-II" }, false, record.ClassValidation, pharmacy.InvalidDEASchedule, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good := e.pharmacyEvent(t, 800+i)
			var doc map[string]any
			_ = json.Unmarshal(good.data, &doc)
			doc["dea_schedule"] = "2" // INVALID_DEA_SCHEDULE: quarantined as validation
			broken, _ := json.Marshal(doc)
			e.publish(t, event{subject: "events.pharmacy.dispense", data: broken})
			id := record.PayloadDLQID("pharmacy", "events.pharmacy.dispense", broken)
			e.waitState(t, id, func(st record.State) bool { return st.Class == record.ClassValidation }, "validation")

			_ = json.Unmarshal(good.data, &doc)
			tc.fix(doc)
			fixed, _ := json.Marshal(doc)
			e.down.down.Store(tc.down)
			var rep api.RedriveReply
			e.requestJSON(t, api.Redrive, api.RedriveRequest{DLQID: id, Payload: fixed, Reason: "schedule fixed from the invoice of Müller & Söhne <Großhandel>"}, &rep)
			st := e.waitState(t, id, func(st record.State) bool { return st.Status == record.StatusOpen && st.RedriveCount == 1 }, "open after a failed replay")
			e.down.down.Store(false)
			recs, _, _ := e.chain(t, id)
			last := recs[len(recs)-1]
			if last.Kind != record.KindReplayFailed || last.Class != tc.class || last.ErrorCode != tc.code || st.Class != tc.class || !st.Corrected {
				t.Fatalf("last record %s class %s code %s; state class %s corrected %v; want replay_failed %s %s",
					last.Kind, last.Class, last.ErrorCode, st.Class, st.Corrected, tc.class, tc.code)
			}
			var dry api.DrainStartReply
			e.requestJSON(t, api.DrainStart, api.DrainStartRequest{DryRun: true, Filter: api.DrainFilter{DLQIDs: []string{id}}}, &dry)
			if got := dry.Plan.Selected == 1; got != tc.drained {
				t.Fatalf("a default drain selects it: %v, want %v (plan %+v)", got, tc.drained, dry.Plan)
			}
			if !tc.drained {
				return
			}
			ds := e.waitDrain(t, e.startDrain(t, api.DrainStartRequest{Filter: api.DrainFilter{DLQIDs: []string{id}}, Reason: "downstream back"}), 30*time.Second)
			if ds.Committed != 1 || ds.Outcome != api.DrainOutcomeAllResolved {
				t.Fatalf("drain %s %+v (%s)", ds.Outcome, ds.DrainCounts, ds.OutcomeReason)
			}
			good.dlq = id
			good.data = fixed
			e.committedOnce(t, []event{good})
		})
	}
}

package approvals

import (
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/record"
)

// TestDismiss: a dismissal closes a chain for good without committing it.
// Under the default policy it waits for a second person; once approved
// the chain is resolved by a dismissed record naming the operator and the
// reason, is never selected by a drain again, and no longer holds the
// later event of its ordering key.
func TestDismiss(t *testing.T) {
	e := newEnv(t)
	e.startRedriver(t, nil, e.redriverConfig())
	// Two exhausted dispenses of one registrant, NDC and lot: the earlier
	// holds the later.
	early, late := dispense("TX-DISMISS-1"), dispense("TX-DISMISS-2")
	early["lot"], late["lot"] = "L-Müller & Söhne", "L-Müller & Söhne"
	early["occurred_at"] = "2001-01-01T00:00:00Z"
	junk, _ := e.seedDoc(t, early, 2_000_001)
	held, _ := e.seedDoc(t, late, 2_000_002)

	plan := func(t *testing.T, id string) api.DrainPlan {
		t.Helper()
		var rep api.DrainStartReply
		e.ok(t, operator, api.DrainStart, api.DrainStartRequest{DryRun: true, Filter: api.DrainFilter{DLQIDs: []string{id}}}, &rep)
		if rep.Plan == nil {
			t.Fatal("no plan")
		}
		return *rep.Plan
	}
	if p := plan(t, held); p.HeldByEarlier != 1 || len(p.HeldBy) != 1 || p.HeldBy[0].DLQID != junk {
		t.Fatalf("before: plan %+v, want the later event held by %s", p, junk)
	}

	reason := `test event "Pharmacie Saint-Étienne" <onboarding>, never a dispense`
	refusals := []struct {
		name, user string
		req        api.DismissRequest
		code       string // "": the server refuses it (no import)
	}{
		{"without a reason", operator, api.DismissRequest{DLQID: junk, Reason: " "}, api.ErrBadRequest},
		{"by a viewer", viewer, api.DismissRequest{DLQID: junk, Reason: reason}, ""},
		{"of no chain", operator, api.DismissRequest{DLQID: "pharmacy_00000000000000000000000000000000", Reason: reason}, api.ErrNotFound},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			if tc.code == "" {
				if _, err := e.call(t, tc.user, api.Dismiss, tc.req, 2*time.Second); err == nil {
					t.Error("not refused")
				}
				return
			}
			if ae := e.refused(t, tc.user, api.Dismiss, tc.req); ae.Code != tc.code {
				t.Errorf("code %s, want %s", ae.Code, tc.code)
			}
		})
	}

	a := e.pending(t, operator, api.Dismiss, e.dismiss(t, operator, api.DismissRequest{DLQID: junk, Reason: reason}))
	if a.Action != api.ActionDismiss || a.ChainRecords != 1 {
		t.Fatalf("pending %+v", a)
	}
	if recs, st, _ := e.chain(t, junk); len(recs) != 1 || st.Status != record.StatusOpen {
		t.Fatalf("a pending dismissal changed the chain: %d records, %s", len(recs), st.Status)
	}
	if _, err := e.call(t, operator, api.ApprovalApprove, e.approveReq(t, operator, a.ID, "mine"), 2*time.Second); err == nil {
		t.Fatal("the requester approved its own dismissal")
	}
	var rep api.ApprovalReply
	e.ok(t, approver, api.ApprovalApprove, e.approveReq(t, approver, a.ID, "confirmed with the pharmacy: a test"), &rep)
	if rep.Approval.Outcome != "dismissed" {
		t.Fatalf("approved %+v", rep.Approval)
	}
	recs, st, err := e.chain(t, junk)
	if err != nil || len(recs) != 3 || recs[1].Kind != record.KindApproved || recs[2].Kind != record.KindDismissed ||
		recs[2].Actor != operator || recs[2].Reason != reason || st.Status != record.StatusResolved || st.Resolution != record.KindDismissed {
		t.Fatalf("chain after the approved dismissal: %d records, %s/%s, %v", len(recs), st.Status, st.Resolution, err)
	}

	t.Run("never replayed", func(t *testing.T) {
		if p := plan(t, junk); p.Selected != 0 || p.Excluded["resolved"] != 1 {
			t.Errorf("plan of the dismissed chain %+v, want it excluded as resolved", p)
		}
		// A redrive of a resolved chain answers its resolution and
		// replays nothing.
		var rr api.RedriveReply
		e.ok(t, operator, api.Redrive, api.RedriveRequest{DLQID: junk, Reason: "try"}, &rr)
		if recs, st, _ := e.chain(t, junk); rr.Outcome == api.OutcomeReplayed || len(recs) != 3 || st.Resolution != record.KindDismissed {
			t.Errorf("redrive of the dismissed chain: %+v, chain of %d records resolved by %s", rr, len(recs), st.Resolution)
		}
	})
	t.Run("holds nothing", func(t *testing.T) {
		if p := plan(t, held); p.Selected != 1 || p.HeldByEarlier != 0 {
			t.Errorf("plan of the later event %+v, want it no longer held", p)
		}
	})
	t.Run("dismissed once", func(t *testing.T) {
		if ae := e.refused(t, operator, api.Dismiss, api.DismissRequest{DLQID: junk, Reason: reason}); ae.Code != api.ErrInvalidTransition {
			t.Errorf("a second dismissal: %s, want %s", ae.Code, api.ErrInvalidTransition)
		}
	})
}

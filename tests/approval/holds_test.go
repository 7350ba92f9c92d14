package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// startAuditor runs an auditor as its own user (it serves the legal
// holds) and adds the inspector, who places them.
func (e *env) startAuditor(tb testing.TB) {
	tb.Helper()
	cfg := auditor.DefaultConfig()
	cfg.CheckpointInterval, cfg.ReconcileInterval = 0, 0
	a, err := auditor.New(e.srv.ConnectAs(tb, access.Auditor), cfg, testLogger())
	if err != nil {
		tb.Fatal(err)
	}
	natstest.Run(tb, "auditor", a.Run)
	e.people[access.DefaultPerson(access.RoleInspector)] = e.srv.ConnectAs(tb, access.DefaultPerson(access.RoleInspector))
	e.waitService(tb, "auditor")
}

// heldDispense is a dispense of tx by registrant, of lot (the ordering
// key is the registrant, the NDC and the lot), at occurred.
func heldDispense(tx, registrant, lot, occurred string) map[string]any {
	d := dispense(tx)
	d["registrant_dea"], d["lot"], d["occurred_at"] = registrant, lot, occurred
	return d
}

// drain runs a drain as the operator to its end and returns its status.
func (e *env) drain(tb testing.TB, req api.DrainStartRequest) api.DrainState {
	tb.Helper()
	var rep api.DrainStartReply
	e.ok(tb, access.DefaultPerson(access.RoleOperator), api.DrainStart, req, &rep)
	var st api.DrainState
	natstest.CheckFor(tb, 30*time.Second, 50*time.Millisecond, func() error {
		e.ok(tb, access.DefaultPerson(access.RoleViewer), api.DrainStatus, api.DrainIDRequest{DrainID: rep.DrainID}, &st)
		if st.FinishedAt == nil {
			return errors.New(st.Status)
		}
		return nil
	})
	return st
}

// kinds lists the kinds of a chain's records.
func (e *env) kinds(tb testing.TB, id string) []record.Kind {
	tb.Helper()
	recs, _, err := e.chain(tb, id)
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]record.Kind, len(recs))
	for i, r := range recs {
		out[i] = r.Kind
	}
	return out
}

// replays counts a chain's redrive_requested records.
func (e *env) replays(tb testing.TB, id string) int {
	tb.Helper()
	n := 0
	for _, k := range e.kinds(tb, id) {
		if k == record.KindRedriveRequested {
			n++
		}
	}
	return n
}

// TestLegalHoldBlocksRedriverAndLiftNeedsApproval: a hold of a party's events placed by
// the inspector keeps a drain (with and without ignore_order), a redrive
// and a release off the held events and the later event of their key;
// the operator's lift under the default policy waits for the approver's
// signature, after which a drain replays them once; under a policy
// without hold_lift the lift is immediate.
func TestLegalHoldBlocksRedriverAndLiftNeedsApproval(t *testing.T) {
	e := newEnv(t)
	e.startRedriver(t, nil, e.redriverConfig())
	e.startAuditor(t)
	operator, approver, inspector, viewer := access.DefaultPerson(access.RoleOperator), access.DefaultPerson(access.RoleApprover), access.DefaultPerson(access.RoleInspector), access.DefaultPerson(access.RoleViewer)
	const party, other, caseID = "AB1234563", "BW4829137", "CASE-2026-07"

	// The hold holds the party's events quarantined before cut: held and
	// poison, not the later event of held's ordering key (the pharmacy
	// key is the registrant's own, so only the same party's event can
	// follow held in it).
	held, heldKey := e.seedDoc(t, heldDispense("TX-H1", party, "LK", "2025-03-14T15:00:00Z"), 2_000_001)
	poison, _ := e.seedDoc(t, heldDispense("TX-H4", party, "LP", "2025-03-14T15:00:00Z"), 2_000_004, record.KindPoisoned)
	cut := time.Now().UTC()
	later, laterKey := e.seedDoc(t, heldDispense("TX-H2", party, "LK", "2025-03-14T16:00:00Z"), 2_000_002)
	free, freeKey := e.seedDoc(t, heldDispense("TX-H3", other, "LF", "2025-03-14T15:00:00Z"), 2_000_003)

	var placed api.HoldReply
	e.ok(t, inspector, api.HoldPlace, api.HoldPlaceRequest{CaseID: caseID, Reason: "subpoena",
		Target: api.HoldTarget{Filter: &api.HoldFilter{PartyID: party, Until: &cut}}}, &placed)
	holdID := placed.Hold.ID
	legal := api.Blocker{DLQID: held, Reason: api.ReasonLegalHold, HoldID: holdID, CaseID: caseID, PartyID: party}

	t.Run("dry run shows the held events", func(t *testing.T) {
		var rep api.DrainStartReply
		e.ok(t, operator, api.DrainStart, api.DrainStartRequest{Filter: api.DrainFilter{Domain: "pharmacy"}, Reason: "plan", DryRun: true}, &rep)
		p := rep.Plan
		if p == nil {
			t.Fatalf("no plan: %+v", rep)
		}
		want := legal
		want.Holds = 1
		if p.Selected != 3 || p.HeldByHold != 1 || len(p.UnderHold) != 1 || p.UnderHold[0] != legal ||
			p.HeldByEarlier != 1 || len(p.HeldBy) != 1 || p.HeldBy[0] != want {
			t.Errorf("plan: selected %d, held by hold %d %+v, held by earlier %d %+v; want 3, 1 [%+v], 1 [%+v]",
				p.Selected, p.HeldByHold, p.UnderHold, p.HeldByEarlier, p.HeldBy, legal, want)
		}
	})

	t.Run("a hold blocks a drain", func(t *testing.T) {
		st := e.drain(t, api.DrainStartRequest{Filter: api.DrainFilter{Domain: "pharmacy"}, Reason: "downstream back"})
		if st.Status != api.DrainCompleted || st.Committed != 1 || st.Held != 2 || st.HeldByHold != 1 || st.HeldByEarlier != 1 ||
			len(st.UnderHold) != 1 || st.UnderHold[0] != legal || len(st.HeldBy) != 1 || st.HeldBy[0].HoldID != holdID {
			t.Errorf("drain: %s %+v under hold %+v held by %+v", st.Status, st.DrainCounts, st.UnderHold, st.HeldBy)
		}
		e.committedOnce(t, freeKey)
		for _, id := range []string{held, later} {
			if n := e.replays(t, id); n != 0 {
				t.Errorf("%s replayed %d times under the hold", id, n)
			}
		}
	})

	t.Run("ignore_order does not skip past a held event", func(t *testing.T) {
		st := e.drain(t, api.DrainStartRequest{Filter: api.DrainFilter{DLQIDs: []string{held, later}}, IgnoreOrder: true, Reason: "order waived"})
		if st.Status != api.DrainCompleted || st.Committed != 0 || st.HeldByHold != 1 || st.Held != 2 {
			t.Errorf("ignore_order drain: %s %+v", st.Status, st.DrainCounts)
		}
		for _, id := range []string{held, later} {
			if n := e.replays(t, id); n != 0 {
				t.Errorf("%s replayed %d times under the hold", id, n)
			}
		}
	})

	t.Run("redrive and release answer HELD", func(t *testing.T) {
		if ae := e.refused(t, operator, api.Redrive, api.RedriveRequest{DLQID: held, Reason: "try"}); ae.Code != api.ErrHeld {
			t.Errorf("redrive of a held event: %+v, want %s", ae, api.ErrHeld)
		}
		if ae := e.refused(t, operator, api.Release, e.release(t, operator, api.ReleaseRequest{DLQID: poison, Reason: "try"})); ae.Code != api.ErrHeld {
			t.Errorf("release of a held event: %+v, want %s", ae, api.ErrHeld)
		}
	})

	t.Run("bad lifts are coded", func(t *testing.T) {
		for _, c := range []struct {
			name string
			req  string
			code string
		}{
			{"no reason", `{"id":"` + holdID + `","case_id":"` + caseID + `"}`, api.ErrBadRequest},
			{"no id", `{"case_id":"` + caseID + `","reason":"r"}`, api.ErrBadRequest},
			{"unknown member", `{"id":"` + holdID + `","case_id":"` + caseID + `","reason":"r","approved":true}`, api.ErrBadRequest},
			{"unknown hold", `{"id":"hold-nope","case_id":"` + caseID + `","reason":"r"}`, api.ErrNotFound},
			{"other case", `{"id":"` + holdID + `","case_id":"CASE-OTHER","reason":"r"}`, api.ErrNotPlaced},
			// issue #38: a lift is its person's signed decision.
			{"not signed", string(mustJSON(t, api.HoldLiftRequest{ID: holdID, CaseID: caseID, Reason: "case closed"})), api.ErrDecisionUnsigned},
			{"signed by a key never registered", string(mustJSON(t, approvaltest.NewPerson(t, operator, access.RoleOperator).SignLift(t, e.js,
				api.HoldLiftRequest{ID: holdID, CaseID: caseID, Reason: "case closed"}, access.RoleOperator, e.clock.Now()))), api.ErrDecisionUnsigned},
			{"signed by another person", string(mustJSON(t, e.signer(t, approver).SignLift(t, e.js,
				api.HoldLiftRequest{ID: holdID, CaseID: caseID, Reason: "case closed"}, access.RoleApprover, e.clock.Now()))), api.ErrDecisionUnsigned},
			{"another reason than the one signed", func() string {
				req := e.lift(t, operator, api.HoldLiftRequest{ID: holdID, CaseID: caseID, Reason: "case closed"})
				req.Reason = "counsel said so"
				return string(mustJSON(t, req))
			}(), api.ErrDecisionUnsigned},
		} {
			t.Run(c.name, func(t *testing.T) {
				if ae := e.refused(t, operator, api.HoldLift, []byte(c.req)); ae.Code != c.code {
					t.Errorf("hold.lift %s: %+v, want %s", c.req, ae, c.code)
				}
			})
		}
	})

	var pending api.Approval
	t.Run("the operator's lift waits for approval", func(t *testing.T) {
		pending = e.pending(t, operator, api.HoldLift, e.lift(t, operator, api.HoldLiftRequest{ID: holdID, CaseID: caseID, Reason: "case closed"}))
		if pending.Action != api.ActionHoldLift || pending.HoldID != holdID || pending.Requester != operator || pending.Status != api.ApprovalPending {
			t.Errorf("pending approval %+v", pending)
		}
		var got api.HoldReply
		e.ok(t, viewer, api.HoldGet, api.HoldGetRequest{ID: holdID}, &got)
		if got.Hold.Status != api.HoldActive {
			t.Errorf("a pending lift lifted the hold: %+v", got.Hold)
		}
		if ae := e.refused(t, operator, api.Redrive, api.RedriveRequest{DLQID: held, Reason: "try"}); ae.Code != api.ErrHeld {
			t.Errorf("redrive while the lift is pending: %+v", ae)
		}
		// No person reaches the execution of approvals; the redriver's
		// own request for an unsigned approval lifts nothing.
		if _, err := e.call(t, operator, api.HoldLiftApproved, api.HoldLiftApprovedRequest{ApprovalID: pending.ID}, 2*time.Second); err == nil {
			t.Error("the operator reached hold.lift.approved")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := endpoint.Call[api.HoldLiftApprovedRequest, api.HoldReply](ctx, e.srv.ConnectAs(t, access.Redriver), api.HoldLiftApproved,
			api.HoldLiftApprovedRequest{ApprovalID: pending.ID})
		if ae := api.AsError(err); ae == nil || ae.Code != api.ErrForbidden {
			t.Errorf("hold.lift.approved of a pending approval: %v, want %s", err, api.ErrForbidden)
		}
		// The requester cannot sign his own request.
		if _, err := e.call(t, operator, api.ApprovalApprove, e.approveReq(t, operator, pending.ID, "mine"), 2*time.Second); err == nil {
			t.Error("the operator approved his own lift")
		}
		e.ok(t, viewer, api.HoldGet, api.HoldGetRequest{ID: holdID}, &got)
		if got.Hold.Status != api.HoldActive {
			t.Errorf("the hold was lifted without a signature: %+v", got.Hold)
		}
	})

	t.Run("the approved lift releases the drain", func(t *testing.T) {
		var rep api.ApprovalReply
		e.ok(t, approver, api.ApprovalApprove, e.approveReq(t, approver, pending.ID, "counsel released the case"), &rep)
		if rep.Approval.Status != api.ApprovalExecuted || rep.Approval.Outcome != "lifted" {
			t.Fatalf("approved lift: %+v", rep.Approval)
		}
		var got api.HoldReply
		e.ok(t, viewer, api.HoldGet, api.HoldGetRequest{ID: holdID}, &got)
		if h := got.Hold; h.Status != api.HoldLifted || h.LiftedBy != operator || h.LiftApprovalID != pending.ID || h.LiftApprovedBy != approver {
			t.Errorf("lifted hold %+v", h)
		}
		recs := e.waitState(t, held, func(st record.State) bool { return !st.Held() }, "not held")
		if last := recs[len(recs)-1]; last.Kind != record.KindHoldLifted || last.Actor != operator {
			t.Errorf("the lift's chain record: %s by %s, want %s by %s", last.Kind, last.Actor, record.KindHoldLifted, operator)
		}
		var act api.AuditAction
		if err := json.Unmarshal(e.auditLast(t, subjects.AuditAction("approval", pending.ID)), &act); err != nil || act.Action != approval.AuditExecuted {
			t.Errorf("AUDIT approval action %+v %v", act, err)
		}
		var lifted struct {
			ApprovalID string `json:"approval_id"`
			ApprovedBy string `json:"approved_by"`
		}
		if err := json.Unmarshal(e.auditLast(t, subjects.AuditAction("hold", holdID)), &act); err != nil || act.Actor != operator ||
			json.Unmarshal(act.Detail, &lifted) != nil || lifted.ApprovalID != pending.ID || lifted.ApprovedBy != approver {
			t.Errorf("AUDIT hold lift %+v (%s) %v", act, act.Detail, err)
		}
		st := e.drain(t, api.DrainStartRequest{Filter: api.DrainFilter{Domain: "pharmacy"}, Reason: "hold lifted"})
		if st.Status != api.DrainCompleted || st.Committed != 2 || st.HeldByHold != 0 {
			t.Errorf("drain after the lift: %s %+v", st.Status, st.DrainCounts)
		}
		for _, k := range []string{heldKey, laterKey, freeKey} {
			e.committedOnce(t, k)
		}
		for _, id := range []string{held, later, free} {
			if n := e.replays(t, id); n != 1 {
				t.Errorf("%s replayed %d times, want once", id, n)
			}
		}
	})

	t.Run("without hold_lift in the policy the lift is immediate", func(t *testing.T) {
		p := approval.DefaultPolicy()
		p.HoldLift = false
		e.ok(t, access.DefaultPerson(access.RolePolicy), api.PolicySet, api.PolicySetRequest{Policy: p, Reason: "counsel lifts alone"}, nil)
		var h2 api.HoldReply
		e.ok(t, inspector, api.HoldPlace, api.HoldPlaceRequest{CaseID: "CASE-2", Reason: "audit", Target: api.HoldTarget{DLQID: poison}}, &h2)
		var rep api.HoldReply
		e.ok(t, operator, api.HoldLift, e.lift(t, operator, api.HoldLiftRequest{ID: h2.Hold.ID, CaseID: "CASE-2", Reason: "done"}), &rep)
		if rep.Hold.Status != api.HoldLifted || rep.Hold.LiftApprovalID != "" || !maps.Equal(map[string]bool{poison: true}, set(rep.DLQIDs)) {
			t.Errorf("immediate lift: %+v", rep)
		}
	})
}

// set is the set of ids.
func set(ids []string) map[string]bool {
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

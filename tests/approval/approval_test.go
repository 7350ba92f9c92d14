package approvals

import (
	"encoding/json"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/failpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

var (
	operator = access.DefaultPerson(access.RoleOperator)
	approver = access.DefaultPerson(access.RoleApprover)
	policy   = access.DefaultPerson(access.RolePolicy)
	viewer   = access.DefaultPerson(access.RoleViewer)
)

// TestTwoPersonCorrection: an identity-changing correction by the operator
// waits for a second person and changes nothing; the operator cannot
// approve it; a decision not signed by the approver's own key is refused
// and nothing runs;
// the approver reviews it (recorded in the access audit) and approves it
// with his own key and a meaning: the chain gets the signature, then the
// correction by the operator, and the replay commits once. Approving again
// is ALREADY_DECIDED.
func TestTwoPersonCorrection(t *testing.T) {
	e := newEnv(t)
	e.startRedriver(t, nil, e.redriverConfig())
	id := e.quarantineInvalid(t, "TX-A1")
	corrected, key := e.receive500(t, "TX-A1")
	req := api.RedriveRequest{DLQID: id, Payload: corrected, Reason: "the invoice says a receive of 500"}

	began := time.Now()
	a := e.pending(t, operator, api.Redrive, req)
	t.Logf("APPROVAL_REQUIRED answered in %s", time.Since(began).Round(time.Millisecond))
	if a.Status != api.ApprovalPending || a.Requester != operator || a.Action != api.ActionCorrect || a.ChainRecords != 1 {
		t.Fatalf("pending approval %+v", a)
	}
	if a.Request != nil || a.Diff != nil || !slices.Contains(a.DiffFields, approval.FieldEventType) {
		t.Errorf("the APPROVAL_REQUIRED answer shows request %d bytes, diff %v, fields %v; want no values and event_type", len(a.Request), a.Diff, a.DiffFields)
	}
	if recs, _, _ := e.chain(t, id); len(recs) != 1 {
		t.Fatalf("the request changed the chain: %d records", len(recs))
	}

	t.Run("the requester cannot approve", func(t *testing.T) {
		// The operator's account does not import approval.approve: the
		// server itself refuses (no responder in his account).
		_, err := e.call(t, operator, api.ApprovalApprove, e.approveReq(t, operator, a.ID, "mine"), 2*time.Second)
		if err == nil || api.AsError(err) != nil {
			t.Fatalf("operator approval.approve: %v, want no route", err)
		}
	})
	t.Run("not signed by the approver's own key", func(t *testing.T) {
		defer func(began time.Time) { t.Logf("refused in %s", time.Since(began).Round(time.Millisecond)) }(time.Now())
		// A key the approver never registered (what a stolen service
		// secret could make), then none at all.
		stranger := approvaltest.NewPerson(t, approver, access.RoleApprover)
		forged := api.ApprovalDecisionRequest{ID: a.ID, Meaning: "reviewed", Signed: stranger.Approve(approvaltest.Stored(t, e.js, a.ID), "reviewed", e.clock.Now())}
		for _, req := range []api.ApprovalDecisionRequest{forged, {ID: a.ID, Meaning: "reviewed"}} {
			if ae := e.refused(t, approver, api.ApprovalApprove, req); ae.Code != api.ErrDecisionUnsigned {
				t.Fatalf("code %s, want %s", ae.Code, api.ErrDecisionUnsigned)
			}
		}
		if recs, _, _ := e.chain(t, id); len(recs) != 1 {
			t.Fatalf("a refused signature changed the chain: %d records", len(recs))
		}
	})
	t.Run("bad requests", func(t *testing.T) {
		for _, tc := range []struct {
			name, subject, body, code, field string
		}{
			{"unknown member", api.ApprovalApprove, `{"id":"` + a.ID + `","meaning":"m","password":"p","force":true}`, api.ErrBadRequest, "force"},
			{"no meaning", api.ApprovalApprove, `{"id":"` + a.ID + `","password":"p"}`, api.ErrBadRequest, "meaning"},
			{"no id", api.ApprovalApprove, `{"meaning":"m","password":"p"}`, api.ErrBadRequest, "id"},
			{"missing approval", api.ApprovalApprove, `{"id":"appr-nope","meaning":"m","password":"p"}`, api.ErrNotFound, ""},
			{"get no id", api.ApprovalGet, `{}`, api.ErrBadRequest, "id"},
			{"get missing", api.ApprovalGet, `{"id":"appr-nope"}`, api.ErrNotFound, ""},
			{"list unknown status", api.ApprovalList, `{"status":"maybe"}`, api.ErrBadRequest, "status"},
			{"reject no meaning", api.ApprovalReject, `{"id":"` + a.ID + `"}`, api.ErrBadRequest, "meaning"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ae := e.refused(t, approver, tc.subject, []byte(tc.body))
				if ae.Code != tc.code || ae.Field != tc.field {
					t.Errorf("%+v, want %s field %q", ae, tc.code, tc.field)
				}
			})
		}
	})
	t.Run("review", func(t *testing.T) {
		var v api.ApprovalReply
		e.ok(t, viewer, api.ApprovalGet, api.ApprovalGetRequest{ID: a.ID}, &v)
		if v.Approval.Request != nil || v.Approval.Diff != nil {
			t.Errorf("a viewer sees the request or the diff values")
		}
		var rep api.ApprovalReply
		e.ok(t, approver, api.ApprovalGet, api.ApprovalGetRequest{ID: a.ID}, &rep)
		if len(rep.Approval.Diff) == 0 || rep.Approval.Request == nil {
			t.Fatalf("the approver does not see what he signs: %+v", rep.Approval)
		}
		var got api.RedriveRequest
		if err := json.Unmarshal(rep.Approval.Request, &got); err != nil || string(got.Payload) != string(corrected) {
			t.Errorf("the request under review is not the corrected payload byte for byte: %v", err)
		}
		var acc api.AccessRecord
		if err := json.Unmarshal(e.auditLast(t, subjects.AuditAccess(approver)), &acc); err != nil {
			t.Fatal(err)
		}
		if acc.User != approver || acc.Action != api.AccessReview || acc.Reason != a.ID+" review" || !slices.Equal(acc.DLQIDs, []string{id}) {
			t.Errorf("access record %+v", acc)
		}
		var list api.ApprovalListReply
		e.ok(t, approver, api.ApprovalList, api.ApprovalListRequest{Status: api.ApprovalPending}, &list)
		if len(list.Approvals) != 1 || list.Approvals[0].ID != a.ID || list.Approvals[0].Request != nil || list.Approvals[0].Diff != nil {
			t.Errorf("approval.list %+v, want the one approval without values", list)
		}
	})

	var signed api.ApprovalReply
	began = time.Now()
	e.ok(t, approver, api.ApprovalApprove, e.approveReq(t, approver, a.ID, "reviewed the correction against the invoice"), &signed)
	t.Logf("approval.approve (re-authentication, signature, correction, replay committed) answered in %s", time.Since(began).Round(time.Millisecond))
	if signed.Approval.Status != api.ApprovalExecuted || signed.Approval.Outcome != api.OutcomeReplayed || signed.Approval.Decider != approver {
		t.Fatalf("approved %+v", signed.Approval)
	}
	recs := e.waitState(t, id, func(st record.State) bool { return st.Status == record.StatusResolved }, "resolved")
	if len(recs) < 3 {
		t.Fatalf("chain of %d records", len(recs))
	}
	sig := recs[1].Signature
	if recs[1].Kind != record.KindApproved || sig == nil || sig.ApprovalID != a.ID || sig.Requester != operator || sig.Approver != approver ||
		sig.Meaning != "reviewed the correction against the invoice" || sig.SignedAt.IsZero() || sig.RequestedAt.IsZero() || recs[1].Actor != approver {
		t.Errorf("record 1: %s by %s, signature %+v", recs[1].Kind, recs[1].Actor, sig)
	}
	if recs[2].Kind != record.KindCorrected || recs[2].Actor != operator {
		t.Errorf("record 2: %s by %s, want corrected by the operator", recs[2].Kind, recs[2].Actor)
	}
	if p, _ := recs[2].Payload.Bytes(); string(p) != string(corrected) {
		t.Errorf("the stored correction differs from the request")
	}
	e.committedOnce(t, key)

	ae := e.refused(t, approver, api.ApprovalApprove, e.approveReq(t, approver, a.ID, "again"))
	if ae.Code != api.ErrAlreadyDecided {
		t.Errorf("second approval: %s, want %s", ae.Code, api.ErrAlreadyDecided)
	}
	var act api.AuditAction
	if err := json.Unmarshal(e.auditLast(t, subjects.AuditAction("approval", a.ID)), &act); err != nil || act.Action != approval.AuditExecuted {
		t.Errorf("last AUDIT action of the approval: %+v %v", act, err)
	}
}

// TestPolicyReleaseDrainExpiry: the default policy holds a release of
// poison for approval; the policy is changed only by the policy role
// (recorded in AUDIT); a drain above its limit waits and runs once
// approved; a pending approval past the policy's TTL is EXPIRED.
func TestPolicyReleaseDrainExpiry(t *testing.T) {
	e := newEnv(t)
	e.startRedriver(t, nil, e.redriverConfig())

	t.Run("release of poison", func(t *testing.T) {
		ids, _ := e.seed(t, []string{"TX-P1"}, record.KindPoisoned)
		a := e.pending(t, operator, api.Release, e.release(t, operator, api.ReleaseRequest{DLQID: ids[0], Reason: "supplier confirmed"}))
		if a.Action != api.ActionRelease || a.ChainRecords != 2 {
			t.Fatalf("pending %+v", a)
		}
		// Asked twice: the second approval, signed after the first ran,
		// finds the chain moved on and is refused as stale (issue #40),
		// never executed.
		again := e.pending(t, operator, api.Release, e.release(t, operator, api.ReleaseRequest{DLQID: ids[0], Reason: "asked again"}))
		defer func() {
			ae := e.refused(t, approver, api.ApprovalApprove, e.approveReq(t, approver, again.ID, "stale"))
			var got api.ApprovalReply
			e.ok(t, approver, api.ApprovalGet, api.ApprovalGetRequest{ID: again.ID}, &got)
			recs, _, _ := e.chain(t, ids[0])
			if ae.Code != api.ErrConflict || got.Approval.Status != api.ApprovalRefused || got.Approval.Outcome != approval.StaleOutcome || got.Approval.ExecutedAt != nil || len(recs) != 4 {
				t.Errorf("the stale approval: %s, stored %s/%s, chain of %d records; want refused as stale and nothing appended",
					ae.Code, got.Approval.Status, got.Approval.Outcome, len(recs))
			}
		}()
		var rep api.ApprovalReply
		e.ok(t, approver, api.ApprovalApprove, e.approveReq(t, approver, a.ID, "checked with the supplier"), &rep)
		if rep.Approval.Outcome != "released" {
			t.Fatalf("approved %+v", rep.Approval)
		}
		recs, st, _ := e.chain(t, ids[0])
		if st.Status != record.StatusOpen || len(recs) != 4 || recs[2].Kind != record.KindApproved || recs[3].Kind != record.KindReleased || recs[3].Actor != operator {
			t.Errorf("chain after the approved release: %s, %d records", st.Status, len(recs))
		}
	})

	t.Run("rejected", func(t *testing.T) {
		ids, _ := e.seed(t, []string{"TX-R1"}, record.KindPoisoned)
		a := e.pending(t, operator, api.Release, e.release(t, operator, api.ReleaseRequest{DLQID: ids[0], Reason: "maybe"}))
		var rep api.ApprovalReply
		e.ok(t, approver, api.ApprovalReject, e.rejectReq(t, approver, a.ID, "the supplier did not confirm"), &rep)
		if rep.Approval.Status != api.ApprovalRejected || rep.Approval.Decider != approver {
			t.Errorf("rejected %+v", rep.Approval)
		}
		if ae := e.refused(t, approver, api.ApprovalApprove, e.approveReq(t, approver, a.ID, "after all")); ae.Code != api.ErrAlreadyDecided {
			t.Errorf("approval of a rejected request: %s, want %s", ae.Code, api.ErrAlreadyDecided)
		}
		if recs, st, _ := e.chain(t, ids[0]); len(recs) != 2 || st.Status != record.StatusPoison {
			t.Errorf("a rejected release changed the chain: %d records, %s", len(recs), st.Status)
		}
	})

	t.Run("two signatures at once", func(t *testing.T) {
		ids, _ := e.seed(t, []string{"TX-S1"}, record.KindPoisoned)
		a := e.pending(t, operator, api.Release, e.release(t, operator, api.ReleaseRequest{DLQID: ids[0], Reason: "confirmed"}))
		const n = 4
		codes := make(chan string, n)
		for range n {
			go func() {
				_, err := e.call(t, approver, api.ApprovalApprove, e.approveReq(t, approver, a.ID, "confirmed"), 30*time.Second)
				codes <- api.CodeOf(err)
			}()
		}
		won := 0
		for range n {
			switch c := <-codes; c {
			case "":
				won++
			case api.ErrAlreadyDecided:
			default:
				t.Errorf("a concurrent signature: %s", c)
			}
		}
		recs, _, _ := e.chain(t, ids[0])
		if won != 1 || len(recs) != 4 || recs[2].Kind != record.KindApproved || recs[3].Kind != record.KindReleased {
			t.Errorf("%d signatures won, chain of %d records; want 1 and one approved, one released", won, len(recs))
		}
	})

	t.Run("policy", func(t *testing.T) {
		p := approval.DefaultPolicy()
		p.DrainMaxSelected, p.PendingTTL = 1, "1m"
		set := api.PolicySetRequest{Policy: p, Reason: "drains of more than one event need a second person"}
		for _, user := range []string{operator, approver, viewer} {
			// Only the policy role's account imports policy.set.
			if _, err := e.call(t, user, api.PolicySet, set, 2*time.Second); err == nil {
				t.Errorf("%s set the policy", user)
			}
		}
		if ae := e.refused(t, policy, api.PolicySet, api.PolicySetRequest{Policy: p}); ae.Code != api.ErrBadRequest || ae.Field != "reason" {
			t.Errorf("policy.set without reason: %+v", ae)
		}
		var rep api.PolicyReply
		e.ok(t, policy, api.PolicySet, set, &rep)
		var act api.AuditAction
		if err := json.Unmarshal(e.auditLast(t, approval.PolicySubject), &act); err != nil || act.Actor != policy || act.Reason != set.Reason {
			t.Errorf("AUDIT policy action %+v %v", act, err)
		}
		var got api.PolicyReply
		e.ok(t, viewer, api.PolicyGet, struct{}{}, &got)
		if got.Policy.DrainMaxSelected != 1 || got.SetBy != policy || got.Default {
			t.Errorf("policy.get %+v", got)
		}
	})

	t.Run("drain above the limit", func(t *testing.T) {
		ids, keys := e.seed(t, []string{"TX-D1", "TX-D2"})
		req := api.DrainStartRequest{Filter: api.DrainFilter{DLQIDs: ids}, Reason: "downstream back"}
		a := e.pending(t, operator, api.DrainStart, req)
		if a.Action != api.ActionDrain {
			t.Fatalf("pending %+v", a)
		}
		for _, id := range ids {
			if recs, _, _ := e.chain(t, id); len(recs) != 1 {
				t.Fatalf("a pending drain touched %s", id)
			}
		}
		var rep api.ApprovalReply
		e.ok(t, approver, api.ApprovalApprove, e.approveReq(t, approver, a.ID, "two events, expected"), &rep)
		drainID := rep.Approval.Outcome
		var st api.DrainState
		natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
			e.ok(t, viewer, api.DrainStatus, api.DrainIDRequest{DrainID: drainID}, &st)
			if st.FinishedAt == nil {
				return errors.New(st.Status)
			}
			return nil
		})
		if st.Status != api.DrainCompleted || st.Committed != 2 || st.StartedBy != operator {
			t.Errorf("approved drain %s: %s, %+v, started by %s", drainID, st.Status, st.DrainCounts, st.StartedBy)
		}
		for _, k := range keys {
			e.committedOnce(t, k)
		}
	})

	t.Run("expired", func(t *testing.T) {
		id := e.quarantineInvalid(t, "TX-E1")
		corrected, _ := e.receive500(t, "TX-E1")
		a := e.pending(t, operator, api.Redrive, api.RedriveRequest{DLQID: id, Payload: corrected, Reason: "receive"})
		if !a.ExpiresAt.Equal(a.RequestedAt.Add(time.Minute)) {
			t.Errorf("expires %s, requested %s: want the policy's 1m", a.ExpiresAt, a.RequestedAt)
		}
		e.clock.Add(2 * time.Minute)
		ae := e.refused(t, approver, api.ApprovalApprove, e.approveReq(t, approver, a.ID, "late"))
		if ae.Code != api.ErrExpired {
			t.Errorf("approval of an expired request: %s, want %s", ae.Code, api.ErrExpired)
		}
		if recs, _, _ := e.chain(t, id); len(recs) != 1 {
			t.Errorf("an expired approval changed the chain")
		}
	})
}

// TestApprovalRecoveredAfterCrash: the redriver dies between the
// signature (the approved record) and the execution; the restarted one
// executes the approval at start-up, exactly once.
func TestApprovalRecoveredAfterCrash(t *testing.T) {
	e := newEnv(t)
	id := e.quarantineInvalid(t, "TX-C1")
	corrected, key := e.receive500(t, "TX-C1")

	nc := e.srv.ConnectAs(t, access.Redriver)
	cfg := e.redriverConfig()
	fp, err := failpoint.Parse(string(failpoint.RedriverAfterApproved) + ":" + id)
	if err != nil {
		t.Fatal(err)
	}
	killed := make(chan struct{})
	// The crash: the connection goes and the request's goroutine ends
	// there (nothing after the failpoint runs).
	cfg.Failpoint = fp.WithKill(func() { nc.Close(); close(killed); runtime.Goexit() })
	stop := e.startRedriver(t, nc, cfg)

	a := e.pending(t, operator, api.Redrive, api.RedriveRequest{DLQID: id, Payload: corrected, Reason: "receive"})
	// No answer: the redriver dies on the way.
	_, _ = e.call(t, approver, api.ApprovalApprove, e.approveReq(t, approver, a.ID, "ok"), 3*time.Second)
	select {
	case <-killed:
	case <-time.After(10 * time.Second):
		t.Fatal("the failpoint was not reached")
	}
	stop()
	recs, _, _ := e.chain(t, id)
	if len(recs) != 2 || recs[1].Kind != record.KindApproved {
		t.Fatalf("at the crash the chain has %d records, want the original and the signature", len(recs))
	}
	var got api.ApprovalReply
	e.startRedriver(t, nil, e.redriverConfig())
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		e.ok(t, viewer, api.ApprovalGet, api.ApprovalGetRequest{ID: a.ID}, &got)
		if got.Approval.Status != api.ApprovalExecuted {
			return errors.New(got.Approval.Status)
		}
		return nil
	})
	recs = e.waitState(t, id, func(st record.State) bool { return st.Status == record.StatusResolved }, "resolved")
	var approved, correctedN int
	for _, r := range recs {
		switch r.Kind {
		case record.KindApproved:
			approved++
		case record.KindCorrected:
			correctedN++
		}
	}
	if approved != 1 || correctedN != 1 || got.Approval.Outcome != api.OutcomeReplayed {
		t.Errorf("after recovery: %d approved, %d corrected records, outcome %s; want 1, 1, replayed", approved, correctedN, got.Approval.Outcome)
	}
	e.committedOnce(t, key)
}

package approvals

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestOneOpenCorrectionAndStaleApproval (issue #40 O1, O2): under the
// default policy a Schedule II correction that only fixes the NDC waits
// for a second person; a second correction of the record is refused with
// the pending one's id (CORRECTION_PENDING) and changes nothing; once the
// record moved on, signing the pending correction refuses it as stale:
// never executed, no approved record sealed, refused with the outcome
// STALE in APPROVALS and AUDIT.
func TestOneOpenCorrectionAndStaleApproval(t *testing.T) {
	e := newEnv(t)
	e.startRedriver(t, nil, e.redriverConfig())
	id := e.quarantineInvalid(t, "TX-Müller&Söhne-1")
	fixed := dispense("TX-Müller&Söhne-1") // the NDC as on the label
	a := e.pending(t, operator, api.Redrive, api.RedriveRequest{DLQID: id, Payload: mustJSON(t, fixed), Reason: "NDC from the label <00406-0512-01>"})
	if !slices.Contains(a.DiffFields, pharmacy.FieldNDC) || a.Status != api.ApprovalPending {
		t.Fatalf("pending approval %+v: want the NDC among its diff fields", a)
	}

	other := dispense("TX-Müller&Söhne-1")
	other["quantity_delta"] = "-28"
	for _, tc := range []struct {
		name string
		req  api.RedriveRequest
	}{
		{"another correction", api.RedriveRequest{DLQID: id, Payload: mustJSON(t, other), Reason: "陈伟 counted 28"}},
		{"the first correction for another reason", api.RedriveRequest{DLQID: id, Payload: mustJSON(t, fixed), Reason: "another reason"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ae := e.refused(t, operator, api.Redrive, tc.req)
			if ae.Code != approval.CodeCorrectionPending || ae.Approval == nil || ae.Approval.ID != a.ID || ae.Approval.Payload != nil {
				t.Fatalf("second correction: %+v, want %s naming %s without values", ae, approval.CodeCorrectionPending, a.ID)
			}
		})
	}
	if recs, _, _ := e.chain(t, id); len(recs) != 1 {
		t.Fatalf("a refused correction changed the chain: %d records", len(recs))
	}
	var list api.ApprovalListReply
	e.ok(t, approver, api.ApprovalList, api.ApprovalListRequest{Status: api.ApprovalPending}, &list)
	if len(list.Approvals) != 1 || list.Approvals[0].ID != a.ID {
		t.Fatalf("pending approvals %+v, want only %s", list.Approvals, a.ID)
	}

	// The record moves on: a replay of the event as it is (it fails its
	// validation again), asked for without a correction.
	var rep api.RedriveReply
	e.ok(t, operator, api.Redrive, api.RedriveRequest{DLQID: id, IncludeValidation: true, Reason: "try once more"}, &rep)
	moved := e.waitState(t, id, func(st record.State) bool { return st.Status != record.StatusRedriving }, "replayed")
	if len(moved) <= 1 {
		t.Fatalf("the replay did not move the chain: %d records", len(moved))
	}

	ae := e.refused(t, approver, api.ApprovalApprove, e.approveReq(t, approver, a.ID, "checked against the label"))
	if ae.Code != api.ErrConflict {
		t.Fatalf("approving the stale approval: %+v, want %s", ae, api.ErrConflict)
	}
	var got api.ApprovalReply
	e.ok(t, approver, api.ApprovalGet, api.ApprovalGetRequest{ID: a.ID}, &got)
	if got.Approval.Status != api.ApprovalRefused || got.Approval.Outcome != approval.StaleOutcome || got.Approval.ExecutedAt != nil || got.Approval.Refused == "" {
		t.Fatalf("the stale approval reads %s, outcome %q, executed %v, refused %q; want refused, %s, never executed",
			got.Approval.Status, got.Approval.Outcome, got.Approval.ExecutedAt, got.Approval.Refused, approval.StaleOutcome)
	}
	recs, _, _ := e.chain(t, id)
	for _, r := range recs {
		if r.Kind == record.KindApproved || r.Kind == record.KindCorrected {
			t.Fatalf("record %d is %s: the stale approval was executed", r.Index, r.Kind)
		}
	}
	var act api.AuditAction
	if err := json.Unmarshal(e.auditLast(t, subjects.AuditAction("approval", a.ID)), &act); err != nil || act.Action != approval.AuditRefused {
		t.Fatalf("last AUDIT action of the approval: %+v %v, want %s", act, err, approval.AuditRefused)
	}

	// The record takes a new correction now.
	b := e.pending(t, operator, api.Redrive, api.RedriveRequest{DLQID: id, Payload: mustJSON(t, fixed), Reason: "NDC from the label, asked again"})
	if b.ID == a.ID || b.ChainRecords != len(recs) {
		t.Fatalf("new approval %s over %d records, want a new one over %d", b.ID, b.ChainRecords, len(recs))
	}
}

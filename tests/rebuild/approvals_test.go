package rebuild

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/rebuild"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestAlteredApprovalIsRestored (E4): the redriver's credential, the one
// writer of APPROVALS, flips pending approvals and delete-marks one.
// Flipped to rejected (nobody decided), an approval is reported altered
// and put back to pending from AUDIT, its request kept (it still hashes
// to the digest AUDIT recorded). Flipped to approved (a decider who never
// signed), it is reported altered and put back to pending, unless the
// redriver's sweep (every DrainLease, 15 s) refused the forgery first:
// then AUDIT records the refusal and the entry agrees; either way it is
// never executed. One whose request body was rewritten (a plain put) is
// altered ("request") and restored with the body asked for. The
// delete-marked one is missing and restored whole
// from REQUESTS (ADR 0024: the request as created, written once before
// AUDIT's digest of it), after which an approver signs it and it is
// executed, once: the hold is lifted.
func TestAlteredApprovalIsRestored(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	pending := func(marker, caseID string) api.Approval {
		t.Helper()
		id := s.quarantine(t, marker)
		var placed api.HoldReply
		s.mustCall(t, inspector, api.HoldPlace, api.HoldPlaceRequest{CaseID: caseID, Reason: "subpoena, Müller & Söhne <Großhandel>",
			Target: api.HoldTarget{DLQID: id}}, &placed)
		ae := s.call(t, operator, api.HoldLift, s.signed(t, placed.Hold, api.HoldLiftRequest{ID: placed.Hold.ID, CaseID: caseID, Reason: "case closed: 陈伟 \"Nord\" & <Süd>"}), nil)
		if ae == nil || ae.Code != api.ErrApprovalRequired || ae.Approval == nil {
			t.Fatalf("hold.lift: %v, want APPROVAL_REQUIRED", ae)
		}
		return *ae.Approval
	}
	rejected := pending("approval-rejected Müller & Söhne", "CASE-DEA <1> & Müller")
	approved := pending("approval-approved 陈伟药房", "CASE-DEA <4> & 陈伟")
	wiped := pending("approval-wiped 陈伟", "CASE 陈伟 \"2\"")
	intact := pending("approval-intact <x>", "CASE-FDA-204 A1&B2")
	rewritten := pending("approval-rewritten Ünïcödé", "CASE-DSCSA <9> & \"Nord\"")
	if ps := s.compare(t, access.Redriver, subjects.ApprovalsBucket); len(ps) != 0 {
		t.Fatalf("a clean APPROVALS reports %+v", ps)
	}

	kv, err := s.js(t, access.Redriver).KeyValue(ctx, subjects.ApprovalsBucket)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(a api.Approval, status string) {
		t.Helper()
		e, err := kv.Get(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		var forged api.Approval
		if err := json.Unmarshal(e.Value(), &forged); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		forged.Status, forged.Decider, forged.DecidedAt, forged.Meaning, forged.Revision = status, "chen.wei", &now, "reviewed <Müller & Söhne>", 0
		b, _ := json.Marshal(forged)
		if _, err := kv.Update(ctx, a.ID, b, e.Revision()); err != nil {
			t.Fatalf("the redriver's credential could not alter an approval: %v", err)
		}
	}
	flip(rejected, api.ApprovalRejected)
	flip(approved, api.ApprovalApproved)
	// Its request body rewritten (a plain put: another reason, another
	// case), still pending.
	rewritten = approvaltest.Stored(t, s.js(t, access.Admin), rewritten.ID)
	{
		forged := rewritten
		forged.Request, forged.Revision = json.RawMessage(`{"id":"`+rewritten.HoldID+`","case_id":"CASE-OTHER","reason":"forged <x>"}`), 0
		b, _ := json.Marshal(forged)
		putRawAs(t, s.js(t, access.Redriver), subjects.ApprovalsBucket, rewritten.ID, b)
	}
	// As stored (the error's copy is redacted for the operator).
	wiped = approvaltest.Stored(t, s.js(t, access.Admin), wiped.ID)
	if err := kv.Delete(ctx, wiped.ID); err != nil {
		t.Fatal(err)
	}

	ps := s.compare(t, access.Redriver, subjects.ApprovalsBucket)
	refusedFirst := !slices.ContainsFunc(ps, func(p rebuild.Problem) bool { return p.Key == approved.ID })
	for _, tc := range []struct {
		name  string
		id    string
		kind  rebuild.Kind
		field string
		skip  bool // the redriver refused the forgery first: AUDIT agrees
	}{
		{"status flipped to rejected", rejected.ID, rebuild.Altered, "status", false},
		{"status flipped to approved", approved.ID, rebuild.Altered, "status", refusedFirst},
		{"delete-marked", wiped.ID, rebuild.Missing, "", false},
		{"request body rewritten", rewritten.ID, rebuild.Altered, "request", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []rebuild.Problem
			for _, p := range ps {
				if p.Key == tc.id {
					got = append(got, p)
				}
			}
			if tc.skip {
				// Not a t.Skip: the other outcome is checked below (the
				// approval is refused and AUDIT says so).
				return
			}
			if len(got) != 1 || got[0].Kind != tc.kind {
				t.Fatalf("problems of %s: %+v, want one %s", tc.id, got, tc.kind)
			}
			if tc.field != "" && !slices.ContainsFunc(got[0].Fields, func(f string) bool { return strings.HasPrefix(f, tc.field) }) {
				t.Errorf("altered fields %v, want %s", got[0].Fields, tc.field)
			}
		})
	}
	want := 4
	if refusedFirst {
		want = 3
	}
	if len(ps) != want {
		t.Errorf("%d problems, want %d (the intact approval none): %+v", len(ps), want, ps)
	}
	noValues(t, ps, "Müller", "陈伟", "CASE", "chen.wei", "reviewed")

	rep := s.restore(t, access.Redriver, subjects.ApprovalsBucket)
	if len(rep.Unrestorable) != 0 || rep.Created != 1 || rep.Updated < 2 {
		t.Fatalf("restore: %+v, want the wiped approval created again", rep)
	}
	for _, p := range rep.Unrestorable {
		if errors.Is(restoreErr(p), rebuild.ErrUnrestorable) {
			t.Errorf("%s unrestorable: %s", p.Key, p.Detail)
		}
	}
	get := func(id string) api.Approval {
		t.Helper()
		var got api.ApprovalReply
		s.mustCall(t, access.DefaultPerson(access.RoleApprover), api.ApprovalGet, api.ApprovalGetRequest{ID: id}, &got)
		return got.Approval
	}
	restored := func(a api.Approval, orig api.Approval) bool {
		return a.Status == api.ApprovalPending && a.Decider == "" && a.DecidedAt == nil && a.Meaning == "" &&
			a.HoldID == orig.HoldID && json.Valid(a.Request) && len(a.Request) > 0
	}
	if a := get(rejected.ID); !restored(a, rejected) {
		t.Errorf("restored rejection: status %s, decider %q, request %d bytes; want pending, undecided, its request", a.Status, a.Decider, len(a.Request))
	}
	switch a := get(approved.ID); {
	case a.Status == api.ApprovalExecuted:
		t.Errorf("the forged approval was executed")
	case a.Status == api.ApprovalRefused:
		// The redriver refused it (before the compare, or between the
		// compare and the restore): AUDIT records the refusal.
	case !restored(a, approved):
		t.Errorf("restored approval: status %s, decider %q; want pending and undecided, or refused", a.Status, a.Decider)
	}
	back := get(wiped.ID)
	if !restored(back, wiped) || string(back.Request) != string(wiped.Request) || back.Requester != wiped.Requester ||
		!back.RequestedAt.Equal(wiped.RequestedAt) || approval.RequestDigest(back) != approval.RequestDigest(wiped) {
		t.Errorf("restored wiped approval: %+v, want %+v", back, wiped)
	}
	if a := get(rewritten.ID); !restored(a, rewritten) || string(a.Request) != string(rewritten.Request) {
		t.Errorf("restored rewritten approval: status %s, request %s; want pending, %s", a.Status, a.Request, rewritten.Request)
	}
	if after := s.compare(t, access.Redriver, subjects.ApprovalsBucket); len(after) != 0 {
		t.Errorf("compare after restore: %+v, want none", after)
	}
	if _, err := kv.Get(ctx, intact.ID); err != nil {
		t.Errorf("the intact approval: %v", err)
	}

	// The restored approval is signed by an approver and executed once.
	approver := approvaltest.Register(t, s.js(t, access.Admin), access.DefaultPerson(access.RoleApprover), access.RoleApprover)
	req := approver.ApproveRequest(t, s.js(t, access.Admin), wiped.ID, "reviewed the subpoena's closing order <Müller & Söhne>", time.Now())
	var done api.ApprovalReply
	s.mustCall(t, approver.Name, api.ApprovalApprove, req, &done)
	natstest.CheckFor(t, waitFor, 50*time.Millisecond, func() error {
		if a := get(wiped.ID); a.Status != api.ApprovalExecuted {
			return errorf("restored approval %s, waiting for it executed", a.Status)
		}
		return nil
	})
	if h := approvaltest.StoredHold(t, s.js(t, access.Admin), wiped.HoldID); h.Status != api.HoldLifted {
		t.Errorf("the hold of the restored approval is %s after its execution, want lifted", h.Status)
	}
	if ae := s.call(t, approver.Name, api.ApprovalApprove, req, nil); ae == nil {
		t.Errorf("the executed approval was approved a second time")
	}
	if n := s.auditActions(t, "approval", wiped.ID, "executed"); n != 1 {
		t.Errorf("AUDIT holds %d executions of the restored approval, want 1", n)
	}
	if n := s.auditActions(t, "hold", wiped.HoldID, "lifted"); n != 1 {
		t.Errorf("AUDIT holds %d lifts of the hold, want 1", n)
	}
}

// restoreErr is rebuild.ErrUnrestorable when the problem's detail says
// so (a Report carries details, not errors).
func restoreErr(p rebuild.Problem) error {
	if strings.Contains(p.Detail, rebuild.ErrUnrestorable.Error()) {
		return rebuild.ErrUnrestorable
	}
	return errors.New(p.Detail)
}

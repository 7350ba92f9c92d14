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
	"github.com/deadletter/deadletter/shared/rebuild"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestAlteredApprovalIsRestored (E4): the redriver's credential, the one
// writer of APPROVALS, flips a pending approval to approved (a decider
// who never signed) and delete-marks another. Compare names the first
// altered (its status) and the second missing; Restore (as the redriver)
// puts the first back to pending from AUDIT, its request kept (it still
// hashes to the digest AUDIT recorded), and reports the second
// unrestorable: AUDIT keeps a request only as its digest (it may carry a
// payload), so no write-once store holds its body.
func TestAlteredApprovalIsRestored(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	pending := func(marker, caseID string) api.Approval {
		t.Helper()
		id := s.quarantine(t, marker)
		var placed api.HoldReply
		s.mustCall(t, inspector, api.HoldPlace, api.HoldPlaceRequest{CaseID: caseID, Reason: "subpoena, Müller & Söhne <Großhandel>",
			Target: api.HoldTarget{DLQID: id}}, &placed)
		ae := s.call(t, operator, api.HoldLift, api.HoldLiftRequest{ID: placed.Hold.ID, CaseID: caseID, Reason: "case closed: 陈伟 \"Nord\" & <Süd>"}, nil)
		if ae == nil || ae.Code != api.ErrApprovalRequired || ae.Approval == nil {
			t.Fatalf("hold.lift: %v, want APPROVAL_REQUIRED", ae)
		}
		return *ae.Approval
	}
	flipped := pending("approval-flipped Müller & Söhne", "CASE-DEA <1> & Müller")
	wiped := pending("approval-wiped 陈伟", "CASE 陈伟 \"2\"")
	intact := pending("approval-intact <x>", "CASE-FDA-204 A1&B2")
	if ps := s.compare(t, access.Redriver, subjects.ApprovalsBucket); len(ps) != 0 {
		t.Fatalf("a clean APPROVALS reports %+v", ps)
	}

	kv, err := s.js(t, access.Redriver).KeyValue(ctx, subjects.ApprovalsBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, flipped.ID)
	if err != nil {
		t.Fatal(err)
	}
	var forged api.Approval
	if err := json.Unmarshal(e.Value(), &forged); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	forged.Status, forged.Decider, forged.DecidedAt, forged.Meaning, forged.Revision = api.ApprovalApproved, "chen.wei", &now, "reviewed <Müller & Söhne>", 0
	b, _ := json.Marshal(forged)
	if _, err := kv.Update(ctx, flipped.ID, b, e.Revision()); err != nil {
		t.Fatalf("the redriver's credential could not alter an approval: %v", err)
	}
	if err := kv.Delete(ctx, wiped.ID); err != nil {
		t.Fatal(err)
	}

	ps := s.compare(t, access.Redriver, subjects.ApprovalsBucket)
	for _, tc := range []struct {
		name  string
		id    string
		kind  rebuild.Kind
		field string
	}{
		{"status flipped to approved", flipped.ID, rebuild.Altered, "status"},
		{"delete-marked", wiped.ID, rebuild.Missing, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []rebuild.Problem
			for _, p := range ps {
				if p.Key == tc.id {
					got = append(got, p)
				}
			}
			if len(got) != 1 || got[0].Kind != tc.kind {
				t.Fatalf("problems of %s: %+v, want one %s", tc.id, got, tc.kind)
			}
			if tc.field != "" && !slices.ContainsFunc(got[0].Fields, func(f string) bool { return strings.HasPrefix(f, tc.field) }) {
				t.Errorf("altered fields %v, want %s", got[0].Fields, tc.field)
			}
		})
	}
	if len(ps) != 2 {
		t.Errorf("%d problems, want 2 (the intact approval none): %+v", len(ps), ps)
	}
	noValues(t, ps, "Müller", "陈伟", "CASE", "chen.wei", "reviewed")

	rep := s.restore(t, access.Redriver, subjects.ApprovalsBucket)
	if rep.Updated != 1 || rep.Created != 0 || len(rep.Unrestorable) != 1 || rep.Unrestorable[0].Key != wiped.ID {
		t.Fatalf("restore: %+v", rep)
	}
	var got api.ApprovalReply
	s.mustCall(t, access.DefaultPerson(access.RoleApprover), api.ApprovalGet, api.ApprovalGetRequest{ID: flipped.ID}, &got)
	a := got.Approval
	if a.Status != api.ApprovalPending || a.Decider != "" || a.DecidedAt != nil || a.Meaning != "" ||
		a.HoldID != flipped.HoldID || !json.Valid(a.Request) || len(a.Request) == 0 {
		t.Errorf("restored approval: status %s, decider %q, request %d bytes; want pending, undecided, its request", a.Status, a.Decider, len(a.Request))
	}
	after := s.compare(t, access.Redriver, subjects.ApprovalsBucket)
	if len(after) != 1 || after[0].Key != wiped.ID || after[0].Kind != rebuild.Missing {
		t.Errorf("compare after restore: %+v, want only the unrestorable one", after)
	}
	if !errors.Is(restoreErr(rep.Unrestorable[0]), rebuild.ErrUnrestorable) {
		t.Errorf("unrestorable detail: %s", rep.Unrestorable[0].Detail)
	}
	if _, err := kv.Get(ctx, intact.ID); err != nil {
		t.Errorf("the intact approval: %v", err)
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

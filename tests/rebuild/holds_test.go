package rebuild

import (
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/rebuild"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestWipedHoldsAreRestored (E3): the auditor's credential, HOLDS' one
// writer, delete-marks every hold (a rollup or purge is refused by the
// server). The held chains stay held (their sealed hold records), but
// hold.list is empty and hold.get and hold.lift answer NOT_FOUND: the
// holds are stranded. Compare names every hold missing, Restore (as the
// auditor) writes them back from AUDIT, and the holds are listed,
// readable and liftable again, the chains still held; a second Restore
// writes nothing.
func TestWipedHoldsAreRestored(t *testing.T) {
	s := start(t)
	a := s.quarantine(t, "hold-a Müller & Söhne <Großhandel>")
	b := s.quarantine(t, "hold-b 陈伟药房 \"Nord\"")
	placed := map[string]api.Hold{}
	for _, tc := range []struct {
		name   string
		caseID string
		target api.HoldTarget
	}{
		{"one event", "CASE-DEA-2026 Müller & Söhne <Großhandel>", api.HoldTarget{DLQID: a}},
		{"a set of events", "CASE 陈伟 & \"Nord\" " + strings.Repeat("ä", 100), api.HoldTarget{DLQIDs: []string{a, b}}},
		{"the other event", "CASE-FDA-204 <lot A1&B2>", api.HoldTarget{DLQID: b}},
	} {
		var rep api.HoldReply
		s.mustCall(t, inspector, api.HoldPlace, api.HoldPlaceRequest{CaseID: tc.caseID, Reason: "subpoena of " + tc.name + ", Müller & Söhne", Target: tc.target}, &rep)
		placed[rep.Hold.ID] = rep.Hold
	}
	if ps := s.compare(t, access.Auditor, subjects.HoldsBucket); len(ps) != 0 {
		t.Fatalf("a clean HOLDS reports %+v", ps)
	}

	if n := s.wipe(t, access.Auditor, subjects.HoldsBucket); n != len(placed) {
		t.Fatalf("wiped %d holds, want %d", n, len(placed))
	}
	var list api.HoldListReply
	s.mustCall(t, viewer, api.HoldList, api.HoldListRequest{}, &list)
	if len(list.Holds) != 0 {
		t.Fatalf("hold.list after the wipe: %d holds", len(list.Holds))
	}
	for id, h := range placed {
		if ae := s.call(t, operator, api.HoldLift, api.HoldLiftRequest{ID: id, CaseID: h.CaseID, Reason: "case closed"}, nil); ae == nil || ae.Code != api.ErrNotFound {
			t.Fatalf("hold.lift of wiped hold %s: %v, want NOT_FOUND (stranded)", id, ae)
		}
	}
	held := func(when string) {
		t.Helper()
		for _, id := range []string{a, b} {
			if ae := s.call(t, operator, api.Redrive, api.RedriveRequest{DLQID: id, IncludeValidation: true, DryRun: true}, nil); ae == nil || ae.Code != api.ErrHeld {
				t.Errorf("%s: redrive of held chain %s: %v, want HELD", when, id, ae)
			}
		}
	}
	held("after the wipe")

	ps := s.compare(t, access.Auditor, subjects.HoldsBucket)
	want := map[string]bool{}
	for id := range placed {
		want[id] = true
	}
	if k := kinds(ps, nil); k[rebuild.Missing] != len(placed) || len(ps) != len(placed) {
		t.Fatalf("compare after the wipe: %v, want %d missing: %+v", k, len(placed), ps)
	}
	for _, p := range ps {
		if !want[p.Key] || p.Bucket != subjects.HoldsBucket {
			t.Errorf("problem of %s %s, not a placed hold", p.Bucket, p.Key)
		}
	}
	noValues(t, ps, "Müller", "陈伟", "CASE", "lot A1")

	rep := s.restore(t, access.Auditor, subjects.HoldsBucket)
	if rep.Created != len(placed) || rep.Updated != 0 || len(rep.Unrestorable) != 0 {
		t.Fatalf("restore: %+v", rep)
	}
	if ps := s.compare(t, access.Auditor, subjects.HoldsBucket); len(ps) != 0 {
		t.Fatalf("compare after restore: %+v", ps)
	}
	if again := s.restore(t, access.Auditor, subjects.HoldsBucket); again.Created+again.Updated+again.Removed != 0 || len(again.Problems) != 0 {
		t.Errorf("a second restore wrote: %+v", again)
	}

	natstest.CheckFor(t, waitFor, 100*time.Millisecond, func() error {
		s.mustCall(t, viewer, api.HoldList, api.HoldListRequest{}, &list)
		if len(list.Holds) != len(placed) {
			return errorf("hold.list lists %d holds, want %d", len(list.Holds), len(placed))
		}
		for _, hh := range list.Holds {
			if len(hh.DLQIDs) != len(hh.Hold.Target.DLQIDs)+min(1, len(hh.Hold.Target.DLQID)) {
				return errorf("hold %s holds %d chains, want its targets", hh.Hold.ID, len(hh.DLQIDs))
			}
		}
		return nil
	})
	for _, hh := range list.Holds {
		p := placed[hh.Hold.ID]
		if hh.Hold.Status != api.HoldActive || hh.Hold.CaseID != p.CaseID || hh.Hold.Reason != p.Reason || hh.Hold.PlacedBy != p.PlacedBy ||
			!hh.Hold.PlacedAt.Equal(p.PlacedAt) {
			t.Errorf("restored hold %s: %+v, placed %+v", hh.Hold.ID, hh, p)
		}
	}
	held("after the restore")
	for id, h := range placed {
		// Liftable again: the lift reaches its second person.
		ae := s.call(t, operator, api.HoldLift, s.signed(t, h, api.HoldLiftRequest{ID: id, CaseID: h.CaseID, Reason: "case closed <Müller & Söhne>"}), nil)
		if ae == nil || ae.Code != api.ErrApprovalRequired || ae.Approval == nil || ae.Approval.HoldID != id {
			t.Errorf("hold.lift of restored hold %s: %v, want APPROVAL_REQUIRED with its approval", id, ae)
		}
	}
}

package rebuild

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/services/auditor/verify"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestCompareAgreesWithVerify: HOLDS forged the ways tests/worm forges
// it (another case, marked lifted by nobody, delete-marked, a hold AUDIT
// never recorded) are the same problems, by subject and kind, for
// audit.verify's own HOLDS check and for rebuild.Compare (Problem.Subject,
// Problem.VerifyKind): verify's check can be replaced by Compare for
// every bucket without changing what it reports of HOLDS.
func TestCompareAgreesWithVerify(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	dlqID := s.quarantine(t, "verify Müller & Söhne <Großhandel>")
	place := func(caseID string) api.Hold {
		var rep api.HoldReply
		s.mustCall(t, inspector, api.HoldPlace, api.HoldPlaceRequest{CaseID: caseID, Reason: "DEA subpoena, 陈伟", Target: api.HoldTarget{DLQID: dlqID}}, &rep)
		return rep.Hold
	}
	intact, altered, wiped, freed := place("CASE-intact 陈伟"), place("CASE-altered <1>"), place("CASE-wiped & 2"), place("CASE-freed \"3\"")
	_ = intact
	kv, err := s.js(t, access.Auditor).KeyValue(ctx, subjects.HoldsBucket)
	if err != nil {
		t.Fatal(err)
	}
	put := func(h api.Hold) {
		t.Helper()
		h.Revision = 0
		b, _ := json.Marshal(h)
		if _, err := kv.Put(ctx, h.ID, b); err != nil {
			t.Fatal(err)
		}
	}
	forged := altered
	forged.CaseID = "CASE-someone-else"
	put(forged)
	lifted := freed
	at := freed.PlacedAt.Add(-2 * time.Hour)
	lifted.Status, lifted.LiftedBy, lifted.LiftedAt, lifted.LiftReason = api.HoldLifted, "amara.okafor", &at, "case closed"
	put(lifted)
	if err := kv.Delete(ctx, wiped.ID); err != nil {
		t.Fatal(err)
	}
	extra := intact
	extra.ID, extra.PlacedAt = "h-forged-000001", intact.PlacedAt.Add(-time.Hour)
	put(extra)

	var rep api.VerifyReply
	s.mustCall(t, viewer, api.AuditVerify, api.VerifyRequest{}, &rep)
	type found struct{ subject, kind string }
	var byVerify, byCompare []found
	for _, p := range rep.Problems {
		switch p.Kind {
		case verify.ProblemHoldMissing, verify.ProblemHoldAltered, verify.ProblemHoldExtra:
			byVerify = append(byVerify, found{p.Subject, p.Kind})
		}
	}
	// Compared as verify does, with its grace (a minute): these forgeries
	// are all older than that, or not timed at all.
	ps, err := rebuildCompare(t, s, access.Auditor, subjects.HoldsBucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		byCompare = append(byCompare, found{p.Subject(), p.VerifyKind()})
	}
	sortFound := func(f []found) {
		slices.SortFunc(f, func(a, b found) int {
			if a.subject != b.subject {
				return map[bool]int{true: -1, false: 1}[a.subject < b.subject]
			}
			return 0
		})
	}
	sortFound(byVerify)
	sortFound(byCompare)
	if len(byCompare) != 4 || !slices.Equal(byVerify, byCompare) {
		t.Errorf("audit.verify reports %v, rebuild.Compare %v: want the same four", byVerify, byCompare)
	}
}

// TestVerifyReportsLostRequests (ADR 0024): audit.verify, asked by a
// viewer, reports a pending approval and a finished drain whose entries
// the redriver's credential delete-marked (approval_missing,
// drain_missing) and a pending approval whose request body it rewrote
// (approval_altered), naming keys and fields, never a person's text or a
// payload value; after the redriver's restore from REQUESTS it reports
// none of them.
func TestVerifyReportsLostRequests(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	dlqID := s.quarantine(t, "verify-requests Müller & Söhne <Großhandel>")
	lift := func(caseID string) api.Approval {
		t.Helper()
		var placed api.HoldReply
		s.mustCall(t, inspector, api.HoldPlace, api.HoldPlaceRequest{CaseID: caseID, Reason: "subpoena 陈伟", Target: api.HoldTarget{DLQID: dlqID}}, &placed)
		ae := s.call(t, operator, api.HoldLift, s.signed(t, placed.Hold, api.HoldLiftRequest{ID: placed.Hold.ID, CaseID: caseID, Reason: "closed: 陈伟 & <Süd>"}), nil)
		if ae == nil || ae.Approval == nil {
			t.Fatalf("hold.lift: %v, want APPROVAL_REQUIRED", ae)
		}
		return *ae.Approval
	}
	wiped, rewritten := lift("CASE-wiped <Müller & Söhne>"), lift("CASE-rewritten \"陈伟\"")
	var started api.DrainStartReply
	s.mustCall(t, operator, api.DrainStart, api.DrainStartRequest{Filter: api.DrainFilter{DLQIDs: []string{dlqID}, Classes: []string{"validation"},
		IncludeValidation: true}, NoGuard: true, Reason: "re-drive <Müller & Söhne>"}, &started)
	natstest.CheckFor(t, waitFor, 50*time.Millisecond, func() error {
		var st api.DrainState
		s.mustCall(t, operator, api.DrainStatus, api.DrainIDRequest{DrainID: started.DrainID}, &st)
		if st.Status != api.DrainCompleted {
			return errorf("drain %s: waiting for it completed", st.Status)
		}
		return nil
	})

	rjs := s.js(t, access.Redriver)
	akv, err := rjs.KeyValue(ctx, subjects.ApprovalsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := akv.Delete(ctx, wiped.ID); err != nil {
		t.Fatal(err)
	}
	forged := approvaltest.Stored(t, s.js(t, access.Admin), rewritten.ID)
	forged.Request, forged.Revision = json.RawMessage(`{"id":"`+forged.HoldID+`","case_id":"CASE-OTHER <x>","reason":"forged"}`), 0
	b, _ := json.Marshal(forged)
	putRawAs(t, rjs, subjects.ApprovalsBucket, rewritten.ID, b)
	s.wipe(t, access.Redriver, subjects.DrainsBucket)

	problems := func() map[string]string {
		t.Helper()
		var rep api.VerifyReply
		s.mustCall(t, viewer, api.AuditVerify, api.VerifyRequest{}, &rep)
		out := map[string]string{}
		for _, p := range rep.Problems {
			if strings.HasPrefix(p.Kind, "approval_") || strings.HasPrefix(p.Kind, "drain_") {
				out[p.Subject] = p.Kind
				for _, v := range []string{"Müller", "陈伟", "CASE", "forged", "Süd"} {
					if strings.Contains(p.Detail, v) {
						t.Errorf("%s's detail carries %q: %s", p.Subject, v, p.Detail)
					}
				}
			}
		}
		return out
	}
	want := map[string]string{
		subjects.BucketKey(subjects.ApprovalsBucket, wiped.ID):     "approval_missing",
		subjects.BucketKey(subjects.ApprovalsBucket, rewritten.ID): "approval_altered",
		subjects.BucketKey(subjects.DrainsBucket, started.DrainID): "drain_missing",
	}
	if got := problems(); !maps.Equal(got, want) {
		t.Errorf("audit.verify reports %v, want %v", got, want)
	}
	for _, bucket := range []string{subjects.ApprovalsBucket, subjects.DrainsBucket} {
		if rep := s.restore(t, access.Redriver, bucket); len(rep.Unrestorable) != 0 {
			t.Errorf("restore %s: %+v", bucket, rep)
		}
	}
	if got := problems(); len(got) != 0 {
		t.Errorf("audit.verify after the restore reports %v", got)
	}
}

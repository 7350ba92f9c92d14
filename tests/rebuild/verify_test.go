package rebuild

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/deadletter/deadletter/services/auditor/verify"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
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

package worm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor/verify"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestVerifyHoldsAgainstAudit (E3): HOLDS is an index of AUDIT's hold
// actions. It can no longer be rolled up, but the auditor's credential
// (HOLDS' one writer) can still overwrite a hold (another case; marked
// lifted by nobody, which frees its chain), delete-mark it, or add one
// AUDIT never recorded: audit.verify reports each, its kind named, and a
// hold left alone is no problem.
func TestVerifyHoldsAgainstAudit(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	_, dlqID := s.documentChain(t)
	inspector := access.DefaultPerson(access.RoleInspector)
	place := func(caseID string) api.Hold {
		var rep api.HoldReply
		if code := s.request(t, inspector, api.HoldPlace, api.HoldPlaceRequest{CaseID: caseID, Reason: "DEA subpoena, Müller & Söhne <Großhandel>",
			Target: api.HoldTarget{DLQID: dlqID}}, &rep); code != "" {
			t.Fatalf("hold.place: %s", code)
		}
		return rep.Hold
	}
	intact, altered, wiped, freed := place("CASE-intact 陈伟"), place("CASE-altered"), place("CASE-wiped"), place("CASE-freed")
	var ok api.VerifyReply
	if code := s.request(t, access.DefaultPerson(access.RoleViewer), api.AuditVerify, api.VerifyRequest{}, &ok); code != "" || !ok.OK {
		t.Fatalf("audit.verify before: %s %+v", code, ok.Problems)
	}

	js, err := jetstream.New(s.conn(t, access.Auditor))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, subjects.HoldsBucket)
	if err != nil {
		t.Fatal(err)
	}
	// A rollup of the bucket (E3) is refused.
	if err := kv.Purge(ctx, wiped.ID); err == nil {
		t.Error("a purge (rollup) of a hold accepted")
	}
	forged := altered
	forged.CaseID, forged.Revision = "CASE-someone-else", 0
	b, _ := json.Marshal(forged)
	if _, err := kv.Put(ctx, altered.ID, b); err != nil {
		t.Fatal(err)
	}
	// A hold marked lifted long ago, which nobody lifted: its chain freed.
	lifted := freed
	at := freed.PlacedAt.Add(-2 * time.Hour)
	lifted.Status, lifted.LiftedBy, lifted.LiftedAt, lifted.LiftReason, lifted.Revision = api.HoldLifted, "amara.okafor", &at, "case closed", 0
	b, _ = json.Marshal(lifted)
	if _, err := kv.Put(ctx, freed.ID, b); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, wiped.ID); err != nil {
		t.Fatal(err)
	}
	extra := intact
	extra.ID, extra.PlacedAt, extra.Revision = "h-forged-000001", intact.PlacedAt.Add(-time.Hour), 0
	b, _ = json.Marshal(extra)
	if _, err := kv.Create(ctx, extra.ID, b); err != nil {
		t.Fatal(err)
	}

	var rep api.VerifyReply
	if code := s.request(t, access.DefaultPerson(access.RoleViewer), api.AuditVerify, api.VerifyRequest{}, &rep); code != "" {
		t.Fatalf("audit.verify: %s", code)
	}
	for _, tc := range []struct {
		name, id, kind string
	}{
		{"altered", altered.ID, verify.ProblemHoldAltered},
		{"lifted by nobody", freed.ID, verify.ProblemHoldAltered},
		{"wiped", wiped.ID, verify.ProblemHoldMissing},
		{"extra", extra.ID, verify.ProblemHoldExtra},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			for _, p := range rep.Problems {
				if strings.HasSuffix(p.Subject, "."+tc.id) {
					n++
					if p.Kind != tc.kind {
						t.Errorf("hold %s reported as %s, want %s: %s", tc.id, p.Kind, tc.kind, p.Detail)
					}
					if strings.Contains(p.Detail, "CASE-") || strings.Contains(p.Detail, "Müller") {
						t.Errorf("the problem carries a person's text: %s", p.Detail)
					}
				}
			}
			if n != 1 {
				t.Errorf("%d problems of hold %s, want 1: %+v", n, tc.id, rep.Problems)
			}
		})
	}
	if rep.OK || rep.ProblemCount != 4 {
		t.Errorf("verify: OK %v, %d problems, want 4 (the intact hold none): %+v", rep.OK, rep.ProblemCount, rep.Problems)
	}
}

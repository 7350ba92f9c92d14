package approval_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/record"
)

// TestCheckRecord (issue #38, E6): a sealed chain's decision records are
// checked against the signed decisions they carry, as the quarantiner does
// before it seals one and a verifier does after: the approved record
// signed by its approver of the chain the approval expected, then the
// released record executing it, signed by the requester when she asked
// (of that same chain); a dismissal nobody signed, one signed of another
// state of the chain, or one copied from another chain, is refused.
func TestCheckRecord(t *testing.T) {
	e := newEnv(t)
	reg := approval.AuditRegistry{JS: e.js}
	amara, chen := e.person(t, operator), e.person(t, approver)
	now := e.clock.Now().UTC().Truncate(time.Second)
	const dlqID = "pharmacy_0123456789abcdef0123456789abcdef"
	first := record.Record{SchemaVersion: record.SchemaVersion, DLQID: dlqID, Kind: record.KindQuarantined, Domain: "pharmacy",
		Class: record.ClassPoison, FirstSeen: now, QuarantinedAt: now, Payload: record.NewPayload(original),
		SourceSubject: "events.pharmacy.dispense", SourceStream: "EVENTS", SourceSeq: 1}
	seal := func(r *record.Record, prev record.Record) {
		r.SchemaVersion, r.DLQID, r.Domain, r.Index, r.PrevHash, r.QuarantinedAt = record.SchemaVersion, dlqID, "pharmacy", prev.Index+1, prev.AuditHash, now
		if err := record.Seal(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := record.Seal(&first); err != nil {
		t.Fatal(err)
	}
	const reason = "Lieferschein 4711 von Müller & Söhne <Großhandel> bestätigt"
	release := api.ReleaseRequest{DLQID: dlqID, Reason: reason}
	asked := amara.Record(api.DecisionRelease, dlqID, release, first.AuditHash, access.RoleOperator, now.Add(-time.Hour))
	body, err := json.Marshal(api.ReleaseRequest{DLQID: dlqID, Reason: reason, Signed: asked})
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.store.Create(ctx(t), approval.Request{Action: api.ActionRelease, DLQID: dlqID, Domain: "pharmacy", ChainRecords: 1,
		ChainHead: first.AuditHash, Body: body, Requester: operator, Reason: reason, Decision: approval.Decision{Needed: true}}, approval.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	signed, err := e.store.Approve(ctx(t), a.ID, approver, chen.Approve(a, "checked with the supplier", now))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := approval.Signature(signed)
	if err != nil {
		t.Fatal(err)
	}
	approved := record.Record{Kind: record.KindApproved, Class: record.ClassPoison, Actor: approver.User, Reason: sig.Meaning, Signature: &sig}
	seal(&approved, first)
	released := record.Record{Kind: record.KindReleased, Class: record.ClassValidation, Actor: operator.User, Reason: reason, Decision: approval.Raw(asked)}
	seal(&released, approved)
	for _, tc := range []struct {
		name    string
		r, prev record.Record
	}{
		{"the approved record", approved, first},
		{"the release it executes", released, approved},
		{"a record of no decision", first, record.Record{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := approval.CheckRecord(ctx(t), reg, tc.r, tc.prev); err != nil {
				t.Fatalf("CheckRecord = %v", err)
			}
		})
	}

	dismissed := func(sd *api.SignedDecision, actor string) record.Record {
		r := record.Record{Kind: record.KindDismissed, Class: record.ClassPoison, Actor: actor, Reason: reason, Decision: approval.Raw(sd)}
		seal(&r, first)
		return r
	}
	dismiss := api.DismissRequest{DLQID: dlqID, Reason: reason}
	for _, tc := range []struct {
		name string
		r    record.Record
		want error
	}{
		{"a dismissal naming chen.wei, unsigned", dismissed(nil, approver.User), decision.ErrUnsigned},
		{"signed of another state of the chain", dismissed(amara.Record(api.DecisionDismiss, dlqID, dismiss, approved.AuditHash, access.RoleOperator, now), operator.User), decision.ErrMismatch},
		{"copied from another chain", dismissed(amara.Record(api.DecisionDismiss, "pharmacy_ffffffffffffffffffffffffffffffff", dismiss, first.AuditHash, access.RoleOperator, now), operator.User), decision.ErrMismatch},
		{"amara's signature under chen.wei's name", dismissed(amara.Record(api.DecisionDismiss, dlqID, dismiss, first.AuditHash, access.RoleOperator, now), approver.User), decision.ErrMismatch},
		{"the approval's signature copied onto a dismissal", dismissed(signed.Signed, approver.User), decision.ErrPerson},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := approval.CheckRecord(ctx(t), reg, tc.r, first)
			if !errors.Is(err, tc.want) || approval.Code(err) != api.ErrDecisionUnsigned {
				t.Fatalf("CheckRecord = %v (%s), want %v", err, approval.Code(err), tc.want)
			}
		})
	}
}

package stack

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/deadletter/deadletter/services/auditor/verify"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestVerifyCatchesForgedDecisions (issue #38, E5 and E6): decisions a
// service's secret can write but no person signed are reported by
// audit.verify, each of its kind: a dismissed record the quarantiner's
// credential appends to a chain, sealed and linked, naming chen.wei
// (E6: decision_unsigned), and an approval the redriver's credential
// writes to AUDIT signed with its own nkey as chen.wei (E5:
// decision_forged). The same approval signed with chen.wei's own key
// is not a problem; it is also the store's first signed decision, after
// which an unsigned one is no executor's of an earlier version.
func TestVerifyCatchesForgedDecisions(t *testing.T) {
	s, _ := startStack(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := func(user string) *nats.Conn {
		nc, err := s.ConnectAs(user, nats.Timeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	amara, elif := conn(access.DefaultPerson(access.RoleOperator)), conn(access.DefaultPerson(access.RoleInspector))

	// Two quarantined events: the chains the dismissals close.
	pub := conn("publisher")
	for _, body := range []string{`{"pharmacy":"Müller & Söhne <Apotheke>","qty":`, `{"pharmacy":"陈伟药房","qty":`} {
		if _, err := pub.Request(subjects.Event("pharmacy", "dispense"), []byte(body), 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	var list api.ListReply
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		call(t, amara, api.AuditList, api.ListRequest{}, &list)
		if len(list.Items) < 2 {
			return fmt.Errorf("%d quarantined", len(list.Items))
		}
		return nil
	})
	qjs, err := jetstream.New(conn(access.Quarantiner))
	if err != nil {
		t.Fatal(err)
	}
	// dismissal returns the chain's last record and a dismissed record
	// after it, sealed and linked, naming chen.wei, without a signature.
	dismissal := func(dlqID string) (record.Record, record.Record, []byte) {
		t.Helper()
		var chain api.GetReply
		call(t, amara, api.AuditGet, api.GetRequest{DLQID: dlqID}, &chain)
		var shown record.Record // audit.get leaves the payload out: the stored record is read as the quarantiner
		if err := json.Unmarshal(chain.Records[len(chain.Records)-1].Record, &shown); err != nil {
			t.Fatal(err)
		}
		var last record.Record
		if _, err := streams.DirectGet(ctx, qjs, subjects.QuarantineStream, streams.DirectRequest{LastFor: subjects.Quarantine(shown.Domain, shown.DLQID)},
			func(m *jetstream.RawStreamMsg) error {
				var err error
				last, err = record.Parse(m.Data)
				return err
			}); err != nil {
			t.Fatal(err)
		}
		forged := last
		forged.Kind, forged.Index, forged.PrevHash, forged.AuditHash = record.KindDismissed, last.Index+1, last.AuditHash, ""
		forged.Actor, forged.Reason = "chen.wei", "Testereignis, kein Abgang (陈伟)"
		raw, err := record.SealMarshal(&forged)
		if err != nil {
			t.Fatal(err)
		}
		return last, forged, raw
	}
	// An unsigned dismissal before any signed decision: the store has
	// people's keys (its registry records, written at start), so it is no
	// earlier executor's either.
	_, early, earlyRaw := dismissal(list.Items[1].DLQID)
	legacy, err := qjs.Publish(ctx, subjects.Quarantine(early.Domain, early.DLQID), earlyRaw)
	if err != nil {
		t.Fatalf("the quarantiner's append: %v", err)
	}
	last, forged, raw := dismissal(list.Items[0].DLQID)

	// E5: an approval "signed" by chen.wei with the redriver's nkey.
	kp, err := nkeys.FromSeed([]byte(s.Secrets().Users[access.Redriver].Seed))
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	raws, err := nkeys.Decode(nkeys.PrefixByteSeed, seed)
	if err != nil {
		t.Fatal(err)
	}
	serviceKey := ed25519.NewKeyFromSeed(raws[1:])
	ap := api.Approval{ID: "appr-20261207T120000-0123456789abcdef", Action: "correct", DLQID: forged.DLQID, Requester: "amara.okafor",
		RequesterRole: "operator", RequestedAt: time.Now().UTC(), ExpiresAt: time.Now().Add(time.Hour).UTC(), ChainRecords: 1, ChainHead: last.AuditHash}
	d := decision.ForApproval(ap, api.DecisionApprove, "geprüft gegen Rechnung <4711> & Lieferschein", "chen.wei", "approver", time.Now())
	rjs, err := jetstream.New(conn(access.Redriver))
	if err != nil {
		t.Fatal(err)
	}
	approve := func(sd api.SignedDecision) uint64 {
		t.Helper()
		detail, _ := json.Marshal(map[string]any{"signed": sd})
		b, _ := json.Marshal(api.AuditAction{Action: "approved", Object: "approval", ObjectID: ap.ID, Actor: "chen.wei", Role: "approver",
			At: time.Now().UTC(), Detail: detail})
		ack, err := rjs.Publish(ctx, subjects.AuditAction("approval", ap.ID), b)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	kf, err := decision.ReadKeyFile(s.KeyFile("chen.wei"))
	if err != nil {
		t.Fatal(err)
	}
	chen, err := kf.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	genuine := approve(decision.SignEd25519(chen, d))
	minted := approve(decision.SignEd25519(serviceKey, d))
	dismissed, err := qjs.Publish(ctx, subjects.Quarantine(forged.Domain, forged.DLQID), raw)
	if err != nil {
		t.Fatalf("the quarantiner's append: %v", err)
	}

	var rep api.VerifyReply
	call(t, elif, api.AuditVerify, api.VerifyRequest{}, &rep)
	found := map[uint64]string{}
	for _, p := range rep.Problems {
		switch p.Kind {
		case verify.ProblemDecisionUnsigned, verify.ProblemDecisionForged:
			found[p.Seq] = p.Kind
			t.Logf("%s at %d: %s", p.Kind, p.Seq, p.Detail)
		}
	}
	for _, want := range []struct {
		name string
		seq  uint64
		kind string
	}{
		{"E6: a dismissal the quarantiner appended", dismissed.Sequence, verify.ProblemDecisionUnsigned},
		{"E5: an approval minted with the redriver's key", minted, verify.ProblemDecisionForged},
		{"an approval chen.wei signed", genuine, ""},
		{"an unsigned dismissal before any signed decision", legacy.Sequence, verify.ProblemDecisionUnsigned},
	} {
		if found[want.seq] != want.kind {
			t.Errorf("%s (seq %d): reported %q, want %q (problems: %+v)", want.name, want.seq, found[want.seq], want.kind, rep.Problems)
		}
	}
	if rep.OK {
		t.Error("verify says the store is intact")
	}
}

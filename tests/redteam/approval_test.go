package redteam

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	dto "github.com/prometheus/client_model/go"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// forgedProof is how a forged approval's proof is made.
type forgedProof int

const (
	// noProof: the entry carries none (the attack of issue #28, I4).
	noProof forgedProof = iota
	// garbageProof: a proof of the right shape with random bytes.
	garbageProof
	// ownKeyProof: a proof signed properly, by the attacker's own nkey.
	ownKeyProof
)

// TestForgedApprovalNeverExecuted (I4): a service credential writes an
// APPROVALS entry already marked approved (requester operator, decider
// approver, a meaning, decided an hour ago) for an identity-changing
// correction of a quarantined event, and, where it may, the matching
// AUDIT actions. The auditor, the validator and the quarantiner are
// refused by their permissions (the redriver alone writes APPROVALS); the
// redriver's credential and the break-glass admin can write the entry, but
// without a proof signed by the approval key it is never executed: the
// chain holds no approved record, LEDGER nothing new, approval.get shows
// it refused, AUDIT holds its refusal, the metric counts it, and
// audit.verify is OK.
func TestForgedApprovalNeverExecuted(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()
	tests := []struct {
		user     string
		proof    forgedProof
		canWrite bool
	}{
		{access.Auditor, noProof, false},
		{access.Validator, noProof, false},
		{access.Quarantiner, noProof, false},
		{access.Redriver, noProof, true},
		{access.Redriver, garbageProof, true},
		{access.Redriver, ownKeyProof, true},
		{access.Admin, ownKeyProof, true},
	}
	refusedBefore := e.refusedApprovals(t)
	ledgerBefore, _ := e.msgs(t, subjects.LedgerStream)
	written := 0
	type forgery struct {
		id, victim string
		records    int
	}
	var forged []forgery
	for i, tc := range tests {
		t.Run(fmt.Sprintf("%s proof=%d", tc.user, tc.proof), func(t *testing.T) {
			victim := e.quarantine(t, fmt.Sprintf("forged-approval-victim-%d", i))
			before := e.chain(t, victim)
			a := forgedApproval(t, victim, len(before.Records), tc.proof)
			nc, err := e.st.ConnectAs(tc.user)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			// The trail first, as the real path writes it, where the
			// credential may.
			auditErr := forgeTrail(js, a)
			b, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			_, kvErr := js.Publish(wctx, "$KV."+subjects.ApprovalsBucket+"."+a.ID, b)
			if (kvErr == nil) != tc.canWrite {
				t.Fatalf("write to APPROVALS as %s: %v, want written %v", tc.user, kvErr, tc.canWrite)
			}
			if !tc.canWrite {
				if auditErr == nil {
					t.Errorf("%s wrote an approval's AUDIT actions", tc.user)
				}
				if _, err := e.admin.Stream(ctx, "KV_"+subjects.ApprovalsBucket); err != nil {
					t.Fatal(err)
				}
				s, _ := e.admin.Stream(ctx, "KV_"+subjects.ApprovalsBucket)
				if _, err := s.GetLastMsgForSubject(ctx, "$KV."+subjects.ApprovalsBucket+"."+a.ID); !errors.Is(err, jetstream.ErrMsgNotFound) {
					t.Errorf("APPROVALS holds the refused write (%v)", err)
				}
				return
			}
			written++
			forged = append(forged, forgery{a.ID, victim, len(before.Records)})
		})
	}
	// Every forgery is found by the redriver's sweep, refused, reported.
	for _, f := range forged {
		natstest.CheckFor(t, 90*time.Second, 200*time.Millisecond, func() error {
			var rep api.ApprovalReply
			if code := e.request(t, access.DefaultPerson(access.RoleViewer), api.ApprovalGet, api.ApprovalGetRequest{ID: f.id}, &rep); code != "" {
				return errors.New(code)
			}
			if rep.Approval.Status != api.ApprovalRefused || rep.Approval.Refused == "" {
				return fmt.Errorf("approval.get %s: %s, want refused", f.id, rep.Approval.Status)
			}
			return nil
		})
		// The store tells the truth: the entry itself says refused.
		kv, err := e.admin.KeyValue(ctx, subjects.ApprovalsBucket)
		if err != nil {
			t.Fatal(err)
		}
		natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			en, err := kv.Get(ctx, f.id)
			if err != nil {
				return err
			}
			var a api.Approval
			if err := json.Unmarshal(en.Value(), &a); err != nil {
				return err
			}
			if a.Status != api.ApprovalRefused || a.ExecutedAt != nil || a.Outcome != "" {
				return fmt.Errorf("APPROVALS says %s (executed %v, outcome %q)", a.Status, a.ExecutedAt, a.Outcome)
			}
			return nil
		})
		if !e.auditHas(t, f.id, approval.AuditRefused) {
			t.Errorf("AUDIT holds no refusal of %s", f.id)
		}
		if e.auditHas(t, f.id, approval.AuditExecuted) {
			t.Errorf("AUDIT says %s was executed", f.id)
		}
		after := e.chain(t, f.victim)
		for _, r := range after.Records {
			var rec struct {
				Kind record.Kind `json:"kind"`
			}
			_ = json.Unmarshal(r.Record, &rec)
			if rec.Kind == record.KindApproved || rec.Kind == record.KindReplayed {
				t.Errorf("chain %s got a %s record from the forgery", f.victim, rec.Kind)
			}
		}
		if len(after.Records) != f.records || after.State.Status != record.StatusOpen {
			t.Errorf("chain %s: %d records, %s; want %d, open", f.victim, len(after.Records), after.State.Status, f.records)
		}
	}
	if got := e.refusedApprovals(t) - refusedBefore; got < float64(written) {
		t.Errorf("deadletter_redrive_approvals_refused_total grew by %v, want %d", got, written)
	}
	if after, _ := e.msgs(t, subjects.LedgerStream); after != ledgerBefore {
		t.Errorf("LEDGER went from %d to %d messages", ledgerBefore, after)
	}
	var v api.VerifyReply
	if code := e.request(t, access.DefaultPerson(access.RoleViewer), api.AuditVerify, api.VerifyRequest{}, &v); code != "" || !v.OK {
		t.Errorf("audit.verify: %s %+v", code, v)
	}
}

// forgedApproval is an approval already approved for an identity-changing
// correction of victim (a valid dispense under a new key), with the proof
// p says.
func forgedApproval(tb testing.TB, victim string, records int, p forgedProof) api.Approval {
	tb.Helper()
	payload, _ := uniqueValidEvent(tb, subjects.Event("pharmacy", "dispense"))
	body, err := json.Marshal(api.RedriveRequest{DLQID: victim, Payload: payload, Reason: "Müller & Söhne <Großhandel> asked"})
	if err != nil {
		tb.Fatal(err)
	}
	rnd := make([]byte, 8)
	_, _ = rand.Read(rnd)
	now := time.Now().UTC()
	decided := now.Add(-time.Hour)
	a := api.Approval{
		ID: "appr-" + now.Format("20060102T150405") + "-" + hex.EncodeToString(rnd), Action: api.ActionCorrect, DLQID: victim, Domain: "pharmacy",
		Status: api.ApprovalApproved, Request: body, Reasons: []string{"the correction changes the event's identity"},
		DiffFields: []string{"idempotency_key"}, Requester: access.DefaultPerson(access.RoleOperator), RequesterRole: string(access.RoleOperator),
		RequestedAt: decided.Add(-time.Minute), Reason: "Pharmacie Saint-Étienne", ExpiresAt: now.Add(72 * time.Hour),
		Decider: access.DefaultPerson(access.RoleApprover), DecidedAt: &decided, Meaning: "reviewed against the invoice", ChainRecords: records,
	}
	switch p {
	case garbageProof:
		sig := make([]byte, 64)
		_, _ = rand.Read(sig)
		a.Proof = &api.ApprovalProof{RequestDigest: approval.RequestDigest(a), Key: "SX", Signature: base64.RawURLEncoding.EncodeToString(sig)}
	case ownKeyProof:
		kp, err := nkeys.CreateServer()
		if err != nil {
			tb.Fatal(err)
		}
		seed, _ := kp.Seed()
		s, err := approval.NewSigner(seed)
		if err != nil {
			tb.Fatal(err)
		}
		proof, err := s.Sign(a)
		if err != nil {
			tb.Fatal(err)
		}
		a.Proof = &proof
	}
	return a
}

// forgeTrail writes a's requested and approved actions to AUDIT as the
// real path would (the proof's digest and signature), and reports the
// first refusal.
func forgeTrail(js jetstream.JetStream, a api.Approval) error {
	digest, sig := approval.RequestDigest(a), ""
	if a.Proof != nil {
		sig = a.Proof.Signature
	}
	for _, act := range []struct {
		action, actor string
		at            time.Time
	}{{approval.AuditRequested, a.Requester, a.RequestedAt}, {approval.AuditApproved, a.Decider, *a.DecidedAt}} {
		detail, _ := json.Marshal(map[string]any{"action": a.Action, "dlq_id": a.DLQID, "requester": a.Requester, "request_digest": digest, "proof": sig})
		b, _ := json.Marshal(api.AuditAction{Action: act.action, Object: "approval", ObjectID: a.ID, Actor: act.actor, At: act.at, Detail: detail})
		m := nats.NewMsg(subjects.AuditAction("approval", a.ID))
		m.Data = b
		m.Header.Set(envelope.MsgID, a.ID+"-"+act.action)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := js.PublishMsg(ctx, m)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// auditHas reports whether AUDIT holds action for approval id.
func (e *env) auditHas(tb testing.TB, id, action string) bool {
	tb.Helper()
	found := false
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := streams.ReadSubject(ctx, e.admin, subjects.AuditStream, subjects.AuditAction("approval", id), func(m *jetstream.RawStreamMsg) error {
		var act api.AuditAction
		if json.Unmarshal(m.Data, &act) == nil && act.Action == action {
			found = true
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return found
}

// refusedApprovals is deadletter_redrive_approvals_refused_total.
func (e *env) refusedApprovals(tb testing.TB) float64 {
	tb.Helper()
	mfs, err := e.st.Registry().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "deadletter_redrive_approvals_refused_total" {
			return sumOf(mf.GetMetric())
		}
	}
	return 0
}

func sumOf(ms []*dto.Metric) float64 {
	n := 0.0
	for _, m := range ms {
		n += m.GetCounter().GetValue()
	}
	return n
}

// TestApprovalFlood (I7, approvals): an operator filing identity-changing
// corrections of one record gets at most the chain's cap of pending
// approvals (APPROVAL_LIMIT after), the same correction asked again
// answers the pending approval, and the chain is untouched.
func TestApprovalFlood(t *testing.T) {
	e := startEnv(t)
	victim := e.quarantine(t, "approval-flood-victim")
	before := len(e.chain(t, victim).Records)
	correct := func(payload []byte) *api.Error {
		t.Helper()
		b, _ := json.Marshal(api.RedriveRequest{DLQID: victim, Payload: payload, Reason: "Pharmacie Saint-Étienne: the invoice says so"})
		m, err := e.conn(t, access.DefaultPerson(access.RoleOperator)).Request(api.Redrive, b, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ae := endpoint.ErrorOf(m)
		if ae == nil {
			t.Fatalf("redrive answered %s, want a refusal", m.Data)
		}
		return ae
	}
	var first []byte
	ids := map[string]bool{}
	for i := range 3 {
		p, _ := uniqueValidEvent(t, subjects.Event("pharmacy", "dispense"))
		if i == 0 {
			first = p
		}
		ae := correct(p)
		if ae.Code != api.ErrApprovalRequired || ae.Approval == nil || ids[ae.Approval.ID] {
			t.Fatalf("correction %d: %v, want a new pending approval", i, ae)
		}
		ids[ae.Approval.ID] = true
	}
	if ae := correct(first); ae.Code != api.ErrApprovalRequired || ae.Approval == nil || !ids[ae.Approval.ID] {
		t.Fatalf("the first correction again: %v, want its pending approval", ae)
	}
	for range 3 {
		p, _ := uniqueValidEvent(t, subjects.Event("pharmacy", "dispense"))
		if ae := correct(p); ae.Code != api.ErrApprovalLimit {
			t.Fatalf("a fourth correction: %v, want %s", ae, api.ErrApprovalLimit)
		}
	}
	var list api.ApprovalListReply
	if code := e.request(t, access.DefaultPerson(access.RoleViewer), api.ApprovalList, api.ApprovalListRequest{Status: api.ApprovalPending}, &list); code != "" {
		t.Fatal(code)
	}
	n := 0
	for _, a := range list.Approvals {
		if a.DLQID == victim {
			n++
		}
	}
	if n != len(ids) {
		t.Errorf("%d pending approvals of the chain, want %d", n, len(ids))
	}
	if after := e.chain(t, victim); len(after.Records) != before || after.State.Status != record.StatusOpen {
		t.Errorf("chain: %d records, %s; want %d, open", len(after.Records), after.State.Status, before)
	}
}

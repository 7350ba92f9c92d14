package redteam

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// forgedSignature is how a forged approval's signed decision is made
// (issue #38, E5).
type forgedSignature int

const (
	// noSignature: the entry carries none (what a proof minted with the
	// service's approval seed now is: the seed and its proofs are gone).
	noSignature forgedSignature = iota
	// garbageSignature: a signed decision of the right shape with random
	// signature bytes.
	garbageSignature
	// serviceKey: signed properly by a key no person registered (a
	// service's own, as the approval seed was).
	serviceKey
	// copiedSignature: the approver's genuine signed decision of another
	// approval, copied into this entry.
	copiedSignature
	// otherPersonsKey: another approver signs the decision naming the
	// approver, under the approver's key id.
	otherPersonsKey
	// disabledPersonsKey: the decider is a person disabled before the
	// decision, signing with their own registered key.
	disabledPersonsKey
	// secondLogin: the requester's second login (amara.okafor+approver)
	// decides, signing with her own registered key in the approver role.
	secondLogin
)

// String names the forgery.
func (f forgedSignature) String() string {
	return [...]string{"no signature", "garbage signature", "a service's key", "a copied signature of another approval",
		"another person's key", "a disabled person's key", "the requester's second login"}[f]
}

// signers are the people forgeries use: the approver, a second approver,
// a disabled approver and the requester (who also holds the approver
// role), each with a key registered in AUDIT.
type signers struct {
	approver, other, disabled, requester *approvaltest.Person
}

// registerSigners registers them through the admin's connection.
func (e *env) registerSigners(tb testing.TB) signers {
	tb.Helper()
	approvers := access.DefaultPersonsOf(access.RoleApprover)
	s := signers{
		approver:  approvaltest.Register(tb, e.admin, approvers[0], access.RoleApprover),
		other:     approvaltest.Register(tb, e.admin, approvers[1], access.RoleApprover),
		disabled:  approvaltest.Register(tb, e.admin, "dorothea.müller", access.RoleApprover),
		requester: approvaltest.Register(tb, e.admin, access.DefaultPerson(access.RoleOperator), access.RoleOperator, access.RoleApprover),
	}
	s.disabled.Disable(tb, e.admin, time.Now().Add(-2*time.Hour))
	return s
}

// TestForgedApprovalNeverExecuted (I4): a service credential writes an
// APPROVALS entry already marked approved (requester operator, decider
// approver, a meaning, decided an hour ago) for an identity-changing
// correction of a quarantined event, and, where it may, the matching
// AUDIT actions. The auditor, the validator and the quarantiner are
// refused by their permissions (the redriver alone writes APPROVALS); the
// redriver's credential and the break-glass admin can write the entry, but
// without the approver's own signed decision of it (issue #38, E5: no
// service secret signs one, a copy, another person's or a disabled
// person's key, or the requester's second login) it is never executed: the
// chain holds no approved record, LEDGER nothing new, approval.get shows
// it refused, AUDIT holds its refusal, the metric counts it, and
// audit.verify reports each forgery (the entry against its source, the
// decision against its person's keys) and nothing else.
func TestForgedApprovalNeverExecuted(t *testing.T) {
	natstest.Long(t, "a drain or replay of many events, tens of seconds")
	e := startEnv(t)
	ctx := context.Background()
	people := e.registerSigners(t)
	tests := []struct {
		user     string
		forgery  forgedSignature
		canWrite bool
	}{
		{access.Auditor, noSignature, false},
		{access.Validator, noSignature, false},
		{access.Quarantiner, noSignature, false},
		{access.Redriver, noSignature, true},
		{access.Redriver, garbageSignature, true},
		{access.Redriver, serviceKey, true},
		{access.Redriver, copiedSignature, true},
		{access.Redriver, otherPersonsKey, true},
		{access.Redriver, disabledPersonsKey, true},
		{access.Redriver, secondLogin, true},
		{access.Admin, serviceKey, true},
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
		t.Run(fmt.Sprintf("%s: %s", tc.user, tc.forgery), func(t *testing.T) {
			victim := e.quarantine(t, fmt.Sprintf("forged-approval-victim-%d", i))
			before := e.chain(t, victim)
			a := forgedApproval(t, victim, before, tc.forgery, people)
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
	// The forgeries stay in APPROVALS and AUDIT for good: verify reports
	// each (the entry against its source, the decision against its
	// person's keys), and nothing else.
	for _, f := range forged {
		e.plant(f.id)
	}
	reported := e.verified(t)
	for _, f := range forged {
		if !reported[f.id] {
			t.Errorf("audit.verify does not report the forged approval %s", f.id)
		}
	}
}

// forgedApproval is an approval already approved for an identity-changing
// correction of victim (chain before; a valid dispense under a new key),
// with the signed decision f says.
func forgedApproval(tb testing.TB, victim string, before api.GetReply, f forgedSignature, people signers) api.Approval {
	tb.Helper()
	payload, _ := uniqueValidEvent(tb, subjects.Event("pharmacy", "dispense"))
	body, err := json.Marshal(api.RedriveRequest{DLQID: victim, Payload: payload, Reason: "Müller & Söhne <Großhandel> asked"})
	if err != nil {
		tb.Fatal(err)
	}
	rnd := make([]byte, 8)
	_, _ = rand.Read(rnd)
	now := time.Now().UTC()
	decided := now.Add(-time.Hour).Truncate(time.Second)
	head := ""
	if n := len(before.Records); n > 0 {
		var last struct {
			AuditHash string `json:"audit_hash"`
		}
		_ = json.Unmarshal(before.Records[n-1].Record, &last)
		head = last.AuditHash
	}
	a := api.Approval{
		ID: "appr-" + now.Format("20060102T150405") + "-" + hex.EncodeToString(rnd), Action: api.ActionCorrect, DLQID: victim, Domain: "pharmacy",
		Status: api.ApprovalApproved, Request: body, Reasons: []string{"the correction changes the event's identity"},
		DiffFields: []string{"idempotency_key"}, Requester: access.DefaultPerson(access.RoleOperator), RequesterRole: string(access.RoleOperator),
		RequestedAt: decided.Add(-time.Minute), Reason: "Pharmacie Saint-Étienne", ExpiresAt: now.Add(72 * time.Hour),
		Decider: people.approver.Name, DecidedAt: &decided, Meaning: "reviewed against the invoice", ChainRecords: len(before.Records), ChainHead: head,
	}
	switch f {
	case garbageSignature:
		a.Signed = people.approver.Approve(a, a.Meaning, decided)
		_, _ = rand.Read(a.Signed.Signature.Signature)
	case serviceKey:
		a.Signed = approvaltest.NewPerson(tb, people.approver.Name, access.RoleApprover).Approve(a, a.Meaning, decided)
	case copiedSignature:
		other := a
		other.ID, other.Request = a.ID+"x", json.RawMessage(`{"dlq_id":"`+victim+`","reason":"another request"}`)
		a.Signed = people.approver.Approve(other, a.Meaning, decided)
	case otherPersonsKey:
		a.Signed = people.other.Sign(approval.ForApproval(a, api.DecisionApprove, a.Meaning, people.approver.Name, string(access.RoleApprover), decided))
		a.Signed.Signature.KeyID = people.approver.KeyID
	case disabledPersonsKey:
		a.Decider = people.disabled.Name
		a.Signed = people.disabled.Approve(a, a.Meaning, decided)
	case secondLogin:
		a.Decider = access.RoleLogin(people.requester.Name, access.RoleApprover)
		a.Signed = people.requester.Approve(a, a.Meaning, decided)
	}
	return a
}

// forgeTrail writes a's requested and approved actions to AUDIT as the
// real path would (the request's digest and the signed decision), and
// reports the first refusal.
func forgeTrail(js jetstream.JetStream, a api.Approval) error {
	digest := approval.RequestDigest(a)
	for _, act := range []struct {
		action, actor string
		at            time.Time
	}{{approval.AuditRequested, a.Requester, a.RequestedAt}, {approval.AuditApproved, a.Decider, *a.DecidedAt}} {
		detail, _ := json.Marshal(map[string]any{"action": a.Action, "dlq_id": a.DLQID, "requester": a.Requester, "request_digest": digest, "signed": a.Signed})
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
// corrections of one record gets one pending approval (every other is
// CORRECTION_PENDING, naming it: one open correction per record), the
// same correction asked again answers the pending approval, and the chain
// is untouched.
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
	// One open correction per record (issue #40): the first waits for a
	// second person, every other is refused naming it, however many.
	first, _ := uniqueValidEvent(t, subjects.Event("pharmacy", "dispense"))
	ae := correct(first)
	if ae.Code != api.ErrApprovalRequired || ae.Approval == nil {
		t.Fatalf("the first correction: %v, want a pending approval", ae)
	}
	ids := map[string]bool{ae.Approval.ID: true}
	for i := range 6 {
		p, _ := uniqueValidEvent(t, subjects.Event("pharmacy", "dispense"))
		if ae := correct(p); ae.Code != approval.CodeCorrectionPending || ae.Approval == nil || !ids[ae.Approval.ID] {
			t.Fatalf("correction %d: %v, want %s naming the pending one", i+2, ae, approval.CodeCorrectionPending)
		}
	}
	if ae := correct(first); ae.Code != api.ErrApprovalRequired || ae.Approval == nil || !ids[ae.Approval.ID] {
		t.Fatalf("the first correction again: %v, want its pending approval", ae)
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

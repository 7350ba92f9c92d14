// Package approvaltest gives tests people who sign their decisions
// (issue #38): a person with an ed25519 key of their own, registered in
// the people registry in AUDIT (api.PersonKeys on
// subjects.AuditAction("people", person), as `deadletter people` writes
// it), who signs the decisions the executors rebuild (approval.ForApproval,
// ForRecord, ForHold). Every test that approves, rejects, releases,
// dismisses or lifts a hold signs with one of these.
package approvaltest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Since is when Register registers a person unless told (before any
// test clock).
var Since = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// Person is a person with a signing key of their own.
type Person struct {
	// Name is the person (access.PersonOf of each of their users).
	Name string
	// Roles are the roles registered.
	Roles []string
	// Key is the person's private key; KeyID its public key (base64url).
	Key   ed25519.PrivateKey
	KeyID string
}

// NewPerson returns person name with a new key, not registered.
func NewPerson(tb testing.TB, name string, roles ...access.Role) *Person {
	tb.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	p := &Person{Name: access.PersonOf(name), Key: priv}
	p.KeyID = base64.RawURLEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
	for _, r := range roles {
		p.Roles = append(p.Roles, string(r))
	}
	return p
}

// Register returns person name with a new key, registered in AUDIT
// through js (a connection that may publish audit.actions.people.>: the
// admin's) with roles, enabled, as of Since.
func Register(tb testing.TB, js jetstream.JetStream, name string, roles ...access.Role) *Person {
	tb.Helper()
	p := NewPerson(tb, name, roles...)
	p.Publish(tb, js, access.EventAdded, false, Since)
	return p
}

// DecisionKey is the person's registered public key.
func (p *Person) DecisionKey() api.DecisionKey {
	return api.DecisionKey{Scheme: api.SchemeEd25519, ID: p.KeyID, Public: p.Key.Public().(ed25519.PublicKey), Label: "test", AddedAt: Since}
}

// Publish writes the person's registry record (event, disabled or not,
// as of at) to AUDIT through js, as the people command's apply path does
// (decision.Publish).
func (p *Person) Publish(tb testing.TB, js jetstream.JetStream, event string, disabled bool, at time.Time) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pk := api.PersonKeys{Person: p.Name, Roles: p.Roles, Disabled: disabled, Keys: []api.DecisionKey{p.DecisionKey()},
		Event: event, By: access.Admin, At: at.UTC()}
	if _, err := decision.Publish(ctx, js, pk); err != nil {
		tb.Fatalf("register %s: %v", p.Name, err)
	}
}

// Disable records, through js, that the person is disabled from at on.
func (p *Person) Disable(tb testing.TB, js jetstream.JetStream, at time.Time) {
	tb.Helper()
	p.Publish(tb, js, access.EventDisabled, true, at)
}

// Sign signs d with the person's key.
func (p *Person) Sign(d api.Decision) *api.SignedDecision {
	d.At = d.At.UTC().Truncate(time.Second)
	h := decision.Digest(d)
	return &api.SignedDecision{Decision: d, Signature: api.DecisionSignature{Scheme: api.SchemeEd25519, KeyID: p.KeyID,
		Signature: ed25519.Sign(p.Key, h[:])}}
}

// Approve is the person's signed approval of a, meaning meaning, at at.
func (p *Person) Approve(a api.Approval, meaning string, at time.Time) *api.SignedDecision {
	return p.Sign(approval.ForApproval(a, api.DecisionApprove, meaning, p.Name, string(access.RoleApprover), at))
}

// Reject is the person's signed rejection of a, for reason, at at.
func (p *Person) Reject(a api.Approval, reason string, at time.Time) *api.SignedDecision {
	return p.Sign(approval.ForApproval(a, api.DecisionReject, reason, p.Name, string(access.RoleApprover), at))
}

// Record is the person's signed decision (api.DecisionRelease or
// api.DecisionDismiss, as role) of the direct request req on the chain
// of dlqID whose last record's hash is head.
func (p *Person) Record(action, dlqID string, req any, head string, role access.Role, at time.Time) *api.SignedDecision {
	meaning := ""
	switch r := req.(type) {
	case api.ReleaseRequest:
		meaning = r.Reason
	case api.DismissRequest:
		meaning = r.Reason
	}
	return p.Sign(approval.ForRecord(action, dlqID, approval.DirectDigest(req), head, meaning, p.Name, string(role), at))
}

// Lift is the person's signed lift (as role) of hold h by req at at.
func (p *Person) Lift(h api.Hold, req api.HoldLiftRequest, role access.Role, at time.Time) *api.SignedDecision {
	req.ID = h.ID
	return p.Sign(decision.ForHold(req, p.Name, string(role), at))
}

// Stored reads approval id as stored in APPROVALS through js (a
// connection that may read the bucket).
func Stored(tb testing.TB, js jetstream.JetStream, id string) api.Approval {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, subjects.ApprovalsBucket)
	if err != nil {
		tb.Fatal(err)
	}
	e, err := kv.Get(ctx, id)
	if err != nil {
		tb.Fatalf("approval %s: %v", id, err)
	}
	var a api.Approval
	if err := json.Unmarshal(e.Value(), &a); err != nil {
		tb.Fatal(err)
	}
	return a
}

// ChainHead reads the AuditHash of the last record of dlqID's chain in
// QUARANTINE through js: the chain as a person reviews and signs it.
func ChainHead(tb testing.TB, js jetstream.JetStream, dlqID string) string {
	tb.Helper()
	dom, _, ok := domain.SplitID(dlqID)
	if !ok {
		tb.Fatalf("%q is not a dlq id", dlqID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, subjects.QuarantineStream)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, subjects.Quarantine(dom, dlqID))
	if err != nil {
		tb.Fatalf("chain %s: %v", dlqID, err)
	}
	r, err := record.Parse(m.Data)
	if err != nil {
		tb.Fatal(err)
	}
	return r.AuditHash
}

// StoredHold reads hold id as stored in HOLDS through js.
func StoredHold(tb testing.TB, js jetstream.JetStream, id string) api.Hold {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := hold.NewStore(js, nil).Get(ctx, id)
	if err != nil {
		tb.Fatalf("hold %s: %v", id, err)
	}
	return h
}

// ApproveRequest is the approval.approve request of approval id (read
// through js) signed by the person, meaning meaning, at at.
func (p *Person) ApproveRequest(tb testing.TB, js jetstream.JetStream, id, meaning string, at time.Time) api.ApprovalDecisionRequest {
	tb.Helper()
	return api.ApprovalDecisionRequest{ID: id, Meaning: meaning, Signed: p.Approve(Stored(tb, js, id), meaning, at)}
}

// RejectRequest is the approval.reject request of approval id (read
// through js) signed by the person, for reason, at at.
func (p *Person) RejectRequest(tb testing.TB, js jetstream.JetStream, id, reason string, at time.Time) api.ApprovalDecisionRequest {
	tb.Helper()
	return api.ApprovalDecisionRequest{ID: id, Meaning: reason, Signed: p.Reject(Stored(tb, js, id), reason, at)}
}

// SignRelease returns req signed by the person acting in role, of the
// chain as it stands (read through js), at at.
func (p *Person) SignRelease(tb testing.TB, js jetstream.JetStream, req api.ReleaseRequest, role access.Role, at time.Time) api.ReleaseRequest {
	tb.Helper()
	req.Signed = p.Record(api.DecisionRelease, req.DLQID, req, ChainHead(tb, js, req.DLQID), role, at)
	return req
}

// SignDismiss returns req signed by the person acting in role, of the
// chain as it stands (read through js), at at.
func (p *Person) SignDismiss(tb testing.TB, js jetstream.JetStream, req api.DismissRequest, role access.Role, at time.Time) api.DismissRequest {
	tb.Helper()
	req.Signed = p.Record(api.DecisionDismiss, req.DLQID, req, ChainHead(tb, js, req.DLQID), role, at)
	return req
}

// SignLift returns req signed by the person acting in role, of the hold
// as it stands (read through js), at at.
func (p *Person) SignLift(tb testing.TB, js jetstream.JetStream, req api.HoldLiftRequest, role access.Role, at time.Time) api.HoldLiftRequest {
	tb.Helper()
	req.Signed = p.Lift(StoredHold(tb, js, req.ID), req, role, at)
	return req
}

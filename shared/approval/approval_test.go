package approval_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestNeeds: the policy and the correction guard.
func TestNeeds(t *testing.T) {
	change := func(from, to string) []byte { return []byte(strings.Replace(string(original), from, to, 1)) }
	// The identity rule alone (the default before issue #40; the
	// controlled default is TestNeedsControlled's).
	def := approval.DefaultPolicy()
	def.Corrections = approval.CorrectionsIdentity
	all := def
	all.Corrections = approval.CorrectionsAll
	strict := approval.Policy{Corrections: approval.CorrectionsIdentity, DrainMaxSelected: 100, DrainValidation: true, IgnoreOrder: true}
	tests := []struct {
		name   string
		policy approval.Policy
		action approval.Action
		needed bool
		diff   []string
	}{
		{"dispense turned into a receive of +500", def, approval.Action{Kind: api.ActionCorrect, Domain: "pharmacy", SubjectEventType: "dispense", Original: original, Corrected: corrected}, true, []string{approval.FieldEventType}},
		{"quantity only", def, approval.Action{Kind: api.ActionCorrect, Domain: "pharmacy", SubjectEventType: "dispense", Original: original, Corrected: change(`"-30"`, `"-3"`)}, false, nil},
		{"quantity only, every correction", all, approval.Action{Kind: api.ActionCorrect, Domain: "pharmacy", SubjectEventType: "dispense", Original: original, Corrected: change(`"-30"`, `"-3"`)}, true, nil},
		{"other transaction id", def, approval.Action{Kind: api.ActionCorrect, Domain: "pharmacy", SubjectEventType: "dispense", Original: original, Corrected: change("TX-SECRET-PHI", "TX-2")}, true, []string{approval.FieldIdempotencyKey}},
		{"other lot", def, approval.Action{Kind: api.ActionCorrect, Domain: "pharmacy", SubjectEventType: "dispense", Original: original, Corrected: change("L24A0917", "L9")}, true, []string{approval.FieldOrderingKey}},
		{"other domain", def, approval.Action{Kind: api.ActionCorrect, Domain: "pharmacy", CorrectedDomain: "fsma", SubjectEventType: "dispense", Original: original, Corrected: original}, true, []string{approval.FieldIdempotencyKey, approval.FieldOrderingKey, approval.FieldDomain}},
		{"correction makes the identity underivable", def, approval.Action{Kind: api.ActionCorrect, Domain: "pharmacy", SubjectEventType: "dispense", Original: original, Corrected: []byte(`{}`)}, true, []string{approval.FieldIdempotencyKey, approval.FieldOrderingKey}},
		{"unparseable original fixed", def, approval.Action{Kind: api.ActionCorrect, Domain: "pharmacy", SubjectEventType: "dispense", Original: []byte(`{"broken":`), Corrected: original}, true, []string{approval.FieldIdempotencyKey, approval.FieldOrderingKey}},
		{"unknown domain", def, approval.Action{Kind: api.ActionCorrect, Domain: "unknown", Original: original, Corrected: original}, true, nil},
		{"release of poison", def, approval.Action{Kind: api.ActionRelease}, true, nil},
		{"release, policy off", strict, approval.Action{Kind: api.ActionRelease}, false, nil},
		{"hold lift", def, approval.Action{Kind: api.ActionHoldLift}, true, nil},
		{"drain, default policy", def, approval.Action{Kind: api.ActionDrain, Selected: 1 << 20, IncludesValidation: true, IgnoreOrder: true}, false, nil},
		{"drain of 100, at most 100", strict, approval.Action{Kind: api.ActionDrain, Selected: 100}, false, nil},
		{"drain of 101", strict, approval.Action{Kind: api.ActionDrain, Selected: 101}, true, nil},
		{"drain with validation events", strict, approval.Action{Kind: api.ActionDrain, Selected: 1, IncludesValidation: true}, true, nil},
		{"drain with ignore_order", strict, approval.Action{Kind: api.ActionDrain, Selected: 1, IgnoreOrder: true}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := approval.Needs(tt.policy, tt.action)
			if err != nil {
				t.Fatal(err)
			}
			if d.Needed != tt.needed || !slices.Equal(d.DiffFields(), tt.diff) {
				t.Fatalf("Needed %v diff %v (reasons %q), want %v %v", d.Needed, d.DiffFields(), d.Reasons, tt.needed, tt.diff)
			}
			if d.Needed && len(d.Reasons) == 0 {
				t.Error("no reason given")
			}
			for _, r := range d.Reasons {
				if strings.Contains(r, "TX-SECRET-PHI") || strings.Contains(r, "receive") {
					t.Errorf("a reason names a value: %q", r)
				}
			}
		})
	}
	t.Run("the diff of a dispense turned into a receive", func(t *testing.T) {
		d, _ := approval.Needs(def, tests[0].action)
		want := []api.IdentityChange{{Field: approval.FieldEventType, Before: "dispense", After: "receive"}}
		if !slices.Equal(d.Diff, want) {
			t.Fatalf("Diff = %+v, want %+v", d.Diff, want)
		}
	})
	t.Run("unknown action", func(t *testing.T) {
		_, err := approval.Needs(def, approval.Action{Kind: "delete"})
		if approval.Code(err) != api.ErrBadRequest || api.FieldOf(approval.APIError(err)) != "action" {
			t.Fatalf("Needs = %v", err)
		}
	})
}

// TestPolicy: the default, who may change it, and that every change is in
// AUDIT.
func TestPolicy(t *testing.T) {
	e := newEnv(t)
	got, err := e.policy.Get(ctx(t))
	if err != nil || !got.Default || got.Policy != approval.DefaultPolicy() || got.Revision != 0 {
		t.Fatalf("Get = %+v, %v; want the default", got, err)
	}
	p := approval.DefaultPolicy()
	p.Corrections, p.DrainMaxSelected, p.PendingTTL = approval.CorrectionsAll, 500, "24h"
	bad := []struct {
		name   string
		caller access.Identity
		req    api.PolicySetRequest
		code   string
		field  string
	}{
		{"operator", operator, api.PolicySetRequest{Policy: p, Reason: "r"}, api.ErrForbidden, ""},
		{"approver", approver, api.PolicySetRequest{Policy: p, Reason: "r"}, api.ErrForbidden, ""},
		{"no reason", policyman, api.PolicySetRequest{Policy: p}, api.ErrBadRequest, "reason"},
		{"unknown corrections", policyman, api.PolicySetRequest{Policy: api.Policy{Corrections: "none"}, Reason: "r"}, api.ErrBadRequest, "policy.corrections"},
		{"ttl too short", policyman, api.PolicySetRequest{Policy: api.Policy{Corrections: "all", PendingTTL: "1s"}, Reason: "r"}, api.ErrBadRequest, "policy.pending_ttl"},
		{"negative drain limit", policyman, api.PolicySetRequest{Policy: api.Policy{Corrections: "all", DrainMaxSelected: -1}, Reason: "r"}, api.ErrBadRequest, "policy.drain_max_selected"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.policy.Set(ctx(t), tt.caller, tt.req)
			if ae := approval.APIError(err); api.CodeOf(ae) != tt.code || api.FieldOf(ae) != tt.field {
				t.Fatalf("Set = %v, want %s %q", err, tt.code, tt.field)
			}
		})
	}
	set, err := e.policy.Set(ctx(t), policyman, api.PolicySetRequest{Policy: p, Reason: "audit finding 7"})
	if err != nil {
		t.Fatal(err)
	}
	got, err = e.policy.Get(ctx(t))
	if err != nil || got.Default || got.Policy != p || got.SetBy != policyman.User || got.Revision != set.Revision || got.Revision == 0 {
		t.Fatalf("Get after Set = %+v, %v", got, err)
	}
	stale := uint64(0)
	if _, err := e.policy.Set(ctx(t), policyman, api.PolicySetRequest{Policy: approval.DefaultPolicy(), Reason: "back", ExpectedRevision: &stale}); !errors.Is(err, approval.ErrConflict) {
		t.Fatalf("Set at a stale revision = %v, want ErrConflict", err)
	}
	if _, err := e.policy.Set(ctx(t), policyman, api.PolicySetRequest{Policy: approval.DefaultPolicy(), Reason: "back"}); err != nil {
		t.Fatal(err)
	}
	// Both changes are in AUDIT, with who, why and what.
	var acts []api.AuditAction
	err = streams.ReadSubject(ctx(t), e.admin, subjects.AuditStream, approval.PolicySubject, func(m *jetstream.RawStreamMsg) error {
		var a api.AuditAction
		if err := json.Unmarshal(m.Data, &a); err != nil {
			return err
		}
		acts = append(acts, a)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 2 || acts[0].Reason != "audit finding 7" || acts[1].Reason != "back" || acts[0].Actor != policyman.User || acts[0].Role != string(access.RolePolicy) {
		t.Fatalf("AUDIT holds %+v", acts)
	}
	var first api.Policy
	if err := json.Unmarshal(acts[0].Detail, &first); err != nil || first != p {
		t.Fatalf("first change's policy %+v, %v", first, err)
	}
}

// TestTwoPersonCorrection is the scenario: a correction that
// changes the event's identity needs a second person; the requester may
// not approve it, an approver may, re-authenticating; the signature is
// what the chain's approved record seals.
func TestTwoPersonCorrection(t *testing.T) {
	e := newEnv(t)
	pol, err := e.policy.Get(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	d, err := approval.Needs(pol.Policy, approval.Action{Kind: api.ActionCorrect, Domain: "pharmacy", SubjectEventType: "dispense", Original: original, Corrected: corrected})
	if err != nil || !d.Needed {
		t.Fatalf("Needs = %+v, %v", d, err)
	}
	a := e.request(t, operator, d)
	if a.Status != api.ApprovalPending || !a.ExpiresAt.Equal(a.RequestedAt.Add(72*time.Hour)) || !slices.Equal(a.DiffFields, []string{approval.FieldEventType, pharmacy.FieldQuantity}) {
		t.Fatalf("created %+v", a)
	}

	// The approver sees the diff and the request; a viewer sees neither.
	got, err := e.store.Get(ctx(t), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if full := approval.Redact(got, access.RoleApprover); len(full.Diff) != 2 || full.Diff[0].After != "receive" || full.Diff[1].After != "500" || len(full.Request) == 0 {
		t.Errorf("approver's view %+v", full)
	}
	if string(got.Payload) != string(indented) {
		t.Errorf("the corrected payload is not kept byte for byte: %q", got.Payload)
	}
	if v := approval.Redact(got, access.RoleViewer); v.Diff != nil || v.Request != nil || v.Payload != nil || !slices.Equal(v.DiffFields, []string{approval.FieldEventType, pharmacy.FieldQuantity}) {
		t.Errorf("viewer's view %+v", v)
	}

	// A decision not signed by the approver's own key, of this approval
	// as stored, now, is never taken (issue #38, E5/E7).
	chen, lucia := e.person(t, approver), e.people[access.DefaultPersonsOf(access.RoleApprover)[1]]
	other := e.request(t, operator, approval.Decision{Needed: true})
	stranger := approvaltest.NewPerson(t, approver.User, access.RoleApprover) // a key never registered (a service's own)
	disabled := approvaltest.Register(t, e.admin, "dorothea.müller", access.RoleApprover)
	disabled.Disable(t, e.admin, e.clock.Now().Add(-time.Minute))
	dorothea := access.Identity{User: disabled.Name, Role: access.RoleApprover}
	secondLogin := access.Identity{User: access.RoleLogin(operator.User, access.RoleApprover), Role: access.RoleApprover}
	now := e.clock.Now()
	const meaning = "reviewed the correction against the invoice of Müller & Söhne <Großhandel>"
	refused := []struct {
		name   string
		who    access.Identity
		signed *api.SignedDecision
		want   error
		code   string
	}{
		{"the requester (an operator)", operator, e.approve(t, operator, a.ID, "looks right"), approval.ErrForbidden, api.ErrForbidden},
		{"a viewer", viewer, e.approve(t, viewer, a.ID, "looks right"), approval.ErrForbidden, api.ErrForbidden},
		{"no meaning", approver, e.approve(t, approver, a.ID, " "), approval.ErrBadRequest, api.ErrBadRequest},
		{"not signed", approver, nil, decision.ErrUnsigned, api.ErrDecisionUnsigned},
		{"signed by a key not registered (a service's)", approver, stranger.Approve(a, meaning, now), decision.ErrUnknownKey, api.ErrDecisionUnsigned},
		{"a copied signature of another approval", approver, chen.Approve(other, meaning, now), decision.ErrMismatch, api.ErrDecisionUnsigned},
		{"another approval's signature, its target renamed", approver, func() *api.SignedDecision {
			sd := chen.Approve(other, meaning, now)
			sd.Decision.Target, sd.Decision.Request = a.ID, approval.RequestDigest(a)
			return sd
		}(), decision.ErrBadSignature, api.ErrDecisionUnsigned},
		{"another person's key (lucia signs as chen)", approver, func() *api.SignedDecision {
			d := approval.ForApproval(a, api.DecisionApprove, meaning, chen.Name, string(access.RoleApprover), now)
			sd := lucia.Sign(d)
			sd.Signature.KeyID = chen.KeyID
			return sd
		}(), decision.ErrBadSignature, api.ErrDecisionUnsigned},
		{"signed by lucia, asked as chen", approver, lucia.Approve(a, meaning, now), decision.ErrMismatch, api.ErrDecisionUnsigned},
		{"a disabled person's key", dorothea, disabled.Approve(a, meaning, now), decision.ErrPerson, api.ErrDecisionUnsigned},
		{"a person disabled a minute ago, signing with an earlier time", dorothea, disabled.Approve(a, meaning, now.Add(-3*time.Minute)), decision.ErrPerson, api.ErrDecisionUnsigned},
		{"the requester's second login (amara.okafor+approver)", secondLogin, e.approve(t, secondLogin, a.ID, meaning), approval.ErrSelfApproval, api.ErrSelfApproval},
		{"signed as an operator", approver, chen.Sign(approval.ForApproval(a, api.DecisionApprove, meaning, chen.Name, string(access.RoleOperator), now)), decision.ErrMismatch, api.ErrDecisionUnsigned},
		{"signed ten minutes ago", approver, chen.Approve(a, meaning, now.Add(-10*time.Minute)), approval.ErrStale, api.ErrDecisionUnsigned},
		{"a rejection sent as an approval", approver, chen.Reject(a, meaning, now), decision.ErrMismatch, api.ErrDecisionUnsigned},
		{"the meaning changed after signing", approver, func() *api.SignedDecision {
			sd := chen.Approve(a, meaning, now)
			sd.Decision.Meaning = "approved"
			return sd
		}(), decision.ErrBadSignature, api.ErrDecisionUnsigned},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.store.Approve(ctx(t), a.ID, tt.who, tt.signed)
			if !errors.Is(err, tt.want) || approval.Code(err) != tt.code {
				t.Fatalf("Approve = %v (%s), want %v (%s)", err, approval.Code(err), tt.want, tt.code)
			}
			if cur, _ := e.store.Get(ctx(t), a.ID); cur.Status != api.ApprovalPending {
				t.Fatalf("a refused approval left the status %s", cur.Status)
			}
		})
	}

	e.clock.Add(time.Hour)
	signed, err := e.store.Approve(ctx(t), a.ID, approver, e.approve(t, approver, a.ID, "reviewed the correction against the invoice"))
	if err != nil {
		t.Fatal(err)
	}
	if signed.Status != api.ApprovalApproved || signed.Decider != approver.User || !signed.DecidedAt.Equal(e.clock.Now()) {
		t.Fatalf("approved %+v", signed)
	}
	if _, err := e.store.Approve(ctx(t), a.ID, approver, e.approve(t, approver, a.ID, "again")); !errors.Is(err, approval.ErrAlreadyDecided) {
		t.Fatalf("second Approve = %v, want ErrAlreadyDecided", err)
	}

	// The signature, sealed as the chain's approved record.
	sig, err := approval.Signature(signed)
	if err != nil {
		t.Fatal(err)
	}
	want := record.Signature{ApprovalID: a.ID, Action: api.ActionCorrect, Requester: operator.User, RequestedAt: a.RequestedAt,
		Approver: approver.User, ApproverRole: string(access.RoleApprover), SignedAt: *signed.DecidedAt, Meaning: "reviewed the correction against the invoice",
		RequesterPerson: operator.User, ApproverPerson: approver.User, Signed: approval.Raw(signed.Signed)}
	if !reflect.DeepEqual(sig, want) {
		t.Fatalf("Signature = %+v\nwant %+v", sig, want)
	}
	chain := sealedChain(t, sig)
	st, err := record.Fold(chain)
	if err != nil || len(st.Signatures) != 1 || !reflect.DeepEqual(st.Signatures[0], sig) {
		t.Fatalf("Fold = %+v, %v", st.Signatures, err)
	}

	executed, err := e.store.MarkExecuted(ctx(t), a.ID, api.OutcomeReplayed)
	if err != nil || executed.Status != api.ApprovalExecuted || executed.Outcome != api.OutcomeReplayed {
		t.Fatalf("MarkExecuted = %+v, %v", executed, err)
	}
	if _, err := e.store.MarkExecuted(ctx(t), a.ID, api.OutcomeReplayed); !errors.Is(err, approval.ErrAlreadyDecided) {
		t.Fatalf("second MarkExecuted = %v, want ErrAlreadyDecided", err)
	}

	// AUDIT tells the approval's story, with no payload value, diff value
	// or password.
	var actions []string
	err = streams.ReadSubject(ctx(t), e.admin, subjects.AuditStream, subjects.AuditAction("approval", a.ID), func(m *jetstream.RawStreamMsg) error {
		for _, secret := range []string{"TX-SECRET-PHI", "receive"} {
			if strings.Contains(string(m.Data), secret) {
				t.Errorf("AUDIT message names a secret value: %s", m.Data)
			}
		}
		var act api.AuditAction
		if err := json.Unmarshal(m.Data, &act); err != nil {
			return err
		}
		actions = append(actions, act.Action+" by "+act.Actor)
		if act.Action == approval.AuditApproved {
			// The decision is in AUDIT whole, as its person signed it.
			var d struct {
				Signed *api.SignedDecision `json:"signed"`
			}
			if err := json.Unmarshal(act.Detail, &d); err != nil || d.Signed == nil || !reflect.DeepEqual(*d.Signed, *signed.Signed) {
				t.Errorf("the approved action carries %+v, want the approver's signed decision", d.Signed)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if w := []string{"requested by " + operator.User, "approved by " + approver.User, "executed by redriver"}; !slices.Equal(actions, w) {
		t.Errorf("AUDIT actions %q, want %q", actions, w)
	}
	for _, secret := range []string{"TX-SECRET-PHI", "receive", "dispense"} {
		if strings.Contains(e.logs.String(), secret) {
			t.Errorf("the log names a secret value %q:\n%s", secret, e.logs.String())
		}
	}
}

// TestSelfApproval: a person who asked for an action may not approve it,
// whatever his role.
func TestSelfApproval(t *testing.T) {
	e := newEnv(t)
	a := e.request(t, approver, approval.Decision{Needed: true, Reasons: []string{"policy: lifting a legal hold"}})
	if _, err := e.store.Approve(ctx(t), a.ID, approver, e.approve(t, approver, a.ID, "I checked it myself")); !errors.Is(err, approval.ErrSelfApproval) || approval.Code(err) != api.ErrSelfApproval {
		t.Fatalf("Approve of one's own request = %v, want ErrSelfApproval", err)
	}
}

// TestTwoApprovers: with two named approvers, each may approve the
// other's request and never their own, whatever role the request was
// made in (a person holds one role, but the check is on the person, not
// the role); an operator's request is approved by either.
func TestTwoApprovers(t *testing.T) {
	e := newEnv(t)
	names := access.DefaultPersonsOf(access.RoleApprover)
	if len(names) < 2 {
		t.Fatalf("default approvers %v, want two", names)
	}
	chen, lucia := access.Identity{User: names[0], Role: access.RoleApprover}, access.Identity{User: names[1], Role: access.RoleApprover}
	as := func(id access.Identity, r access.Role) access.Identity { id.Role = r; return id }
	tests := []struct {
		name                string
		requester, approver access.Identity
		want                error
	}{
		{"chen approves lucia's request", lucia, chen, nil},
		{"lucia approves chen's request", chen, lucia, nil},
		{"chen approves his own", chen, chen, approval.ErrSelfApproval},
		{"lucia approves her own", lucia, lucia, approval.ErrSelfApproval},
		{"chen approves his own, asked as an operator", as(chen, access.RoleOperator), chen, approval.ErrSelfApproval},
		{"lucia approves her own, asked as an inspector", as(lucia, access.RoleInspector), lucia, approval.ErrSelfApproval},
		{"chen approves amara's request", operator, chen, nil},
		{"lucia approves amara's request", operator, lucia, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := e.request(t, tc.requester, approval.Decision{Needed: true, Reasons: []string{"identity change"}})
			got, err := e.store.Approve(ctx(t), a.ID, tc.approver, e.approve(t, tc.approver, a.ID, "reviewed against the invoice of Müller & Söhne"))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Approve by %s of %s's request = %v, want %v", tc.approver.User, tc.requester.User, err, tc.want)
			}
			if tc.want == nil && (got.Decider != tc.approver.User || got.Requester != tc.requester.User) {
				t.Errorf("approved %+v, want decided by %s, asked by %s", got, tc.approver.User, tc.requester.User)
			}
			if tc.want != nil {
				if cur, _ := e.store.Get(ctx(t), a.ID); cur.Status != api.ApprovalPending {
					t.Errorf("a refused approval left status %s", cur.Status)
				}
			}
		})
	}
}

// TestApproveOnce: concurrent approvals (a double click, two tabs, a
// retry) sign once: exactly one call gets the approval back.
func TestApproveOnce(t *testing.T) {
	e := newEnv(t)
	a := e.request(t, operator, approval.Decision{Needed: true})
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = e.store.Approve(ctx(t), a.ID, approver, e.approve(t, approver, a.ID, fmt.Sprintf("attempt %d", i)))
		})
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, approval.ErrAlreadyDecided):
			t.Errorf("a losing Approve = %v, want ErrAlreadyDecided", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d approvals succeeded, want exactly 1 (%v)", wins, errs)
	}
}

// TestBadRequests: missing, malformed, expired or decided ids and missing
// members get coded errors.
func TestBadRequests(t *testing.T) {
	e := newEnv(t)
	expiring := e.request(t, operator, approval.Decision{Needed: true})
	rejected := e.request(t, operator, approval.Decision{Needed: true})
	if _, err := e.store.Reject(ctx(t), rejected.ID, approver, e.reject(t, approver, rejected.ID, "the invoice says dispense")); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(72*time.Hour - time.Second)
	fresh := e.request(t, operator, approval.Decision{Needed: true})
	e.clock.Add(time.Second) // expiring is due now
	tests := []struct {
		name  string
		call  func() error
		code  string
		field string
	}{
		{"approve a missing id", func() error {
			_, err := e.store.Approve(ctx(t), "appr-20260301T120000-0000000000000000", approver, e.approve(t, approver, "appr-20260301T120000-0000000000000000", "m"))
			return err
		}, api.ErrNotFound, ""},
		{"approve a malformed id", func() error {
			_, err := e.store.Approve(ctx(t), "appr.>", approver, e.approve(t, approver, "appr.>", "m"))
			return err
		}, api.ErrBadRequest, "id"},
		{"approve an expired approval", func() error {
			_, err := e.store.Approve(ctx(t), expiring.ID, approver, e.approve(t, approver, expiring.ID, "m"))
			return err
		}, api.ErrExpired, ""},
		{"reject an expired approval", func() error {
			_, err := e.store.Reject(ctx(t), expiring.ID, approver, e.reject(t, approver, expiring.ID, "m"))
			return err
		}, api.ErrExpired, ""},
		{"approve a rejected approval", func() error {
			_, err := e.store.Approve(ctx(t), rejected.ID, approver, e.approve(t, approver, rejected.ID, "m"))
			return err
		}, api.ErrAlreadyDecided, ""},
		{"reject without a reason", func() error {
			_, err := e.store.Reject(ctx(t), fresh.ID, approver, e.reject(t, approver, fresh.ID, ""))
			return err
		}, api.ErrBadRequest, "signed"},
		{"reject as an operator", func() error {
			_, err := e.store.Reject(ctx(t), fresh.ID, operator, e.reject(t, operator, fresh.ID, "no"))
			return err
		}, api.ErrForbidden, ""},
		{"execute a pending approval", func() error { _, err := e.store.MarkExecuted(ctx(t), fresh.ID, "replayed"); return err }, api.ErrAlreadyDecided, ""},
		{"get a missing id", func() error { _, err := e.store.Get(ctx(t), "appr-x"); return err }, api.ErrNotFound, ""},
		{"list an unknown status", func() error { _, err := e.store.List(ctx(t), "done", 0); return err }, api.ErrBadRequest, "status"},
		{"create without a body", func() error {
			_, err := e.store.Create(ctx(t), approval.Request{Action: api.ActionRelease, Requester: operator}, approval.DefaultPolicy())
			return err
		}, api.ErrBadRequest, "request"},
		{"create an unknown action", func() error {
			_, err := e.store.Create(ctx(t), approval.Request{Action: "purge", Requester: operator, Body: []byte(`{}`)}, approval.DefaultPolicy())
			return err
		}, api.ErrBadRequest, "action"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ae := approval.APIError(tt.call())
			if api.CodeOf(ae) != tt.code || api.FieldOf(ae) != tt.field {
				t.Fatalf("error %v, want %s %q", ae, tt.code, tt.field)
			}
		})
	}
	t.Run("unknown members of a decision", func(t *testing.T) {
		var req api.ApprovalDecisionRequest
		err := endpoint.Decode([]byte(`{"id":"appr-x","meaning":"m","password":"p","approver":"someone"}`), &req)
		if api.CodeOf(err) != api.ErrBadRequest || api.FieldOf(err) != "approver" {
			t.Fatalf("Decode = %v, want BAD_REQUEST approver", err)
		}
	})
	t.Run("list", func(t *testing.T) {
		rep, err := e.store.List(ctx(t), "", 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, a := range rep.Approvals {
			got = append(got, a.ID+" "+a.Status)
		}
		// Pending first, then the others newest first.
		want := []string{fresh.ID + " pending", expiring.ID + " expired", rejected.ID + " rejected"}
		if rejected.RequestedAt.Equal(expiring.RequestedAt) && rejected.ID > expiring.ID {
			want[1], want[2] = want[2], want[1]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("List = %q, want %q", got, want)
		}
		rep, err = e.store.List(ctx(t), api.ApprovalExpired, 0)
		if err != nil || len(rep.Approvals) != 1 || rep.Approvals[0].ID != expiring.ID {
			t.Fatalf("List expired = %+v, %v", rep, err)
		}
		rep, err = e.store.List(ctx(t), "", 1)
		if err != nil || len(rep.Approvals) != 1 || !rep.Truncated || rep.Approvals[0].ID != fresh.ID {
			t.Fatalf("List limit 1 = %+v, %v", rep, err)
		}
	})
}

// TestPasswordNeverPrinted: a decision request prints and logs without its
// password.
func TestPasswordNeverPrinted(t *testing.T) {
	req := api.ApprovalDecisionRequest{ID: "appr-1", Meaning: "m", Password: "hunter2-secret"}
	for _, s := range []string{fmt.Sprint(req), fmt.Sprintf("%+v", req), fmt.Sprintf("%#v", req), fmt.Sprint(req.Password)} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("printed the password: %s", s)
		}
	}
	var buf strings.Builder
	logJSON(&buf, req)
	if strings.Contains(buf.String(), "hunter2") || !strings.Contains(buf.String(), "appr-1") {
		t.Errorf("logged %s", buf.String())
	}
	b, _ := json.Marshal(req)
	if !strings.Contains(string(b), "hunter2-secret") {
		t.Errorf("the request's JSON lacks the password the client must send: %s", b)
	}
}

// TestUserNamesUnique: NATSReauth's proof rests on a user name naming one
// user across every account: a configuration that gives two roles a
// person of the same name does not start.
func TestUserNamesUnique(t *testing.T) {
	sec, err := access.NewSecrets([]access.Person{{Name: "alice", Role: access.RoleOperator}, {Name: "alice", Role: access.RoleApprover}},
		access.WithBcryptCost(access.MinBcryptCost))
	if err != nil {
		t.Fatal(err)
	}
	text, err := access.ServerConfig(sec)
	if err != nil {
		t.Logf("ServerConfig refused it: %v", err)
		return // refused already: as good
	}
	s, err := embedded.Start(embedded.Config{ConfigText: text, StoreDir: t.TempDir(), Port: -1})
	if err == nil {
		s.Shutdown()
		t.Fatal("a server started with the same user name in two accounts")
	}
	t.Logf("start refused: %v", err)
	if !strings.Contains(err.Error(), "Duplicate user") {
		t.Fatalf("start failed otherwise: %v", err)
	}
}

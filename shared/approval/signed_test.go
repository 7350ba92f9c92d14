package approval_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
)

// TestSignedDecision (issue #38, E5): an approval approved with its
// approver's signed decision is Proven (the registry accepts it, its
// request and decision are in AUDIT); any change of what the decision
// covers, a signature of another key, or none, is ErrUnproven
// (APPROVAL_UNPROVEN) and shown refused; the service can no longer
// sign anything.
func TestSignedDecision(t *testing.T) {
	e := newEnv(t)
	a := e.request(t, operator, approval.Decision{Needed: true})
	signed, err := e.store.Approve(ctx(t), a.ID, approver, e.approve(t, approver, a.ID, "reviewed against the invoice of Müller & Söhne <Großhandel>"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.Proven(ctx(t), signed); err != nil {
		t.Fatalf("Proven(signed) = %v", err)
	}
	stranger := approvaltest.NewPerson(t, approver.User, access.RoleApprover)
	later := signed.DecidedAt.Add(time.Minute)
	tests := []struct {
		name   string
		change func(a *api.Approval)
	}{
		{"no signed decision", func(a *api.Approval) { a.Signed = nil }},
		{"another decider", func(a *api.Approval) { a.Decider = access.DefaultPersonsOf(access.RoleApprover)[1] }},
		{"the requester's second login as decider", func(a *api.Approval) {
			a.Decider = access.RoleLogin(operator.User, access.RoleApprover)
			a.Signed = e.person(t, operator).Approve(*a, a.Meaning, *a.DecidedAt)
		}},
		{"another meaning", func(a *api.Approval) { a.Meaning = "Pharmacie Saint-Étienne" }},
		{"another decision time", func(a *api.Approval) { a.DecidedAt = &later }},
		{"another requester", func(a *api.Approval) { a.Requester = "inspector" }},
		{"another request", func(a *api.Approval) { a.Request = json.RawMessage(`{"dlq_id":"x"}`) }},
		{"another payload", func(a *api.Approval) { a.Payload = []byte(`{"quantity_delta":"-300"}`) }},
		{"another chain index", func(a *api.Approval) { a.ChainRecords++ }},
		{"digest made to match", func(a *api.Approval) {
			a.Payload = []byte(`{"quantity_delta":"-300"}`)
			sd := *a.Signed
			sd.Decision.Request = approval.RequestDigest(*a)
			a.Signed = &sd
		}},
		{"signed by a key not registered (the service's)", func(a *api.Approval) { a.Signed = stranger.Approve(*a, a.Meaning, *a.DecidedAt) }},
		{"garbage signature", func(a *api.Approval) { sd := *a.Signed; sd.Signature.Signature = []byte("AAAA"); a.Signed = &sd }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := signed
			sd := *signed.Signed
			f.Signed = &sd
			tc.change(&f)
			err := e.store.Proven(ctx(t), f)
			if !errors.Is(err, approval.ErrUnproven) {
				t.Fatalf("Proven = %v, want ErrUnproven", err)
			}
			if code := approval.Code(err); code != api.ErrApprovalUnproven {
				t.Fatalf("code %s", code)
			}
		})
	}
	t.Run("refused when stored", func(t *testing.T) {
		cur, err := e.store.Get(ctx(t), signed.ID)
		if err != nil || cur.Status != api.ApprovalApproved {
			t.Fatalf("Get = %s, %v", cur.Status, err)
		}
		forged := cur
		forged.Meaning = "forged afterwards"
		if _, err := e.store.Refuse(ctx(t), forged, "the meaning changed"); err != nil {
			t.Fatal(err)
		}
		got, err := e.store.Get(ctx(t), signed.ID)
		if err != nil || got.Status != api.ApprovalRefused || !strings.Contains(got.Refused, "meaning") {
			t.Fatalf("Get after Refuse = %s %q, %v", got.Status, got.Refused, err)
		}
	})
	t.Run("not in AUDIT", func(t *testing.T) {
		// Signed by the approver's own key for a request AUDIT never saw.
		b := e.request(t, operator, approval.Decision{Needed: true})
		now := e.clock.Now().UTC()
		b.ID = "appr-20260301T120000-00000000000000aa"
		b.Status, b.Decider, b.DecidedAt, b.Meaning = api.ApprovalApproved, approver.User, &now, "m"
		b.Signed = e.person(t, approver).Approve(b, "m", now)
		if err := e.store.Proven(ctx(t), b); !errors.Is(err, approval.ErrUnproven) {
			t.Fatalf("Proven = %v, want ErrUnproven", err)
		}
	})
	t.Run("no registry", func(t *testing.T) {
		if _, err := approval.Open(ctx(t), e.js, approval.Config{Now: e.clock.Now}); err == nil {
			t.Fatal("Open without a Checker succeeded")
		}
	})
}

// TestPendingLimits: a requester's and a chain's pending approvals are
// capped (ErrLimit, APPROVAL_LIMIT); the same request asked again while
// pending answers the pending approval and counts once.
func TestPendingLimits(t *testing.T) {
	e := newEnv(t)
	store, err := approval.Open(ctx(t), e.js, approval.Config{Checker: approval.AuditRegistry{JS: e.js}, Now: e.clock.Now,
		Limits: approval.Limits{PerRequester: 3, PerChain: 2}})
	if err != nil {
		t.Fatal(err)
	}
	// A reason "one..." asks for a correction, any other a dismissal (a
	// record has one open correction at a time: TestOneOpenCorrection).
	create := func(who access.Identity, dlqID, reason string) (api.Approval, error) {
		if !strings.HasPrefix(reason, "one") {
			body, _ := json.Marshal(api.DismissRequest{DLQID: dlqID, Reason: reason})
			return store.Create(ctx(t), approval.Request{Action: api.ActionDismiss, DLQID: dlqID, Domain: "pharmacy", ChainRecords: 1,
				Body: body, Requester: who, Reason: reason, Decision: approval.Decision{Needed: true}}, approval.DefaultPolicy())
		}
		body, _ := json.Marshal(api.RedriveRequest{DLQID: dlqID, Payload: corrected, Reason: reason})
		return store.Create(ctx(t), approval.Request{Action: api.ActionCorrect, DLQID: dlqID, Domain: "pharmacy", ChainRecords: 1,
			Body: body, Payload: indented, Requester: who, Reason: reason, Decision: approval.Decision{Needed: true}}, approval.DefaultPolicy())
	}
	const chainA, chainB, chainC = "pharmacy_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "pharmacy_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "pharmacy_cccccccccccccccccccccccccccccccc"
	first, err := create(operator, chainA, "one")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		who    access.Identity
		dlqID  string
		reason string
		want   string // "" created, "same" the first answered, or a code
	}{
		{"the same request again", operator, chainA, "one", "same"},
		{"a second correction of the chain", operator, chainA, "one, again", approval.CodeCorrectionPending},
		{"a second of the chain", operator, chainA, "two", ""},
		{"a third of the chain", operator, chainA, "three", api.ErrApprovalLimit},
		{"another chain", operator, chainB, "one", ""},
		{"the requester's fourth", operator, chainC, "one", api.ErrApprovalLimit},
		{"the chain's third, by another person", access.Identity{User: "inspector", Role: access.RoleInspector}, chainA, "x", api.ErrApprovalLimit},
		{"another person, another chain", access.Identity{User: "inspector", Role: access.RoleInspector}, chainC, "x", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := create(tc.who, tc.dlqID, tc.reason)
			switch tc.want {
			case "same":
				if err != nil || a.ID != first.ID {
					t.Fatalf("Create = %s, %v; want the pending %s", a.ID, err, first.ID)
				}
			case "":
				if err != nil || a.ID == "" || a.ID == first.ID {
					t.Fatalf("Create = %s, %v; want a new approval", a.ID, err)
				}
			case approval.CodeCorrectionPending:
				if code := api.CodeOf(approval.APIError(err)); code != tc.want || api.AsError(approval.APIError(err)).Approval.ID != first.ID {
					t.Fatalf("Create = %v, want %s naming %s", err, tc.want, first.ID)
				}
			default:
				if code := api.CodeOf(approval.APIError(err)); code != tc.want || !errors.Is(err, approval.ErrLimit) {
					t.Fatalf("Create = %v, want %s", err, tc.want)
				}
			}
		})
	}
	// A decided approval no longer counts.
	if _, err := store.Reject(ctx(t), first.ID, approver, e.reject(t, approver, first.ID, "not this one")); err != nil {
		t.Fatal(err)
	}
	if _, err := create(operator, chainA, "three"); err != nil {
		t.Fatalf("after a rejection: %v", err)
	}
}

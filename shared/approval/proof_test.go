package approval_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
)

// TestProof (I4): an approval signed by Approve verifies and is Proven
// (its request and decision in AUDIT); any change of what the proof covers,
// a proof of another key, or none, is ErrUnproven and shown refused.
func TestProof(t *testing.T) {
	e := newEnv(t)
	a := e.request(t, operator, approval.Decision{Needed: true})
	signed, err := e.store.Approve(ctx(t), a.ID, approver, "reviewed against the invoice of Müller & Söhne <Großhandel>", e.password(approver.User))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.Proven(ctx(t), signed); err != nil {
		t.Fatalf("Proven(signed) = %v", err)
	}
	other, err := nkeys.CreateServer()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := other.Seed()
	otherSigner, err := approval.NewSigner(seed)
	if err != nil {
		t.Fatal(err)
	}
	later := signed.DecidedAt.Add(time.Minute)
	tests := []struct {
		name   string
		change func(a *api.Approval)
	}{
		{"no proof", func(a *api.Approval) { a.Proof = nil }},
		{"another decider", func(a *api.Approval) { a.Decider = "policy" }},
		{"another meaning", func(a *api.Approval) { a.Meaning = "Pharmacie Saint-Étienne" }},
		{"another decision time", func(a *api.Approval) { a.DecidedAt = &later }},
		{"another requester", func(a *api.Approval) { a.Requester = "inspector" }},
		{"another request", func(a *api.Approval) { a.Request = json.RawMessage(`{"dlq_id":"x"}`) }},
		{"another payload", func(a *api.Approval) { a.Payload = []byte(`{"quantity_delta":"-300"}`) }},
		{"another chain index", func(a *api.Approval) { a.ChainRecords++ }},
		{"digest made to match", func(a *api.Approval) {
			a.Payload = []byte(`{"quantity_delta":"-300"}`)
			p := *a.Proof
			p.RequestDigest = approval.RequestDigest(*a)
			a.Proof = &p
		}},
		{"signed by another key", func(a *api.Approval) {
			p, err := otherSigner.Sign(*a)
			if err != nil {
				t.Fatal(err)
			}
			a.Proof = &p
		}},
		{"garbage signature", func(a *api.Approval) { p := *a.Proof; p.Signature = "AAAA"; a.Proof = &p }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := signed
			f.Proof = &api.ApprovalProof{}
			*f.Proof = *signed.Proof
			tc.change(&f)
			if err := e.signer.Verifier().Verify(f); !errors.Is(err, approval.ErrUnproven) {
				t.Fatalf("Verify = %v, want ErrUnproven", err)
			}
			if err := e.store.Proven(ctx(t), f); !errors.Is(err, approval.ErrUnproven) {
				t.Fatalf("Proven = %v, want ErrUnproven", err)
			}
			if code := api.CodeOf(approval.APIError(approval.ErrUnproven)); code != api.ErrApprovalUnproven {
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
		// A proof made with the real key for a request AUDIT never saw.
		b := e.request(t, operator, approval.Decision{Needed: true})
		now := e.clock.Now().UTC()
		b.ID = "appr-20260301T120000-00000000000000aa"
		b.Status, b.Decider, b.DecidedAt, b.Meaning = api.ApprovalApproved, approver.User, &now, "m"
		p, err := e.signer.Sign(b)
		if err != nil {
			t.Fatal(err)
		}
		b.Proof = &p
		if err := e.store.Proven(ctx(t), b); !errors.Is(err, approval.ErrUnproven) {
			t.Fatalf("Proven = %v, want ErrUnproven", err)
		}
	})
	t.Run("no signing key", func(t *testing.T) {
		store, err := approval.Open(ctx(t), e.js, approval.Config{Reauth: approval.NATSReauth{URLs: e.srv.ClientURL()}, Now: e.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		c := e.request(t, operator, approval.Decision{Needed: true})
		if _, err := store.Approve(ctx(t), c.ID, approver, "m", e.password(approver.User)); !errors.Is(err, approval.ErrForbidden) {
			t.Fatalf("Approve without a key = %v, want ErrForbidden", err)
		}
	})
}

// TestPendingLimits: a requester's and a chain's pending approvals are
// capped (ErrLimit, APPROVAL_LIMIT); the same request asked again while
// pending answers the pending approval and counts once.
func TestPendingLimits(t *testing.T) {
	e := newEnv(t)
	store, err := approval.Open(ctx(t), e.js, approval.Config{Reauth: approval.NATSReauth{URLs: e.srv.ClientURL()}, Now: e.clock.Now,
		Limits: approval.Limits{PerRequester: 3, PerChain: 2}})
	if err != nil {
		t.Fatal(err)
	}
	create := func(who access.Identity, dlqID, reason string) (api.Approval, error) {
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
			default:
				if code := api.CodeOf(approval.APIError(err)); code != tc.want || !errors.Is(err, approval.ErrLimit) {
					t.Fatalf("Create = %v, want %s", err, tc.want)
				}
			}
		})
	}
	// A decided approval no longer counts.
	if _, err := store.Reject(ctx(t), first.ID, approver, "not this one"); err != nil {
		t.Fatal(err)
	}
	if _, err := create(operator, chainA, "three"); err != nil {
		t.Fatalf("after a rejection: %v", err)
	}
}

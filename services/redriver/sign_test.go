package redriver

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/record"
)

// signed returns req (an api.ReleaseRequest or api.DismissRequest) as
// JSON, signed by user acting in role: a person registered in AUDIT
// through js with a key of their own, who signs the decision of the
// chain as it stands now.
func signed(tb testing.TB, js jetstream.JetStream, req any, user string, role access.Role) string {
	tb.Helper()
	p := approvaltest.Register(tb, js, user, role)
	var b []byte
	switch r := req.(type) {
	case api.ReleaseRequest:
		r.Signed = p.Record(api.DecisionRelease, r.DLQID, r, approvaltest.ChainHead(tb, js, r.DLQID), role, time.Now())
		b, _ = json.Marshal(r)
	case api.DismissRequest:
		r.Signed = p.Record(api.DecisionDismiss, r.DLQID, r, approvaltest.ChainHead(tb, js, r.DLQID), role, time.Now())
		b, _ = json.Marshal(r)
	default:
		tb.Fatalf("signed: %T", req)
	}
	return string(b)
}

// TestDecisionsSignedByTheirPerson (issue #38, E5/E6): a release or a
// dismissal is taken only with its person's signed decision of that very
// request on the chain as it stands, now; anything else is
// DECISION_UNSIGNED and nothing is appended.
func TestDecisionsSignedByTheirPerson(t *testing.T) {
	e := newTestEnv(t)
	appends := newFakeAppends(t, e.nc)
	p := approval.DefaultPolicy()
	p.ReleasePoison, p.DismissWithoutApproval = false, true
	if _, err := approval.NewPolicyStore(e.js, nil).Set(context.Background(), access.Identity{User: "policy", Role: access.RolePolicy},
		api.PolicySetRequest{Policy: p, Reason: "these decisions need one person"}); err != nil {
		t.Fatal(err)
	}
	poison := e.write(t, spec{n: 1, domain: "fsma", class: record.ClassExhausted, code: codes.DownstreamUnavailable,
		kinds: []record.Kind{record.KindPoisoned}})
	other := e.write(t, spec{n: 2, domain: "fsma", class: record.ClassExhausted, code: codes.DownstreamUnavailable,
		kinds: []record.Kind{record.KindPoisoned}})
	const actor = "陈伟.ops"
	reason := "Lieferschein 4711 von Müller & Söhne <Großhandel> geprüft"
	release := api.ReleaseRequest{DLQID: poison, Actor: actor, Reason: reason}
	op := approvaltest.Register(t, e.js, actor, access.RoleOperator)
	head := approvaltest.ChainHead(t, e.js, poison)
	now := time.Now()
	stranger := approvaltest.NewPerson(t, actor, access.RoleOperator)
	disabled := approvaltest.Register(t, e.js, "dorothea.müller", access.RoleOperator)
	disabled.Disable(t, e.js, now.Add(-time.Minute))
	body := func(sd *api.SignedDecision) string {
		r := release
		r.Signed = sd
		b, _ := json.Marshal(r)
		return string(b)
	}
	tests := []struct {
		name string
		body string
	}{
		{"not signed", body(nil)},
		{"a key never registered (a service's own)", body(stranger.Record(api.DecisionRelease, poison, release, head, access.RoleOperator, now))},
		{"the signature of another chain's release", body(op.Record(api.DecisionRelease, other, api.ReleaseRequest{DLQID: other, Reason: reason}, approvaltest.ChainHead(t, e.js, other), access.RoleOperator, now))},
		{"another reason than the one signed", body(op.Record(api.DecisionRelease, poison, api.ReleaseRequest{DLQID: poison, Reason: "something else"}, head, access.RoleOperator, now))},
		{"an earlier state of the chain", body(op.Record(api.DecisionRelease, poison, release, "0000", access.RoleOperator, now))},
		{"a dismissal's signature", body(op.Record(api.DecisionDismiss, poison, release, head, access.RoleOperator, now))},
		{"signed an hour ago", body(op.Record(api.DecisionRelease, poison, release, head, access.RoleOperator, now.Add(-time.Hour)))},
		{"a disabled person's key", func() string {
			r := release
			r.Actor = disabled.Name
			r.Signed = disabled.Record(api.DecisionRelease, poison, r, head, access.RoleOperator, now)
			b, _ := json.Marshal(r)
			return string(b)
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if data, code := e.request(t, api.Release, tc.body); code != api.ErrDecisionUnsigned {
				t.Fatalf("release: %s %s, want %s", code, data, api.ErrDecisionUnsigned)
			}
		})
	}
	appends.mu.Lock()
	n := len(appends.reqs)
	appends.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d appends after refused decisions, want none", n)
	}
	if data, code := e.request(t, api.Release, signed(t, e.js, release, actor, access.RoleOperator)); code != "" {
		t.Fatalf("signed release: %s %s", code, data)
	}
	got := appends.first(t, record.KindReleased)
	if got.Signed == nil || got.Signed.Decision.Person != actor || got.Signed.Decision.Chain != head || got.Signed.Decision.Meaning != reason {
		t.Fatalf("the released record's append carries %+v, want the operator's signed decision", got.Signed)
	}
	if data, code := e.request(t, api.Dismiss, signed(t, e.js, api.DismissRequest{DLQID: other, Actor: actor, Reason: reason}, actor, access.RoleOperator)); code != "" {
		t.Fatalf("signed dismissal: %s %s", code, data)
	}
	if got := appends.first(t, record.KindDismissed); got.Signed == nil || got.Signed.Decision.Action != api.DecisionDismiss {
		t.Fatalf("the dismissed record's append carries %+v", got.Signed)
	}
}

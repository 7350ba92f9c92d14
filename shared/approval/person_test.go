package approval_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
)

// TestOnePersonNeverApprovesOwnRequest: a requester and an approver are
// compared by person: Amara's approver login (a role login of hers) never
// approves what her operator user asked for, nor the reverse; Chen's
// approver user approves Amara's request.
func TestOnePersonNeverApprovesOwnRequest(t *testing.T) {
	e := newEnv(t)
	amara, chen := access.DefaultPerson(access.RoleOperator), access.DefaultPerson(access.RoleApprover)
	tests := []struct {
		name      string
		requester access.Identity
		approver  access.Identity
		want      error
	}{
		{"her approver login, her operator request", operator,
			access.Identity{User: access.RoleLogin(amara, access.RoleApprover), Role: access.RoleApprover}, approval.ErrSelfApproval},
		{"her operator user cannot approve anyway, asked by her approver login",
			access.Identity{User: access.RoleLogin(amara, access.RoleApprover), Role: access.RoleOperator},
			access.Identity{User: access.RoleLogin(amara, access.RoleApprover), Role: access.RoleApprover}, approval.ErrSelfApproval},
		{"chen's inspector login, chen's approver user", access.Identity{User: access.RoleLogin(chen, access.RoleInspector), Role: access.RoleInspector},
			approver, approval.ErrSelfApproval},
		{"chen approves amara's request", operator, approver, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := e.request(t, tc.requester, approval.Decision{Needed: true, Reasons: []string{"identity change"}})
			_, err := e.store.Approve(ctx(t), a.ID, tc.approver, e.approve(t, tc.approver, a.ID, "reviewed against the invoice of Müller & Söhne"))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Approve by %s of %s's request = %v, want %v", tc.approver.User, tc.requester.User, err, tc.want)
			}
			if tc.want != nil && approval.Code(err) != api.ErrSelfApproval {
				t.Fatalf("code %s, want %s", approval.Code(err), api.ErrSelfApproval)
			}
		})
	}
}

// TestLimitsHoldUnderConcurrency: 24 concurrent Creates through 8
// connections (8 stores, as 8 redriver instances would be) never pass a
// limit: of 24 corrections of one chain exactly PerChain are pending,
// of 24 corrections of 24 chains by one person (through two of her
// users) exactly PerRequester; every other one is ErrLimit.
func TestLimitsHoldUnderConcurrency(t *testing.T) {
	const conns, requests = 8, 24
	tests := []struct {
		name      string
		limits    approval.Limits
		chainOf   func(i int) string
		requester func(i int) access.Identity
		want      int
	}{
		{"24 corrections of one chain: one open correction", approval.Limits{PerChain: 3, PerRequester: 20},
			func(int) string { return "pharmacy_0123456789abcdef0123456789abcdef" },
			func(i int) access.Identity { return operator }, 1},
		{"24 corrections of 24 chains by one person, cap 20", approval.Limits{PerChain: 3, PerRequester: 20},
			func(i int) string { return fmt.Sprintf("pharmacy_%032x", i) },
			func(i int) access.Identity {
				if i%2 == 1 {
					return access.Identity{User: access.RoleLogin(operator.User, access.RoleInspector), Role: access.RoleInspector}
				}
				return operator
			}, 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			stores := make([]*approval.Store, conns)
			for i := range stores {
				js, err := jetstream.New(e.srv.ConnectAs(t, access.Redriver))
				if err != nil {
					t.Fatal(err)
				}
				if stores[i], err = approval.Open(ctx(t), js, approval.Config{Checker: approval.AuditRegistry{JS: js},
					Limits: tc.limits, Now: e.clock.Now}); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			errs := make([]error, requests)
			start := make(chan struct{})
			for i := range requests {
				wg.Add(1)
				go func() {
					defer wg.Done()
					dlq := tc.chainOf(i)
					body, _ := json.Marshal(api.RedriveRequest{DLQID: dlq, Payload: corrected, Reason: fmt.Sprintf("Lieferschein Nr. %d von Müller & Söhne <Großhandel>", i)})
					<-start
					_, errs[i] = stores[i%conns].Create(ctx(t), approval.Request{
						Action: api.ActionCorrect, DLQID: dlq, Domain: "pharmacy", ChainRecords: 1,
						Body: body, Requester: tc.requester(i), Reason: "陈伟 asked for it", Decision: approval.Decision{Needed: true},
					}, approval.DefaultPolicy())
				}()
			}
			close(start)
			wg.Wait()
			ok := 0
			for i, err := range errs {
				switch {
				case err == nil:
					ok++
				case !errors.Is(err, approval.ErrLimit) && !errors.Is(err, approval.ErrCorrectionPending):
					t.Errorf("request %d: %v, want nil, ErrLimit or ErrCorrectionPending", i, err)
				}
			}
			rep, err := e.store.List(ctx(t), api.ApprovalPending, 0)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.want || len(rep.Approvals) != tc.want {
				t.Fatalf("%d created, %d pending, want %d of each", ok, len(rep.Approvals), tc.want)
			}
		})
	}
}

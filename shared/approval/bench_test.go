package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
)

// BenchmarkCheckSigned is the cost an executor adds to a decision (issue
// #38): the signed decision compared with the one rebuilt, and the people
// registry's check (the signer's records read from AUDIT, the ed25519
// signature verified), on a real embedded server.
func BenchmarkCheckSigned(b *testing.B) {
	e := newEnv(b)
	a := e.request(b, operator, approval.Decision{Needed: true})
	sd := e.approve(b, approver, a.ID, "reviewed against the invoice of Müller & Söhne <Großhandel>")
	want := approval.ForApproval(a, api.DecisionApprove, "", approver.User, string(access.RoleApprover), e.clock.Now())
	reg := approval.AuditRegistry{JS: e.js}
	b.ResetTimer()
	for b.Loop() {
		if err := approval.CheckSigned(ctx(b), reg, want, sd, e.clock.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreate is the cost of one approval request (Create: the
// pending approvals counted, the request written whole to REQUESTS and
// its digest to AUDIT, the entry created) on a real embedded server, on
// a store that holds the approvals asked before it (go test -run '^$'
// -bench Create -benchtime 300x: the count grows with b.N).
func BenchmarkCreate(b *testing.B) {
	e := newEnv(b)
	body, _ := json.Marshal(map[string]any{"reason": "NDC fixed from the invoice of Müller & Söhne <Großhandel>", "note": strings.Repeat("陈伟 ", 40)})
	payload := []byte(`{"transaction_id":"TX-1","ndc":"0409-4888-20","lot":"A1&B<2>","pharmacist":"陈伟","quantity":30}`)
	i := 0
	for b.Loop() {
		i++
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := e.store.Create(c, approval.Request{Action: api.ActionCorrect, DLQID: fmt.Sprintf("pharmacy_%032x", i), Domain: "pharmacy",
			ChainRecords: 2, ChainHead: strings.Repeat("ab", 32), Body: body, Payload: payload, Requester: operator,
			Reason: "NDC fixed from the invoice", Decision: approval.Decision{Needed: true, Reasons: []string{"identity_change"}}}, approval.DefaultPolicy())
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
}

package approval_test

import (
	"testing"

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

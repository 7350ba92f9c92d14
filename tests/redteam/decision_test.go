package redteam

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/record"
)

// TestForgedDismissalNeverSealed (issue #38, E6): with a service's
// credential, a dismissal naming chen.wei that he never signed. Asked of
// the quarantiner with the redriver's credential (the one that may ask
// for appends), unsigned or signed by a key he never registered, it is
// refused DECISION_UNSIGNED and the chain stays open. (Written straight
// into QUARANTINE with the quarantiner's own credential, its writer, such
// a record is what approval.CheckRecord, the check a verifier makes of
// every decision record, refuses: shared/approval's TestCheckRecord; not
// written here, where the stack is shared with tests that verify it.)
func TestForgedDismissalNeverSealed(t *testing.T) {
	e := startEnv(t)
	chen := access.DefaultPerson(access.RoleApprover)
	const reason = "duplicate: Müller & Söhne <Großhandel> sent it twice (陈伟)"
	victim := e.quarantine(t, "forged-dismissal-victim")
	before := e.chain(t, victim)
	head := before.State.LastHash
	stranger := approvaltest.NewPerson(t, chen, access.RoleOperator)
	forged := stranger.Record(api.DecisionDismiss, victim, api.DismissRequest{DLQID: victim, Reason: reason}, head, access.RoleOperator, time.Now())
	redriver := e.conn(t, access.Redriver)
	for _, tc := range []struct {
		name   string
		signed *api.SignedDecision
	}{
		{"unsigned", nil},
		{"signed by a key chen.wei never registered", forged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp := len(before.Records)
			b, _ := json.Marshal(api.AppendRequest{DLQID: victim, Domain: "pharmacy", Kind: record.KindDismissed, ExpectedIndex: &exp,
				Actor: chen, Reason: reason, Signed: tc.signed})
			m, err := redriver.Request(api.QuarantinerAppend, b, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if code := m.Header.Get(micro.ErrorCodeHeader); code != api.ErrDecisionUnsigned {
				t.Fatalf("quarantiner.append as the redriver: %q %s, want %s", code, m.Data, api.ErrDecisionUnsigned)
			}
			if after := e.chain(t, victim); len(after.Records) != len(before.Records) || after.State.Status != record.StatusOpen {
				t.Fatalf("chain: %d records, %s; want %d, open", len(after.Records), after.State.Status, len(before.Records))
			}
		})
	}
}

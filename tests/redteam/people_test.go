package redteam

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestSecondUserOfRequesterNeverApproves (issue #38, E7): an operator who
// also holds the approver role (a role login of hers, the only way
// `deadletter people` gives a person a second role) asks for an
// identity-changing correction and signs it with her approver login and
// her own key: SELF_APPROVAL, the approval stays pending, the chain
// is untouched. A second identity under a name of her own
// ("amara.okafor.approver") is refused by `people add` before it exists.
func TestSecondUserOfRequesterNeverApproves(t *testing.T) {
	e := startEnv(t)
	amara := access.DefaultPerson(access.RoleOperator)
	path := filepath.Join(tempDir, "data", stack.CredentialsFile)
	var login string
	func() {
		unlock, err := access.LockFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defer unlock()
		sec, err := access.LoadOrCreate(path, access.DefaultPeople(), access.WithBcryptCost(access.MinBcryptCost))
		if err != nil {
			t.Fatal(err)
		}
		if err := sec.AddPerson(access.Person{Name: amara + ".approver", DisplayName: "Amara Okafor", Role: access.RoleApprover}, "redteam",
			access.WithBcryptCost(access.MinBcryptCost)); !errors.Is(err, access.ErrSecondIdentity) {
			t.Fatalf("a second identity of %s: %v, want %v", amara, err, access.ErrSecondIdentity)
		}
		if login, err = sec.Grant(amara, access.RoleApprover, "redteam", access.WithBcryptCost(access.MinBcryptCost)); err != nil {
			t.Fatal(err)
		}
		if err := sec.Save(path); err != nil {
			t.Fatal(err)
		}
	}()
	// The running server applies the grant within seconds.
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		nc, err := e.st.ConnectAs(login)
		if err != nil {
			return err
		}
		nc.Close()
		return nil
	})

	victim := e.quarantine(t, "second-user-victim-Müller & Söhne")
	before := e.chain(t, victim)
	p, _ := uniqueValidEvent(t, subjects.Event("pharmacy", "dispense"))
	b, _ := json.Marshal(api.RedriveRequest{DLQID: victim, Payload: p, Reason: "Großhandel <Nord>: \"the invoice says so\""})
	m, err := e.conn(t, amara).Request(api.Redrive, b, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ae := endpoint.ErrorOf(m)
	if ae == nil || ae.Code != api.ErrApprovalRequired || ae.Approval == nil {
		t.Fatalf("the correction: %v, want %s", ae, api.ErrApprovalRequired)
	}
	id := ae.Approval.ID

	// She signs with her own registered key, in the approver role.
	her := approvaltest.Register(t, e.admin, amara, access.RoleOperator, access.RoleApprover)
	var rep api.ApprovalReply
	if code := e.request(t, login, api.ApprovalApprove, her.ApproveRequest(t, e.admin, id, "I reviewed it", time.Now()), &rep); code != api.ErrSelfApproval {
		t.Fatalf("her approver login's signature: %q, want %s", code, api.ErrSelfApproval)
	}
	var got api.ApprovalReply
	if code := e.request(t, access.DefaultPerson(access.RoleViewer), api.ApprovalGet, api.ApprovalGetRequest{ID: id}, &got); code != "" || got.Approval.Status != api.ApprovalPending || got.Approval.Decider != "" {
		t.Fatalf("the approval after her signature: %q %+v, want pending, undecided", code, got.Approval)
	}
	if after := e.chain(t, victim); len(after.Records) != len(before.Records) || after.State.Status != record.StatusOpen {
		t.Fatalf("chain: %d records, %s; want %d, open", len(after.Records), after.State.Status, len(before.Records))
	}
	// Another person rejects it (the shared stack's pending approvals
	// stay few).
	chen := approvaltest.Register(t, e.admin, access.DefaultPerson(access.RoleApprover), access.RoleApprover)
	if code := e.request(t, access.DefaultPerson(access.RoleApprover), api.ApprovalReject, chen.RejectRequest(t, e.admin, id, "asked and signed by one person", time.Now()), nil); code != "" {
		t.Fatal(code)
	}
}

package approval_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestOneOpenCorrection: a record has one open correction (issue #40
// O2): another correction of it, by anyone, is refused with the pending
// one's id (CORRECTION_PENDING); the same request asked again, another
// action or another record is not.
func TestOneOpenCorrection(t *testing.T) {
	e := newEnv(t)
	const record, other = "pharmacy_6f1e0c2a9b8d7e6f5a4b3c2d1e0f9a8b", "pharmacy_0a1b2c3d4e5f60718293a4b5c6d7e8f9"
	second := access.Identity{User: access.RoleLogin(access.DefaultPerson(access.RoleApprover), access.RoleOperator), Role: access.RoleOperator}
	request := func(who access.Identity, dlqID, reason string, payload []byte) approval.Request {
		body, _ := json.Marshal(api.RedriveRequest{DLQID: dlqID, Payload: payload, Reason: reason})
		return approval.Request{Action: api.ActionCorrect, DLQID: dlqID, Domain: "pharmacy", ChainRecords: 1,
			Body: body, Payload: payload, Requester: who, Reason: reason, Decision: approval.Decision{Needed: true}}
	}
	first, err := e.store.Create(ctx(t), request(operator, record, "quantity per the invoice of Müller & Söhne", corrected), approval.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		req     approval.Request
		pending bool
	}{
		{"another person's correction", request(second, record, "陈伟: the count was 28", original), true},
		{"the requester's other correction", request(operator, record, "another reason <b>", original), true},
		{"the same request asked again", request(operator, record, "quantity per the invoice of Müller & Söhne", corrected), false},
		{"a correction of another record", request(second, other, "陈伟: the count was 28", original), false},
		{"a dismissal of the record", approval.Request{Action: api.ActionDismiss, DLQID: record, Domain: "pharmacy", ChainRecords: 1,
			Body: json.RawMessage(`{"reason":"duplicate"}`), Requester: second, Reason: "duplicate", Decision: approval.Decision{Needed: true}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.store.PendingCorrection(ctx(t), tt.req)
			if tt.req.Action != api.ActionCorrect {
				// PendingCorrection is asked for corrections only; Create
				// admits the dismissal beside the pending correction.
				a, cerr := e.store.Create(ctx(t), tt.req, approval.DefaultPolicy())
				if cerr != nil || a.ID == first.ID {
					t.Fatalf("Create of a dismissal = %s, %v", a.ID, cerr)
				}
				return
			}
			if !tt.pending {
				if err != nil {
					t.Fatalf("PendingCorrection = %v, want nil", err)
				}
				return
			}
			ae := api.AsError(approval.APIError(err))
			if ae == nil || ae.Code != approval.CodeCorrectionPending || ae.Approval == nil || ae.Approval.ID != first.ID ||
				ae.Approval.Requester != operator.User || len(ae.Approval.Payload) > 0 || len(ae.Approval.Request) > 0 {
				t.Fatalf("PendingCorrection = %#v, want %s naming %s without values", ae, approval.CodeCorrectionPending, first.ID)
			}
			if _, cerr := e.store.Create(ctx(t), tt.req, approval.DefaultPolicy()); !errors.Is(cerr, approval.ErrCorrectionPending) {
				t.Fatalf("Create = %v, want ErrCorrectionPending", cerr)
			}
		})
	}
	t.Run("the record's pending approvals", func(t *testing.T) {
		got, err := e.store.Pending(ctx(t), record)
		if err != nil || len(got) != 2 || got[0].ID != first.ID || got[0].Action != api.ActionCorrect {
			t.Fatalf("Pending = %+v, %v; want the correction then the dismissal", got, err)
		}
	})
	t.Run("rejected, the record takes a new correction", func(t *testing.T) {
		if _, err := e.store.Reject(ctx(t), first.ID, approver, e.reject(t, approver, first.ID, "the invoice says 30")); err != nil {
			t.Fatal(err)
		}
		if err := e.store.PendingCorrection(ctx(t), tests[0].req); err != nil {
			t.Fatalf("PendingCorrection after the rejection = %v", err)
		}
	})
}

// TestStale: a signed approval whose record moved on is refused as stale:
// status refused, outcome STALE, the refusal in AUDIT, never executed.
func TestStale(t *testing.T) {
	e := newEnv(t)
	a := e.request(t, operator, approval.Decision{Needed: true, Reasons: []string{"policy: a correction of a controlled substance"}})
	signed, err := e.store.Approve(ctx(t), a.ID, approver, e.approve(t, approver, a.ID, "reviewed against the invoice"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.store.Stale(ctx(t), signed, "the record moved on since the request")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != api.ApprovalRefused || got.Outcome != approval.StaleOutcome || got.ExecutedAt != nil || got.Refused == "" {
		t.Fatalf("Stale = %+v", got)
	}
	if _, err := e.store.MarkExecuted(ctx(t), a.ID, "redriven"); !errors.Is(err, approval.ErrAlreadyDecided) {
		t.Fatalf("MarkExecuted of a stale approval = %v, want ErrAlreadyDecided", err)
	}
	if _, err := e.store.Stale(ctx(t), got, "again"); !errors.Is(err, approval.ErrAlreadyDecided) {
		t.Fatalf("Stale of a refused approval = %v, want ErrAlreadyDecided", err)
	}
	var actions []string
	err = streams.ReadSubject(ctx(t), e.admin, subjects.AuditStream, subjects.AuditAction("approval", a.ID), func(m *jetstream.RawStreamMsg) error {
		var act api.AuditAction
		if err := json.Unmarshal(m.Data, &act); err != nil {
			return err
		}
		actions = append(actions, act.Action)
		return nil
	})
	if err != nil || len(actions) != 3 || actions[2] != approval.AuditRefused {
		t.Fatalf("AUDIT actions %v, %v; want requested, approved, refused", actions, err)
	}
}

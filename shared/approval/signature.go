package approval

import (
	"fmt"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/record"
)

// Signature returns the electronic signature of an approved (or
// executed) approval, for the approved record the redriver appends to the
// event's chain before it executes the action (record.KindApproved, at
// index a.ChainRecords): the requester and request time, the signer, the
// time of signing and the meaning (21 CFR 11.50), the persons of both,
// and the approver's signed decision whole (issue #38). Times are UTC.
func Signature(a api.Approval) (record.Signature, error) {
	if (a.Status != api.ApprovalApproved && a.Status != api.ApprovalExecuted) || a.DecidedAt == nil || a.Decider == "" || a.Meaning == "" {
		return record.Signature{}, fmt.Errorf("%w: %s is %s, not signed", ErrAlreadyDecided, a.ID, a.Status)
	}
	return record.Signature{
		ApprovalID: a.ID, Action: a.Action,
		Requester: a.Requester, RequestedAt: a.RequestedAt.UTC(),
		Approver: a.Decider, ApproverRole: string(access.RoleApprover), SignedAt: a.DecidedAt.UTC(),
		Meaning:         a.Meaning,
		RequesterPerson: access.PersonOf(a.Requester), ApproverPerson: access.PersonOf(a.Decider),
		Signed: Raw(a.Signed),
	}, nil
}

// Redact returns a as role may see it. The roles that read payloads
// (access.Role.ReadsPayloads) and the approver, who must review what he
// signs (the corrected payload and the diff of its identity), see it
// whole; any other role gets neither the request to execute (it may carry
// a payload), nor the corrected payload, nor the values of the identity diff, only the names of the
// changed fields (DiffFields).
func Redact(a api.Approval, role access.Role) api.Approval {
	if role.ReadsPayloads() || role == access.RoleApprover {
		return a
	}
	a.Request, a.Payload, a.Diff = nil, nil, nil
	return a
}

package approval

import (
	"context"
	"fmt"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/record"
)

// Decision records (issue #38, E6): an approved, released or dismissed
// record states a person's decision, so it carries that person's signed
// decision whole (record.Signature.Signed, record.Record.Decision).
// CheckRecord is the one check of such a record, made by the quarantiner
// before it seals one and by whoever verifies a sealed chain.

// DecisionOf returns the api.Decision action of a decision record's kind
// and the endpoint whose roles may make it; ok false for any other kind.
func DecisionOf(k record.Kind) (action, endpoint string, ok bool) {
	switch k {
	case record.KindApproved:
		return api.DecisionApprove, api.ApprovalApprove, true
	case record.KindReleased:
		return api.DecisionRelease, api.Release, true
	case record.KindDismissed:
		return api.DecisionDismiss, api.Dismiss, true
	}
	return "", "", false
}

// CheckRecord checks decision record r, whose previous record in its
// chain is prev, against its signed decision: present; of r's action, of
// r's approval (approved) or event, by the person of r's approver (or
// actor) in a role that may make it, with r's meaning and signing time
// (approved); naming the chain r follows (prev's hash, or after an
// approved record the chain that approval named); and accepted by c as of
// its time. The request digest is not rebuilt here (the executor does).
// A record of another kind passes. A refusal wraps a decision.Err*
// sentinel (Code: api.ErrDecisionUnsigned); an unreadable registry is
// ErrUnavailable.
func CheckRecord(ctx context.Context, c Checker, r, prev record.Record) error {
	action, endpoint, ok := DecisionOf(r.Kind)
	if !ok {
		return nil
	}
	var sd *api.SignedDecision
	var want api.Decision
	var err error
	switch r.Kind {
	case record.KindApproved:
		g := r.Signature
		if g == nil {
			return fmt.Errorf("%w: the approved record carries no signature", decision.ErrUnsigned)
		}
		if sd, err = FromRaw(g.Signed); err != nil || sd == nil {
			return fmt.Errorf("%w: the approved record carries no decision signed by its approver", decision.ErrUnsigned)
		}
		switch {
		case sd.Decision.Meaning != g.Meaning || !sd.Decision.At.Equal(g.SignedAt):
			return fmt.Errorf("%w: the approved record's meaning or time is not the one signed", decision.ErrMismatch)
		case access.SamePerson(g.Requester, g.Approver) || access.PersonOf(g.Requester) == sd.Decision.Person:
			return fmt.Errorf("%w: the approver is the requester's person", decision.ErrPerson)
		}
		want = api.Decision{Action: action, Target: g.ApprovalID, Person: access.PersonOf(g.Approver), Role: string(access.RoleApprover)}
	default:
		if sd, err = FromRaw(r.Decision); err != nil || sd == nil {
			return fmt.Errorf("%w: a %s record carries its person's signed decision", decision.ErrUnsigned, r.Kind)
		}
		if !access.Allowed(endpoint, access.Role(sd.Decision.Role)) {
			return fmt.Errorf("%w: the role %q may not make a %s decision", decision.ErrPerson, sd.Decision.Role, action)
		}
		want = api.Decision{Action: action, Target: r.DLQID, Person: access.PersonOf(r.Actor), Role: sd.Decision.Role}
	}
	want.Request, want.Chain = sd.Decision.Request, chainBefore(r, prev)
	return CheckRecorded(ctx, c, want, sd)
}

// chainBefore is the chain a decision record's signed decision names:
// the hash of the record it follows, or, when that is an approved record
// whose action r executes, the chain that approval named.
func chainBefore(r, prev record.Record) string {
	if r.Kind != record.KindApproved && prev.Kind == record.KindApproved && prev.Signature != nil {
		if ap, err := FromRaw(prev.Signature.Signed); err == nil && ap != nil {
			return ap.Decision.Chain
		}
	}
	return r.PrevHash
}

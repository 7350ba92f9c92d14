package quarantiner

import (
	"context"
	"errors"
	"fmt"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/record"
)

// Decision records (issue #38, E6). The quarantiner is QUARANTINE's only
// writer, so whoever holds its credential could seal a record saying a
// person decided what nobody decided. It therefore seals an approved,
// released or dismissed record only with the person's signed decision of
// that very record, which it checks itself before it appends: the
// decision names the record's action, its approval (approved) or event,
// the person of the record's actor (or approver) in a role that may make
// it, and the chain as it stands (the last record's hash; after an
// approved record, the chain that approval named), and the people
// registry accepts its signature (the person's key, role and enabled
// state at its time). Its own credential holds no key that signs one.

// decisionAction is the api.Decision action of a decision record's kind
// and the endpoint whose roles may make it ("" for other kinds).
func decisionAction(k record.Kind) (action, endpoint string) {
	switch k {
	case record.KindApproved:
		return api.DecisionApprove, api.ApprovalApprove
	case record.KindReleased:
		return api.DecisionRelease, api.Release
	case record.KindDismissed:
		return api.DecisionDismiss, api.Dismiss
	}
	return "", ""
}

// signedDecision checks the signed decision an append of a decision
// record carries, all but the chain it names (chainOK, on the chain as it
// stands), and returns it; nil for an append of any other kind. A
// refusal is an appendError of code api.ErrDecisionUnsigned (the registry
// unreadable: api.ErrUnavailable).
func (s *Service) signedDecision(ctx context.Context, req api.AppendRequest) (*api.SignedDecision, error) {
	action, endpoint := decisionAction(req.Kind)
	if action == "" {
		return nil, nil
	}
	var sd *api.SignedDecision
	var want api.Decision
	switch req.Kind {
	case record.KindApproved:
		g := req.Signature
		if g == nil {
			return nil, appendError{api.ErrDecisionUnsigned, "an approved record carries its approver's signed decision"}
		}
		var err error
		if sd, err = approval.FromRaw(g.Signed); err != nil || sd == nil {
			return nil, appendError{api.ErrDecisionUnsigned, "the approved record carries no decision signed by its approver"}
		}
		if sd.Decision.Meaning != g.Meaning || !sd.Decision.At.Equal(g.SignedAt) || access.SamePerson(g.Requester, g.Approver) ||
			access.PersonOf(g.Requester) == sd.Decision.Person {
			return nil, appendError{api.ErrDecisionUnsigned, "the approved record's signature is not the decision its approver signed"}
		}
		want = api.Decision{Action: action, Target: g.ApprovalID, Person: access.PersonOf(g.Approver), Role: string(access.RoleApprover)}
	default:
		sd = req.Signed
		if sd == nil {
			return nil, appendError{api.ErrDecisionUnsigned, "a " + string(req.Kind) + " record carries its person's signed decision"}
		}
		if !access.Allowed(endpoint, access.Role(sd.Decision.Role)) {
			return nil, appendError{api.ErrDecisionUnsigned, fmt.Sprintf("the role %q may not make a %s decision", sd.Decision.Role, action)}
		}
		want = api.Decision{Action: action, Target: req.DLQID, Person: access.PersonOf(req.Actor), Role: sd.Decision.Role}
	}
	// The request digest and the chain are the executor's to rebuild (the
	// chain is compared by chainOK, on the chain as it stands).
	want.Request, want.Chain = sd.Decision.Request, sd.Decision.Chain
	if err := approval.CheckRecorded(ctx, s.decisions, want, sd); err != nil {
		if errors.Is(err, approval.ErrUnavailable) {
			return nil, appendError{api.ErrUnavailable, "the people registry could not be read: " + err.Error()}
		}
		return nil, appendError{api.ErrDecisionUnsigned, "refused: " + err.Error()}
	}
	return sd, nil
}

// chainOK checks that signed decision sd of an append names the chain v
// shows: its last record's hash, or, after an approved record (whose
// action this record executes), the chain that approval named.
func chainOK(sd *api.SignedDecision, v view) error {
	if sd == nil {
		return nil
	}
	want := v.state.LastHash
	if v.last.Kind == record.KindApproved && sd.Decision.Action != api.DecisionApprove && v.last.Signature != nil {
		if ap, err := approval.FromRaw(v.last.Signature.Signed); err == nil && ap != nil {
			want = ap.Decision.Chain
		}
	}
	if sd.Decision.Chain != want {
		return appendError{api.ErrDecisionUnsigned, "the signed decision is of another state of the chain"}
	}
	return nil
}

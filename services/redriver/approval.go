package redriver

import (
	"context"

	"github.com/deadletter/deadletter/services/redriver/approvals"
	"github.com/deadletter/deadletter/services/redriver/single"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/endpoint"
)

// Two-person approval and its policy are the approvals part
// (approvals.Desk); its handlers here check the caller and call it.

// handleApprovalList lists approvals, without values (approval.get shows
// them, recorded in the access audit).
func (s *Service) handleApprovalList(ctx context.Context, m endpoint.Meta, req api.ApprovalListRequest) (api.ApprovalListReply, error) {
	if _, err := s.caller(m, ""); err != nil {
		return api.ApprovalListReply{}, err
	}
	return s.approvalDesk.List(ctx, req)
}

// handleApprovalGet shows an approval as the caller's role may see it,
// its values only once the read is in the access audit.
func (s *Service) handleApprovalGet(ctx context.Context, m endpoint.Meta, req api.ApprovalGetRequest) (api.ApprovalReply, error) {
	who, err := s.caller(m, "")
	if err != nil {
		return api.ApprovalReply{}, err
	}
	return s.approvalDesk.Get(ctx, who, req)
}

// handleApprovalReject refuses a pending approval (approver role).
func (s *Service) handleApprovalReject(ctx context.Context, m endpoint.Meta, req api.ApprovalDecisionRequest) (api.ApprovalReply, error) {
	who, err := s.caller(m, "")
	if err != nil {
		return api.ApprovalReply{}, err
	}
	return s.approvalDesk.Reject(ctx, who, req)
}

// handleApprovalApprove signs a pending approval (approver role, not the
// requester, re-authenticating) and executes its action.
func (s *Service) handleApprovalApprove(ctx context.Context, m endpoint.Meta, req api.ApprovalDecisionRequest) (api.ApprovalReply, error) {
	who, err := s.caller(m, "")
	if err != nil {
		return api.ApprovalReply{}, err
	}
	return s.approvalDesk.Approve(ctx, who, req)
}

// handleApprovalHoldLift stores the pending approval of a hold lift for
// the auditor (the approval owner alone writes APPROVALS): only a request
// from within the services' account, where only the auditor may publish
// the subject, is served; one that carries a person is refused.
func (s *Service) handleApprovalHoldLift(ctx context.Context, m endpoint.Meta, req api.ApprovalHoldLiftRequest) (api.ApprovalReply, error) {
	if who, err := m.Caller(); err == nil {
		return api.ApprovalReply{}, api.Errorf(CodeForbidden, "%s may not store approvals: the auditor asks for a hold lift's", who.User)
	}
	return s.approvalDesk.HoldLift(ctx, req)
}

// policyGetRequest is policy.get's request: none (an empty body or {}).
type policyGetRequest struct{}

// handlePolicyGet answers the approval policy in force.
func (s *Service) handlePolicyGet(ctx context.Context, m endpoint.Meta, _ policyGetRequest) (api.PolicyReply, error) {
	if _, err := s.caller(m, ""); err != nil {
		return api.PolicyReply{}, err
	}
	return s.approvalDesk.Policy(ctx)
}

// handlePolicySet replaces the approval policy (policy role), recorded in
// AUDIT.
func (s *Service) handlePolicySet(ctx context.Context, m endpoint.Meta, req api.PolicySetRequest) (api.PolicyReply, error) {
	who, err := s.caller(m, "")
	if err != nil {
		return api.PolicyReply{}, err
	}
	return s.approvalDesk.SetPolicy(ctx, who, req)
}

// policyDecider answers a dry run's question whether an action would need
// a second person: the policy in force (the approvals part's) under the
// rule Desk.Require applies (approval.Needs), creating nothing.
type policyDecider struct{ desk *approvals.Desk }

var _ single.Decider = policyDecider{}

// Decide is approval.Needs under the policy in force; it fails closed
// (UNAVAILABLE) when the policy cannot be read.
func (p policyDecider) Decide(ctx context.Context, action approval.Action) (approval.Decision, error) {
	pol, err := p.desk.Policy(ctx)
	if err != nil {
		return approval.Decision{}, err
	}
	dec, err := approval.Needs(pol.Policy, action)
	return dec, approval.APIError(err)
}

// executor executes signed approvals' actions for the approvals part.
type executor struct{ s *Service }

var _ approvals.Executor = executor{}

// Redrive executes an approved correction.
func (e executor) Redrive(ctx context.Context, req api.RedriveRequest, a *api.Approval) (api.RedriveReply, error) {
	return e.s.redrives.Redrive(ctx, req, nil, a)
}

// Release executes an approved release.
func (e executor) Release(ctx context.Context, req api.ReleaseRequest, a *api.Approval) (api.AppendReply, error) {
	return e.s.redrives.Release(ctx, req, nil, a)
}

// Dismiss executes an approved dismissal.
func (e executor) Dismiss(ctx context.Context, req api.DismissRequest, a *api.Approval) (api.AppendReply, error) {
	return e.s.redrives.Dismiss(ctx, req, nil, a)
}

// StartDrain starts an approved drain (its overlap checked again).
func (e executor) StartDrain(ctx context.Context, req api.DrainStartRequest, who access.Identity, drainID string) (string, error) {
	return e.s.drainRunner.StartDrain(ctx, req, who, drainID)
}

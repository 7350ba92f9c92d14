package console

import (
	"strings"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
)

// approvalStatusWords says where an approval stands, as a person reads it
// (the approvals list and an approval's page): its status, and for a
// decided one what came of it.
func approvalStatusWords(a api.Approval) string {
	switch a.Status {
	case api.ApprovalPending:
		return "waiting for a second person"
	case api.ApprovalApproved:
		return "signed, being executed"
	case api.ApprovalExecuted:
		return "executed: " + approvalOutcomeWords(a.Outcome)
	case api.ApprovalRejected:
		return "rejected: never executed"
	case api.ApprovalExpired:
		return "expired undecided: never executed"
	case api.ApprovalRefused:
		if a.Outcome == approval.StaleOutcome {
			return "refused as stale: the record moved on since the request; never executed"
		}
		return "refused: no valid signed decision; never executed"
	}
	return a.Status
}

// approvalOutcomeWords is an executed approval's outcome in words (an api
// outcome, "released", "dismissed", "lifted", a drain id or an error
// code).
func approvalOutcomeWords(outcome string) string {
	switch outcome {
	case "":
		return "no outcome recorded"
	case api.OutcomeReplayed:
		return "replayed and committed"
	case api.OutcomeSkippedDuplicate:
		return "already committed (a duplicate): nothing committed twice"
	case api.OutcomeReplayFailed:
		return "replayed, failed again"
	case api.OutcomePoisoned:
		return "replayed, failed again: now poison"
	case api.OutcomePending:
		return "replayed, its outcome not known yet"
	case api.OutcomeResolvedElsewhere:
		return "already resolved elsewhere"
	case api.OutcomeNotRedrivable:
		return "not redrivable"
	case "released", "dismissed", "lifted":
		return outcome
	case api.ErrConflict:
		return "refused: the record changed meanwhile (CONFLICT)"
	}
	if strings.HasPrefix(outcome, "drain-") {
		return "drain " + outcome + " started"
	}
	return "failed: " + outcome
}

package approval

import (
	"errors"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
)

// ErrUnproven: an approval marked approved (or executed) carries no
// decision signed by its person that checks (issue #38): whoever may
// write APPROVALS could write an entry marked approved, so an executor
// checks the entry's SignedDecision against the people registry and
// finds the request and the decision in AUDIT (Store.Proven); an
// approval without one is never executed, it is refused for good
// (Store.Refuse).
var ErrUnproven = errors.New("approval: no decision signed by its person")

// RequestDigest is the SHA-256 (hex) of a's request as asked for: its id,
// action, event or hold, request body, payload, requester and times, and
// the chain's length and head (decision.ApprovalRequestDigest, the one
// owner, which clients that sign call too). A signed decision names it
// (Decision.Request).
func RequestDigest(a api.Approval) string { return decision.ApprovalRequestDigest(a) }

package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/deadletter/deadletter/shared/api"
)

// ErrUnproven: an approval marked approved (or executed) carries no
// decision signed by its person that checks (issue #38): whoever may
// write APPROVALS could write an entry marked approved, so an executor
// checks the entry's SignedDecision against the people registry and
// finds the request and the decision in AUDIT (Store.Proven); an
// approval without one is never executed, it is refused for good
// (Store.Refuse).
var ErrUnproven = errors.New("approval: no decision signed by its person")

// requestPart is what RequestDigest covers: the request as asked for.
type requestPart struct {
	ID            string          `json:"id"`
	Action        string          `json:"action"`
	DLQID         string          `json:"dlq_id"`
	Domain        string          `json:"domain"`
	HoldID        string          `json:"hold_id"`
	Request       json.RawMessage `json:"request"`
	Payload       []byte          `json:"payload"`
	Requester     string          `json:"requester"`
	RequesterRole string          `json:"requester_role"`
	RequestedAt   time.Time       `json:"requested_at"`
	ExpiresAt     time.Time       `json:"expires_at"`
	ChainRecords  int             `json:"chain_records"`
	ChainHead     string          `json:"chain_head,omitempty"`
}

// RequestDigest is the SHA-256 (hex) of a's request as asked for: its id,
// action, event or hold, request body, payload, requester and times, and
// the chain's length and head (JSON of those members in a fixed order).
// A signed decision names it (Decision.Request).
func RequestDigest(a api.Approval) string {
	b, _ := json.Marshal(requestPart{
		ID: a.ID, Action: a.Action, DLQID: a.DLQID, Domain: a.Domain, HoldID: a.HoldID, Request: a.Request, Payload: a.Payload,
		Requester: a.Requester, RequesterRole: a.RequesterRole, RequestedAt: a.RequestedAt.UTC(), ExpiresAt: a.ExpiresAt.UTC(),
		ChainRecords: a.ChainRecords, ChainHead: a.ChainHead,
	})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

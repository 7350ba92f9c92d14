// Package approved is what the redriver needs to execute an approved
// action beside the approval store (package shared/approval): the proofs
// on the chain that an approval was signed at the index it was requested
// at and that a step of its action is done (a repeated execution finds
// it), the id of the drain an approval starts, and the approval as shown
// without values. It holds no service state.
package approved

import (
	"errors"
	"fmt"
	"strings"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/record"
)

// ErrChainMoved: the chain changed between the request and the signature.
var ErrChainMoved = errors.New("redriver: the chain changed since the approval was requested")

// DrainID is the id of the drain approval id starts: the same at every
// execution, so that a repeat finds it started.
func DrainID(id string) string { return "drain-" + strings.TrimPrefix(id, "appr-") }

// StepAt reports whether the chain's record at index i is the approved
// action's own (its kind, by its requester): a repeated execution finds
// the step done.
func StepAt(ch chain.Chain, i int, kind record.Kind, a *api.Approval) bool {
	return a != nil && i < len(ch.Records) && ch.Records[i].Kind == kind && ch.Records[i].Actor == a.Requester
}

// SignedAt reports whether the chain's record at the index approval a
// was requested at is its signature.
func SignedAt(ch chain.Chain, a *api.Approval) bool {
	i := a.ChainRecords
	return i < len(ch.Records) && ch.Records[i].Kind == record.KindApproved &&
		ch.Records[i].Signature != nil && ch.Records[i].Signature.ApprovalID == a.ID
}

// CheckSigned refuses (CONFLICT, ErrChainMoved) to execute approval a on
// a chain that does not hold its signature at the index it was requested
// at; a nil a is no approval and passes.
func CheckSigned(ch chain.Chain, a *api.Approval) error {
	if a == nil || SignedAt(ch, a) {
		return nil
	}
	return api.Wrap(api.ErrConflict, ErrChainMoved, fmt.Sprintf("%s: the approved record is not at index %d", ErrChainMoved, a.ChainRecords))
}

// WithoutValues is a as shown with no request and no diff values (the
// names of the changed fields stay).
func WithoutValues(a api.Approval) api.Approval {
	a.Request, a.Payload, a.Diff = nil, nil, nil
	return a
}

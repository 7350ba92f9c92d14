package quarantiner

import (
	"context"
	"errors"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/record"
)

// Decision records (issue #38, E6). The quarantiner is QUARANTINE's only
// writer, so whoever holds its credential could ask it to seal a record
// saying a person decided what nobody decided. It therefore seals an
// approved, released or dismissed record only with the person's signed
// decision of that very record, checked before it appends
// (approval.CheckRecord: the record's action, approval or event, the
// person of its actor or approver in a role that may make it, the chain
// as it stands, and the people registry's acceptance of the signature at
// its time). Its own credential holds no key that signs one.

// checkDecision checks decision record r, to follow prev. A refusal is an
// appendError of code api.ErrDecisionUnsigned (the registry unreadable:
// api.ErrUnavailable).
func (s *Service) checkDecision(ctx context.Context, r, prev record.Record) error {
	err := approval.CheckRecord(ctx, s.decisions, r, prev)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, approval.ErrUnavailable):
		return appendError{api.ErrUnavailable, "the people registry could not be read: " + err.Error()}
	}
	return appendError{api.ErrDecisionUnsigned, "refused: " + err.Error()}
}

package approval

import (
	"errors"
	"fmt"
	"time"

	"github.com/deadletter/deadletter/shared/api"
)

// Errors of the package. Each is wrapped with detail that names fields and
// ids, never values; Code maps them to the api error codes.
var (
	// ErrNotFound: no approval has that id.
	ErrNotFound = errors.New("approval: no such approval")
	// ErrExpired: the approval expired while pending.
	ErrExpired = errors.New("approval: expired")
	// ErrAlreadyDecided: the approval is not pending (approved, rejected,
	// executed), or, for MarkExecuted, not approved.
	ErrAlreadyDecided = errors.New("approval: already decided")
	// ErrSelfApproval: the approver requested the action.
	ErrSelfApproval = errors.New("approval: approving one's own request")
	// ErrForbidden: the caller's role may not do this (approve or reject
	// without the approver role, set the policy without the policy role).
	ErrForbidden = errors.New("approval: role not allowed")
	// ErrBadRequest: a required member is missing or invalid (the error
	// says which).
	ErrBadRequest = errors.New("approval: bad request")
	// ErrConflict: the entry or the policy changed since it was read.
	ErrConflict = errors.New("approval: changed concurrently")
	// ErrUnavailable: a store or the server could not be reached.
	ErrUnavailable = errors.New("approval: store unavailable")
	// ErrLimit: the requester, or the chain (or hold) acted on, already
	// has the most pending approvals Config allows.
	ErrLimit = errors.New("approval: too many pending approvals")
	// ErrCorrectionPending: the record already has a pending correction
	// (one open correction per record, issue #40); the error is a
	// *PendingError naming it.
	ErrCorrectionPending = errors.New("approval: a correction of the record is pending")
)

// CodeCorrectionPending is the api error code of ErrCorrectionPending: a
// correction asked for while another one of the same record waits for a
// second person is refused, the reply's Approval the pending one (without
// values). The requester reads it, and asks again once it is decided (an
// approver may reject it).
const CodeCorrectionPending = "CORRECTION_PENDING"

// PendingError is ErrCorrectionPending with the pending correction.
type PendingError struct {
	// Pending is the pending correction of the record, as stored.
	Pending api.Approval
}

// Error names the pending approval, its requester and when it was asked
// for (no values).
func (e *PendingError) Error() string {
	return fmt.Sprintf("%s: %s, asked for by %s at %s, waits for a second person: ask again once it is decided",
		ErrCorrectionPending.Error(), e.Pending.ID, e.Pending.Requester, e.Pending.RequestedAt.UTC().Format(time.RFC3339))
}

// Unwrap makes a PendingError an ErrCorrectionPending.
func (e *PendingError) Unwrap() error { return ErrCorrectionPending }

// codes maps each sentinel to its api code.
var codes = []struct {
	err  error
	code string
}{
	{ErrNotFound, api.ErrNotFound},
	{ErrExpired, api.ErrExpired},
	{ErrAlreadyDecided, api.ErrAlreadyDecided},
	{ErrSelfApproval, api.ErrSelfApproval},
	{ErrForbidden, api.ErrForbidden},
	{ErrBadRequest, api.ErrBadRequest},
	{ErrConflict, api.ErrConflict},
	{ErrUnavailable, api.ErrUnavailable},
	{ErrUnproven, api.ErrApprovalUnproven},
	{ErrLimit, api.ErrApprovalLimit},
	{ErrCorrectionPending, CodeCorrectionPending},
}

// Code returns the api error code of err (api.ErrInternal for an error of
// no sentinel of the package): a refused signed decision (a decision.Err*
// sentinel, ErrStale) is api.ErrDecisionUnsigned, unless it made an
// approval unproven.

func Code(err error) string {
	if unsigned(err) && !errors.Is(err, ErrUnproven) {
		return api.ErrDecisionUnsigned
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return api.ErrInternal
}

// APIError returns err as the *api.Error an endpoint replies with: its
// code, message (the messages of this package name no values) and, for a
// bad request, the offending member; nil for nil.
func APIError(err error) error {
	if err == nil {
		return nil
	}
	e := api.Wrap(Code(err), err, err.Error())
	var f *fieldError
	if errors.As(err, &f) {
		e.Field = f.field
	}
	var p *PendingError
	if errors.As(err, &p) {
		v := p.Pending
		v.Request, v.Payload, v.Diff = nil, nil, nil
		e.Approval = &v
	}
	return e
}

// fieldError is an ErrBadRequest naming the request member at fault.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return ErrBadRequest.Error() + ": " + e.field + ": " + e.msg }
func (e *fieldError) Unwrap() error { return ErrBadRequest }

// badField returns an ErrBadRequest naming field.
func badField(field, msg string) error { return &fieldError{field: field, msg: msg} }

package api

import (
	"errors"
	"fmt"
)

// ErrInternal: the service failed in a way retrying will not fix (a bug);
// the message says no more than that.
const ErrInternal = "INTERNAL"

// Error is the one error type of deadletter's endpoint replies, on both
// sides: a handler returns it (or an error wrapping it) and the endpoint
// layer (package endpoint) sends its Code in the Nats-Service-Error-Code
// header, its Message in Nats-Service-Error and the whole Error as the
// reply body; a client (endpoint.Call) returns the *Error it decodes.
// Messages name fields and limits, never a request's or a payload's
// values.
type Error struct {
	// Code is one of the Err* codes.
	Code string `json:"code"`
	// Message says what is wrong, in words.
	Message string `json:"message"`
	// Field names the offending request member (a dotted path such as
	// "filter.domain", with "[i]" for an element of an array), when one is
	// at fault.
	Field string `json:"field,omitempty"`
	// Approval is the pending approval an APPROVAL_REQUIRED answer
	// created (ErrApprovalRequired): the request was not executed and
	// waits for a second person. It names ids, rules and the changed
	// identity fields, never values (no request, no diff values).
	Approval *Approval `json:"approval,omitempty"`
	// Overlaps are the unfinished drains a DRAIN_OVERLAP answer names
	// (ErrDrainOverlap), with how many records each shares.
	Overlaps []DrainOverlap `json:"overlaps,omitempty"`
	// Err is the error reported, when there is one (never sent).
	Err error `json:"-"`
}

// Error returns "CODE: field: message" (the field only when set).
func (e *Error) Error() string {
	if e.Field != "" {
		return e.Code + ": " + e.Field + ": " + e.Message
	}
	return e.Code + ": " + e.Message
}

// Unwrap returns the error reported.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of code with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// BadField returns a BAD_REQUEST *Error naming field.
func BadField(field, format string, args ...any) *Error {
	return &Error{Code: ErrBadRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error of code reporting err, with message msg.
func Wrap(code string, err error, msg string) *Error {
	return &Error{Code: code, Message: msg, Err: err}
}

// AsError returns the *Error err is or wraps (nil when there is none).
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// CodeOf returns the code of the *Error err is or wraps, or "" when there
// is none.
func CodeOf(err error) string {
	if e := AsError(err); e != nil {
		return e.Code
	}
	return ""
}

// FieldOf returns the field of the *Error err is or wraps, or "".
func FieldOf(err error) string {
	if e := AsError(err); e != nil {
		return e.Field
	}
	return ""
}

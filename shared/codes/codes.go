// Package codes defines the stable error codes that deadletter attaches to
// every failed event, and the coded error type that carries them.
//
// A code is part of the public contract: it appears in quarantine records,
// logs, metrics and service replies, so codes are never renamed. Each code
// is either structural (the event itself is wrong: never retried) or
// transient (the environment failed: retried with back-off).
package codes

import (
	"errors"
	"fmt"
)

// Code is a stable, upper-snake-case error code.
type Code string

// Gate and envelope codes, shared by every domain.
const (
	// MalformedJSON: the payload is not valid JSON.
	MalformedJSON Code = "MALFORMED_JSON"
	// DuplicateKey: a JSON object names the same member twice; readers
	// would disagree on its value.
	DuplicateKey Code = "DUPLICATE_KEY"
	// NotAnObject: the payload is valid JSON but not a JSON object.
	NotAnObject Code = "NOT_AN_OBJECT"
	// InvalidUTF8: the payload contains bytes that are not valid UTF-8.
	InvalidUTF8 Code = "INVALID_UTF8"
	// PayloadTooLarge: the payload exceeds the configured size limit.
	PayloadTooLarge Code = "PAYLOAD_TOO_LARGE"
	// UnknownSubject: the subject names no known domain or event type.
	UnknownSubject Code = "UNKNOWN_SUBJECT"
	// SchemaValidation: the payload violates its domain's JSON Schema.
	SchemaValidation Code = "SCHEMA_VALIDATION_ERROR"
	// SubjectMismatch: the subject's event type disagrees with the payload's.
	SubjectMismatch Code = "SUBJECT_MISMATCH"
	// UnparseableEventTime: the event time is not RFC 3339 with a UTC offset.
	UnparseableEventTime Code = "UNPARSEABLE_EVENT_TIME"
	// MissingLot: a lot number is required and absent.
	MissingLot Code = "MISSING_LOT"
	// Internal: an error the gate could not classify. Structural: never
	// retried by guesswork.
	Internal Code = "INTERNAL_ERROR"
)

// Pharmacy (DEA controlled-substance inventory) codes.
const (
	InvalidNDC           Code = "INVALID_NDC"
	InvalidDEANumber     Code = "INVALID_DEA_NUMBER"
	InvalidDEASchedule   Code = "INVALID_DEA_SCHEDULE"
	QuantitySignMismatch Code = "QUANTITY_SIGN_MISMATCH"
	MissingCounterparty  Code = "MISSING_COUNTERPARTY"
	InvalidQuantity      Code = "INVALID_QUANTITY"
)

// DSCSA (GS1 EPCIS 2.0) codes.
const (
	GTINCheckDigitFailed Code = "GTIN_CHECK_DIGIT_FAILED"
	InvalidGTIN          Code = "INVALID_GTIN"
	MissingSerial        Code = "MISSING_SERIAL"
	MissingExpiry        Code = "MISSING_EXPIRY"
	InvalidEPC           Code = "INVALID_EPC"
	InvalidBizStep       Code = "INVALID_BIZSTEP"
	InvalidLocation      Code = "INVALID_LOCATION"
)

// FSMA 204 traceability codes.
const (
	MissingTLC      Code = "MISSING_TLC"
	MissingKDE      Code = "MISSING_KDE"
	InvalidGLN      Code = "INVALID_GLN"
	MissingSupplier Code = "MISSING_SUPPLIER"
)

// Commit-stage codes. Transient ones are retried with back-off until the
// consumer's MaxDeliver; the event is then quarantined as exhausted.
const (
	// DownstreamUnavailable: the downstream system of record timed out,
	// refused the connection or answered 429/502/503/504. Transient.
	DownstreamUnavailable Code = "DOWNSTREAM_UNAVAILABLE"
	// DownstreamRejected: the downstream answered another 4xx/5xx. Structural.
	DownstreamRejected Code = "DOWNSTREAM_REJECTED"
	// StoreUnavailable: a JetStream write (ledger, idempotency) failed. Transient.
	StoreUnavailable Code = "STORE_UNAVAILABLE"
	// ClaimHeld: another validator holds a live claim on the idempotency key. Transient.
	ClaimHeld Code = "CLAIM_HELD"
	// OriginalUnavailable: the original event could no longer be fetched
	// from EVENTS when its failure was quarantined.
	OriginalUnavailable Code = "ORIGINAL_UNAVAILABLE"
	// MaxDeliveriesExceeded: the event exhausted its deliveries without a
	// recorded transient error (e.g. the validator died on every attempt).
	MaxDeliveriesExceeded Code = "MAX_DELIVERIES_EXCEEDED"
)

// transient lists the codes that are worth retrying. Every other code,
// including any code not listed in this package, is structural.
var transient = map[Code]bool{
	DownstreamUnavailable: true,
	StoreUnavailable:      true,
	ClaimHeld:             true,
}

// Transient reports whether c names a failure of the environment that a
// retry may cure. Unknown codes are structural.
func (c Code) Transient() bool { return transient[c] }

// Error is an error carrying a Code and a human-readable detail. The detail
// names fields and rules, never payload values (PHI).
type Error struct {
	Code   Code
	Detail string
	Err    error // optional cause
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Detail, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Detail)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with code c and a formatted detail.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Detail: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with code c, detail and cause err.
func Wrap(c Code, err error, detail string) *Error {
	return &Error{Code: c, Detail: detail, Err: err}
}

// Of classifies err: the code of the first *Error in its chain, or Internal
// (structural) when there is none. Of(nil) is "".
func Of(err error) Code {
	if err == nil {
		return ""
	}
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return Internal
}

// DetailOf returns the human-readable detail of err's *Error, or a generic
// text that does not echo err (which might quote payload values).
func DetailOf(err error) string {
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Detail
	}
	if err == nil {
		return ""
	}
	return "unclassified error"
}

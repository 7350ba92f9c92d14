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
	"slices"
	"sync"
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
	// PartyNotAuthorized: the event's party (registrant, owning party,
	// supplier) is not one its publisher may publish for (access.Parties).
	PartyNotAuthorized Code = "PARTY_NOT_AUTHORIZED"
	// UnparseableEventTime: the event time is not RFC 3339 with a UTC offset.
	UnparseableEventTime Code = "UNPARSEABLE_EVENT_TIME"
	// MissingLot: a lot number is required and absent.
	MissingLot Code = "MISSING_LOT"
	// Internal: an error the gate could not classify. Structural: never
	// retried by guesswork.
	Internal Code = "INTERNAL_ERROR"
)

// Codes two domains share (a domain's own codes live in its package,
// shared/domain/<name>, and are registered with Register).
const (
	// InvalidQuantity: a quantity is not a plain decimal (pharmacy delta,
	// FSMA quantity).
	InvalidQuantity Code = "INVALID_QUANTITY"
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
	// TerminatedExternally: a consumer terminated the event without a
	// failure report (not the validator).
	TerminatedExternally Code = "TERMINATED_EXTERNALLY"
	// MaxDeliveriesExceeded: the event exhausted its deliveries without a
	// recorded transient error (e.g. the validator died on every attempt).
	MaxDeliveriesExceeded Code = "MAX_DELIVERIES_EXCEEDED"
	// IdempotencyConflict: the event's idempotency key is committed in
	// LEDGER with other content (canonical form); the event is not a
	// duplicate, and is quarantined beside the committed one. Structural.
	IdempotencyConflict Code = "IDEMPOTENCY_CONFLICT"
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

// Info describes a code for documentation and tools.
type Info struct {
	Code      Code
	Transient bool
	Meaning   string
}

// Known lists every code deadletter emits: the generic ones of this
// package in documentation order, then the domains' (Register), which are
// there in every program that links package registry (every service and
// tool does; registry.Codes is this list for one that would not).
func Known() []Info {
	registeredMu.RLock()
	out := slices.Concat(known, registered)
	registeredMu.RUnlock()
	for i := range out {
		out[i].Transient = out[i].Code.Transient()
	}
	return out
}

// IsKnown reports whether c is one of the codes deadletter emits.
func IsKnown(c Code) bool {
	return slices.ContainsFunc(Known(), func(k Info) bool { return k.Code == c })
}

// registered are the domains' codes (Register).
var (
	registeredMu sync.RWMutex
	registered   []Info
)

// Register adds a domain's own codes (declared in its package,
// shared/domain/<name>, and listed in its domain.Spec) to Known and
// IsKnown: package registry registers every registered domain's. A code
// registered twice, or a generic one, is a programming error: it panics.
func Register(infos ...Info) {
	registeredMu.Lock()
	defer registeredMu.Unlock()
	for _, in := range infos {
		if slices.ContainsFunc(known, func(k Info) bool { return k.Code == in.Code }) ||
			slices.ContainsFunc(registered, func(k Info) bool { return k.Code == in.Code }) {
			panic(fmt.Sprintf("codes: %s registered twice", in.Code))
		}
		registered = append(registered, in)
	}
}

var known = []Info{
	{Code: MalformedJSON, Meaning: "the payload is not valid JSON"},
	{Code: DuplicateKey, Meaning: "a JSON object names the same member twice"},
	{Code: NotAnObject, Meaning: "the payload is JSON but not an object"},
	{Code: InvalidUTF8, Meaning: "the payload is not valid UTF-8"},
	{Code: PayloadTooLarge, Meaning: "the payload exceeds the size limit"},
	{Code: UnknownSubject, Meaning: "the subject names no known domain or has the wrong shape"},
	{Code: SchemaValidation, Meaning: "the payload violates its domain's JSON Schema"},
	{Code: SubjectMismatch, Meaning: "the subject's event type disagrees with the payload"},
	{Code: PartyNotAuthorized, Meaning: "the event's party is not one its publisher may publish for"},
	{Code: UnparseableEventTime, Meaning: "the event time is not RFC 3339 with a UTC offset"},
	{Code: MissingLot, Meaning: "a required lot number is absent"},
	{Code: InvalidQuantity, Meaning: "a quantity is not a plain decimal"},
	{Code: DownstreamUnavailable, Meaning: "the downstream timed out, refused, or answered 429/500/502/503/504"},
	{Code: DownstreamRejected, Meaning: "the downstream answered another non-2xx status"},
	{Code: StoreUnavailable, Meaning: "a JetStream write or read failed"},
	{Code: ClaimHeld, Meaning: "another validator is committing the same key"},
	{Code: IdempotencyConflict, Meaning: "the idempotency key is committed with other content"},
	{Code: MaxDeliveriesExceeded, Meaning: "deliveries ran out without a recorded transient error"},
	{Code: TerminatedExternally, Meaning: "a consumer terminated the event without a failure report"},
	{Code: OriginalUnavailable, Meaning: "the original event expired from EVENTS before quarantine"},
	{Code: Internal, Meaning: "an unclassified failure (a bug); never retried"},
}

// Package decision is the signature of a person's decision (issue #38):
// what is signed (api.Decision, built the same way by the client that
// signs and the executor that checks), its digest, and the check of a
// signature against the person's registered public key (api.DecisionKey):
// ed25519 keys of dlqctl (ed25519.go) and passkeys of the console
// (passkey.go). No service holds a key that can sign a decision.
package decision

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/deadletter/deadletter/shared/api"
)

// Errors of a signature check.
var (
	// ErrUnsigned: the decision carries no signature.
	ErrUnsigned = errors.New("decision: not signed by its person")
	// ErrBadSignature: the signature does not verify with the key.
	ErrBadSignature = errors.New("decision: the signature does not verify")
	// ErrUnknownKey: the person has no such key (never registered, or
	// revoked before the decision).
	ErrUnknownKey = errors.New("decision: the key is not the person's")
	// ErrScheme: an unknown signature scheme.
	ErrScheme = errors.New("decision: unknown signature scheme")
	// ErrMismatch: the decision signed is not the one the executor
	// rebuilt from its own state.
	ErrMismatch = errors.New("decision: the decision signed is not the one asked")
	// ErrPerson: the signer is disabled, or lacked the role, at the time.
	ErrPerson = errors.New("decision: the person may not make this decision")
	// ErrKeyText: a public key given as text that is not one
	// (registration).
	ErrKeyText = errors.New("decision: not a public key")
	// ErrRegistry: the people's records could not be read.
	ErrRegistry = errors.New("decision: the people's records are unavailable")
)

// Reply codes (api.Error.Code) of a refused decision.
const (
	// CodeUnsigned: the decision carries no signature of its person.
	CodeUnsigned = "DECISION_UNSIGNED"
	// CodeForged: the signature does not verify, is made with a key that
	// is not the person's (unknown, revoked, another person's), signs
	// another decision, or the person was disabled or lacked the role.
	CodeForged = "DECISION_FORGED"
)

// Code classifies an error of this package into a reply code:
// CodeUnsigned, CodeForged, api.ErrUnavailable (ErrRegistry), or "" for
// an error not of this package.
func Code(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrUnsigned):
		return CodeUnsigned
	case errors.Is(err, ErrRegistry):
		return api.ErrUnavailable
	case errors.Is(err, ErrBadSignature), errors.Is(err, ErrUnknownKey), errors.Is(err, ErrScheme),
		errors.Is(err, ErrMismatch), errors.Is(err, ErrPerson), errors.Is(err, ErrKeyText):
		return CodeForged
	}
	return ""
}

// APIError is err as an endpoint's reply (api.Error of Code(err)), or
// nil when err is not of this package. The message is the error's: ids,
// roles and times, never a request's values.
func APIError(err error) *api.Error {
	c := Code(err)
	if c == "" {
		return nil
	}
	return &api.Error{Code: c, Message: err.Error(), Field: "signed", Err: err}
}

// domainSep separates a decision's digest from any other use of a key.
const domainSep = "deadletter decision v1\n"

// Digest is the SHA-256 of the decision's canonical form: domainSep then
// the JSON of d (members in api.Decision's order, At in UTC at second
// precision).
func Digest(d api.Decision) [32]byte {
	d.At = d.At.UTC().Truncate(time.Second)
	b, _ := json.Marshal(d)
	return sha256.Sum256(append([]byte(domainSep), b...))
}

// Challenge is the digest as a WebAuthn challenge (base64url, no
// padding), what the console hands navigator.credentials.get.
func Challenge(d api.Decision) string {
	h := Digest(d)
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// Verify checks that s signs s.Decision with key k: the scheme's
// signature over Digest(s.Decision). It does not check the person's
// roles, state or the key's revocation (Check does).
func Verify(k api.DecisionKey, s api.SignedDecision) error {
	if s.Signature.Scheme == "" || len(s.Signature.Signature) == 0 {
		return ErrUnsigned
	}
	if s.Signature.Scheme != k.Scheme || s.Signature.KeyID != k.ID {
		return ErrUnknownKey
	}
	switch k.Scheme {
	case api.SchemeEd25519:
		return verifyEd25519(k, s)
	case api.SchemePasskey:
		return verifyPasskey(k, s)
	default:
		return fmt.Errorf("%w: %q", ErrScheme, k.Scheme)
	}
}

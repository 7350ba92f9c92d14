package decision

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/protocol/webauthncbor"
	"github.com/go-webauthn/webauthn/protocol/webauthncose"

	"github.com/deadletter/deadletter/shared/api"
)

// Passkeys (the console's signatures, api.SchemePasskey). The WebAuthn
// parsing, COSE keys and signature checks are go-webauthn's
// (protocol.CredentialAssertionResponse.Parse and Verify, and the same
// for a creation); this file only says what is expected of them: the
// challenge is the decision's digest, the origin and relying party id
// are the ones the key was registered at, and the person was present and
// verified.

// ErrRegistration: a passkey registration (the text of
// PasskeyRegistration, or a credential created in the console) is not
// valid.
var ErrRegistration = errors.New("decision: not a valid passkey registration")

// registrationPrefix starts a passkey's registration text.
const registrationPrefix = "passkey:"

// passkeyAlgorithms are the COSE algorithms a passkey may use: ES256,
// EdDSA and RS256 (what the console asks navigator.credentials.create
// for, in that order of preference).
var passkeyAlgorithms = []protocol.CredentialParameter{
	{Type: protocol.PublicKeyCredentialType, Algorithm: webauthncose.AlgES256},
	{Type: protocol.PublicKeyCredentialType, Algorithm: webauthncose.AlgEdDSA},
	{Type: protocol.PublicKeyCredentialType, Algorithm: webauthncose.AlgRS256},
}

// PasskeyAlgorithms are the COSE algorithm identifiers a passkey may use
// (navigator.credentials.create's pubKeyCredParams), preferred first.
func PasskeyAlgorithms() []int64 {
	out := make([]int64, len(passkeyAlgorithms))
	for i, p := range passkeyAlgorithms {
		out[i] = int64(p.Algorithm)
	}
	return out
}

// verifyPasskey checks a WebAuthn assertion whose challenge is the
// decision's digest: client data of type webauthn.get with that
// challenge from k.Origin, authenticator data for k.RPID with the user
// present and verified, and the signature over authenticator data ||
// SHA-256(client data) by k's COSE public key.
func verifyPasskey(k api.DecisionKey, s api.SignedDecision) error {
	sig := s.Signature
	if len(sig.AuthenticatorData) == 0 || len(sig.ClientDataJSON) == 0 {
		return fmt.Errorf("%w: a passkey signature needs its authenticator data and client data", ErrBadSignature)
	}
	if k.RPID == "" || k.Origin == "" || len(k.Public) == 0 {
		return fmt.Errorf("%w: the passkey has no relying party id, origin or public key", ErrUnknownKey)
	}
	rawID, err := base64.RawURLEncoding.DecodeString(sig.KeyID)
	if err != nil || len(rawID) == 0 {
		return fmt.Errorf("%w: the credential id is not base64url", ErrBadSignature)
	}
	car := protocol.CredentialAssertionResponse{
		PublicKeyCredential: protocol.PublicKeyCredential{
			Credential: protocol.Credential{ID: sig.KeyID, Type: string(protocol.PublicKeyCredentialType)},
			RawID:      rawID,
		},
		AssertionResponse: protocol.AuthenticatorAssertionResponse{
			AuthenticatorResponse: protocol.AuthenticatorResponse{ClientDataJSON: sig.ClientDataJSON},
			AuthenticatorData:     sig.AuthenticatorData,
			Signature:             sig.Signature,
		},
	}
	parsed, err := car.Parse()
	if err != nil {
		return fmt.Errorf("%w: %s", ErrBadSignature, webauthnReason(err))
	}
	err = parsed.Verify(Challenge(s.Decision), k.RPID, "", []string{k.Origin}, nil, nil,
		protocol.TopOriginExplicitVerificationMode, false, true, true, k.Public, protocol.SignaturePolicy{})
	if err != nil {
		return fmt.Errorf("%w: %s", ErrBadSignature, webauthnReason(err))
	}
	return nil
}

// webauthnReason is a WebAuthn error's short reason (go-webauthn's
// details: "Error validating challenge", "RP Hash mismatch ..."), never
// the client data itself.
func webauthnReason(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		if pe.Details != "" {
			if pe.DevInfo != "" && !strings.Contains(pe.Details, "challenge") {
				return pe.Details + " (" + pe.DevInfo + ")"
			}
			return pe.Details
		}
		return pe.Type
	}
	return "unreadable assertion"
}

// PasskeyCreation is what navigator.credentials.create returns for a new
// passkey, as the console posts it: the credential id (base64url), the
// attestation object and the client data.
type PasskeyCreation struct {
	ID                string
	AttestationObject []byte
	ClientDataJSON    []byte
}

// VerifyPasskeyCreation checks a new passkey's creation (WebAuthn
// registration: client data of type webauthn.create with challenge from
// origin, authenticator data for rpID with the user present and
// verified, an algorithm of PasskeyAlgorithms and a valid attestation
// statement: "none", packed self or certificate, ...) and returns the key
// to register, labelled label and added at at.
func VerifyPasskeyCreation(c PasskeyCreation, challenge, rpID, origin, label string, at time.Time) (api.DecisionKey, error) {
	rawID, err := base64.RawURLEncoding.DecodeString(c.ID)
	if err != nil || len(rawID) == 0 {
		return api.DecisionKey{}, fmt.Errorf("%w: the credential id is not base64url", ErrRegistration)
	}
	if rpID == "" || origin == "" || challenge == "" {
		return api.DecisionKey{}, fmt.Errorf("%w: a relying party id, an origin and a challenge are required", ErrRegistration)
	}
	if err := checkLabel(label); err != nil {
		return api.DecisionKey{}, err
	}
	ccr := protocol.CredentialCreationResponse{
		PublicKeyCredential: protocol.PublicKeyCredential{
			Credential: protocol.Credential{ID: c.ID, Type: string(protocol.PublicKeyCredentialType)},
			RawID:      rawID,
		},
		AttestationResponse: protocol.AuthenticatorAttestationResponse{
			AuthenticatorResponse: protocol.AuthenticatorResponse{ClientDataJSON: c.ClientDataJSON},
			AttestationObject:     c.AttestationObject,
		},
	}
	parsed, err := ccr.Parse()
	if err != nil {
		return api.DecisionKey{}, fmt.Errorf("%w: %s", ErrRegistration, webauthnReason(err))
	}
	if _, err := parsed.Verify(challenge, rpID, []string{origin}, nil, nil, protocol.TopOriginExplicitVerificationMode,
		false, true, true, nil, passkeyAlgorithms, protocol.AttestationPolicy{}, protocol.SignaturePolicy{}); err != nil {
		return api.DecisionKey{}, fmt.Errorf("%w: %s", ErrRegistration, webauthnReason(err))
	}
	return api.DecisionKey{
		Scheme:  api.SchemePasskey,
		ID:      c.ID,
		Public:  parsed.Response.AttestationObject.AuthData.AttData.CredentialPublicKey,
		RPID:    rpID,
		Origin:  origin,
		Label:   label,
		AddedAt: at.UTC().Truncate(time.Second),
	}, nil
}

// PasskeyRegistration is the one-line text of a passkey the console shows
// after its creation ("passkey:" and the base64url of the key's JSON),
// which the administrator registers with
// `deadletter people key add PERSON --passkey TEXT`.
func PasskeyRegistration(k api.DecisionKey) string {
	k.RevokedAt = nil
	b, _ := json.Marshal(k)
	return registrationPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// ParsePasskeyRegistration reads the text of PasskeyRegistration back
// into the key it registers, checking it is a passkey with a credential
// id, a COSE public key of PasskeyAlgorithms, a relying party id and an
// origin. Spaces around the text (a copy and paste) are ignored.
func ParsePasskeyRegistration(text string) (api.DecisionKey, error) {
	text = strings.TrimSpace(text)
	rest, ok := strings.CutPrefix(text, registrationPrefix)
	if !ok {
		return api.DecisionKey{}, fmt.Errorf("%w: it does not start with %q", ErrRegistration, registrationPrefix)
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return api.DecisionKey{}, fmt.Errorf("%w: not base64url after %q", ErrRegistration, registrationPrefix)
	}
	var k api.DecisionKey
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&k); err != nil {
		return api.DecisionKey{}, fmt.Errorf("%w: its JSON: %v", ErrRegistration, err)
	}
	switch {
	case k.Scheme != api.SchemePasskey:
		return api.DecisionKey{}, fmt.Errorf("%w: scheme %q, not %q", ErrRegistration, k.Scheme, api.SchemePasskey)
	case k.RevokedAt != nil:
		return api.DecisionKey{}, fmt.Errorf("%w: a registration is never revoked", ErrRegistration)
	case k.RPID == "" || k.Origin == "":
		return api.DecisionKey{}, fmt.Errorf("%w: no relying party id or origin", ErrRegistration)
	}
	if err := checkLabel(k.Label); err != nil {
		return api.DecisionKey{}, err
	}
	if id, err := base64.RawURLEncoding.DecodeString(k.ID); err != nil || len(id) == 0 {
		return api.DecisionKey{}, fmt.Errorf("%w: the credential id is not base64url", ErrRegistration)
	}
	if fq, err := protocol.FullyQualifiedOrigin(k.Origin); err != nil || fq != k.Origin {
		return api.DecisionKey{}, fmt.Errorf("%w: origin %q is not scheme://host[:port]", ErrRegistration, k.Origin)
	}
	if err := checkPublicKey(k.Public); err != nil {
		return api.DecisionKey{}, err
	}
	return k, nil
}

// MaxLabel is the most characters of a passkey's label.
const MaxLabel = 80

// checkLabel checks a passkey's label is short text without control
// characters (it is shown in terminals: `deadletter people ls`).
func checkLabel(label string) error {
	if !utf8.ValidString(label) || utf8.RuneCountInString(label) > MaxLabel {
		return fmt.Errorf("%w: a label is at most %d characters of UTF-8", ErrRegistration, MaxLabel)
	}
	if strings.IndexFunc(label, unicode.IsControl) >= 0 {
		return fmt.Errorf("%w: a label holds no control characters", ErrRegistration)
	}
	return nil
}

// checkPublicKey checks public is a COSE key (go-webauthn's parser and
// its checks of the curve and sizes) of one of passkeyAlgorithms.
func checkPublicKey(public []byte) error {
	if _, err := webauthncose.ParsePublicKey(public); err != nil {
		return fmt.Errorf("%w: the public key is not a COSE key: %v", ErrRegistration, err)
	}
	var pk webauthncose.PublicKeyData
	if err := webauthncbor.Unmarshal(public, &pk); err != nil {
		return fmt.Errorf("%w: the public key is not a COSE key: %v", ErrRegistration, err)
	}
	for _, p := range passkeyAlgorithms {
		if int64(p.Algorithm) == pk.Algorithm {
			return nil
		}
	}
	return fmt.Errorf("%w: COSE algorithm %d is not ES256, EdDSA or RS256", ErrRegistration, pk.Algorithm)
}

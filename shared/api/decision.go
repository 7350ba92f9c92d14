package api

import (
	"log/slog"
	"time"
)

// Decisions signed by their person (issue #38, E5/E6). Approve, reject,
// release, dismiss and the lift of a legal hold are valid only with a
// SignedDecision: a Decision (what was decided, about what, meaning what,
// by whom, when) and a signature over its digest (package decision) made
// by a key the person alone holds: a passkey in the console (WebAuthn), a
// personal ed25519 key in dlqctl. Services keep only the public keys,
// registered by `deadletter people key` and kept in AUDIT (PersonKeys).

// ErrDecisionUnsigned: a decision (approve, reject, release, dismiss,
// hold lift, or a decision record to append) carries no signature by its
// person that checks: none, not the decision asked, a key that is not the
// person's, a person disabled or without the role, or a time too far
// from now. Never executed.
const ErrDecisionUnsigned = "DECISION_UNSIGNED"

// Decision actions.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
	DecisionRelease = "release"
	DecisionDismiss = "dismiss"
	DecisionLift    = "lift"
)

// Decision is what a person signs. Executors rebuild it from their own
// state (package decision's builders) and accept a signed one only when
// it is the one they rebuilt, with Meaning and At as signed.
type Decision struct {
	// Action is one of the Decision* actions.
	Action string `json:"action"`
	// Target names what is decided: an approval id (approve, reject), a
	// dlq id (release, dismiss) or a hold id (lift).
	Target string `json:"target"`
	// Request is the SHA-256 (hex) of the request decided on: the
	// approval's request digest, or the digest of the direct request.
	Request string `json:"request"`
	// Chain is the hash (hex) of the last record of the quarantine chain
	// the person reviewed (it covers every earlier record), or of the
	// hold as read; empty when the target has none.
	Chain string `json:"chain,omitempty"`
	// Meaning is what the signature means, or why (required).
	Meaning string `json:"meaning"`
	// Person is the signer (access.PersonOf of the user), Role the role
	// the person decided in.
	Person string `json:"person"`
	Role   string `json:"role"`
	// At is when the person signed (UTC, second precision).
	At time.Time `json:"at"`
}

// Signature schemes.
const (
	// SchemeEd25519: a personal ed25519 key (dlqctl); KeyID is the
	// public key (base64url, no padding) and Signature signs the
	// decision's digest.
	SchemeEd25519 = "ed25519"
	// SchemePasskey: a WebAuthn credential (the console); KeyID is the
	// credential id (base64url), the challenge was the decision's digest
	// and Signature signs authenticator data || SHA-256(client data).
	SchemePasskey = "webauthn"
)

// DecisionSignature is a person's signature of a Decision's digest.
type DecisionSignature struct {
	Scheme    string `json:"scheme"`
	KeyID     string `json:"key_id"`
	Signature []byte `json:"signature"`
	// AuthenticatorData and ClientDataJSON: a WebAuthn assertion's.
	AuthenticatorData []byte `json:"authenticator_data,omitempty"`
	ClientDataJSON    []byte `json:"client_data_json,omitempty"`
}

// SignedDecision is a decision with its person's signature; decision
// records in QUARANTINE and AUDIT carry it whole, so verify can check it
// again at any time.
type SignedDecision struct {
	Decision  Decision          `json:"decision"`
	Signature DecisionSignature `json:"signature"`
}

// LogValue logs the action, target, person and key id only.
func (s SignedDecision) LogValue() slog.Value {
	return slog.GroupValue(slog.String("action", s.Decision.Action), slog.String("target", s.Decision.Target),
		slog.String("person", s.Decision.Person), slog.String("key_id", s.Signature.KeyID))
}

// DecisionKey is a person's registered public key.
type DecisionKey struct {
	Scheme string `json:"scheme"`
	// ID is the key's id (SchemeEd25519: the public key; SchemePasskey:
	// the credential id), base64url.
	ID string `json:"id"`
	// Public is the public key: raw ed25519 (32 bytes), or the COSE key
	// of a passkey.
	Public []byte `json:"public"`
	// RPID and Origin: a passkey's relying party id and the origin it was
	// registered at (assertions must come from it).
	RPID   string `json:"rp_id,omitempty"`
	Origin string `json:"origin,omitempty"`
	// Label is what the person called it ("laptop", "YubiKey 5C").
	Label   string    `json:"label,omitempty"`
	AddedAt time.Time `json:"added_at"`
	// Revoked: the key signs nothing from RevokedAt on.
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// PersonKeys is the registry record of one person, written to AUDIT on
// subjects.AuditAction("people", person) whenever `deadletter people`
// changes the person (added, role granted, disabled, enabled, key added
// or revoked). The last one stored before a decision is what that
// decision is checked against: the person's roles, enabled state and
// keys at that time.
type PersonKeys struct {
	Person   string        `json:"person"`
	Roles    []string      `json:"roles"`
	Disabled bool          `json:"disabled,omitempty"`
	Keys     []DecisionKey `json:"keys,omitempty"`
	// Event is the change recorded (access.Event*), By who made it, At
	// when.
	Event string    `json:"event"`
	By    string    `json:"by,omitempty"`
	At    time.Time `json:"at"`
}

package decision

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"

	"github.com/deadletter/deadletter/shared/api"
)

// verifyEd25519 checks an ed25519 signature over the decision's digest:
// the key is the raw 32-byte public key, its id that key base64url (no
// padding), and the signature signs the 32 bytes of Digest.
func verifyEd25519(k api.DecisionKey, s api.SignedDecision) error {
	if len(k.Public) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: an ed25519 key of %d bytes", ErrUnknownKey, len(k.Public))
	}
	if k.ID != KeyID(k.Public) {
		return fmt.Errorf("%w: the key id is not the key", ErrUnknownKey)
	}
	if len(s.Signature.Signature) != ed25519.SignatureSize {
		return fmt.Errorf("%w: a signature of %d bytes", ErrBadSignature, len(s.Signature.Signature))
	}
	h := Digest(s.Decision)
	if !ed25519.Verify(ed25519.PublicKey(k.Public), h[:], s.Signature.Signature) {
		return ErrBadSignature
	}
	return nil
}

// KeyID is the id of an ed25519 public key: the key base64url, no
// padding (api.SchemeEd25519).
func KeyID(pub ed25519.PublicKey) string { return base64.RawURLEncoding.EncodeToString(pub) }

// Ed25519Key returns the DecisionKey of an ed25519 public key given as
// its id (base64url, what `dlqctl key init` prints), labelled.
func Ed25519Key(id, label string) (api.DecisionKey, error) {
	pub, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return api.DecisionKey{}, fmt.Errorf("%w: an ed25519 public key is 43 characters of base64url (dlqctl key init prints it)", ErrKeyText)
	}
	return api.DecisionKey{Scheme: api.SchemeEd25519, ID: id, Public: pub, Label: label}, nil
}

// SignEd25519 signs d with priv: the SignedDecision a client sends (At
// is kept at second precision in UTC, as the digest covers it).
func SignEd25519(priv ed25519.PrivateKey, d api.Decision) api.SignedDecision {
	d.At = d.At.UTC().Truncate(1e9)
	h := Digest(d)
	pub, _ := priv.Public().(ed25519.PublicKey)
	return api.SignedDecision{Decision: d, Signature: api.DecisionSignature{
		Scheme: api.SchemeEd25519, KeyID: KeyID(pub), Signature: ed25519.Sign(priv, h[:]),
	}}
}

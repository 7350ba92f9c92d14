package idempotency

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
)

// IdentityJCS names the default content identity: the SHA-256 of the RFC
// 8785 canonical form of the payload. Hashes recorded before identities
// were recorded (an empty identity) are of this kind.
const IdentityJCS = "jcs"

// Identity returns the content identity of domain dom's events: the
// domain's own (domain.Spec.Content's Name), or IdentityJCS.
func Identity(dom string) string {
	if c, ok := content(dom); ok {
		return c.Name
	}
	return IdentityJCS
}

// StoredIdentity is Identity(dom) as it is stored with a hash (a key
// state's ContentIdentity, a LEDGER entry's Deadletter-Content-Identity
// header): "" for IdentityJCS, which a hash stored without identity is
// (RecordedIdentity), so that the states and entries of the domains that
// keep the canonical JSON are as they were before identities were
// recorded.
func StoredIdentity(dom string) string {
	if id := Identity(dom); id != IdentityJCS {
		return id
	}
	return ""
}

// RecordedIdentity returns the identity a recorded hash was derived by:
// identity, or IdentityJCS for a hash recorded without one (before the
// identity was recorded).
func RecordedIdentity(identity string) string {
	if identity == "" {
		return IdentityJCS
	}
	return identity
}

// contents are the registered domains' content identities
// (domain.Spec.Content), by name (read once: the registry builds its specs
// on every call, and the content hash is derived per event).
var contents = func() map[string]*domain.ContentIdentity {
	out := map[string]*domain.ContentIdentity{}
	for _, spec := range registry.All() {
		if c := spec.Content; c != nil && c.Hash != nil && c.Name != "" && c.Name != IdentityJCS {
			out[spec.Name] = c
		}
	}
	return out
}()

// content returns dom's content identity, if it has its own.
func content(dom string) (*domain.ContentIdentity, bool) {
	c, ok := contents[dom]
	return c, ok
}

// ContentHash is what two events of domain dom with one idempotency key
// must share to be duplicates of each other (else an
// IDEMPOTENCY_CONFLICT), in the domain's content identity (Identity): the
// domain's own hash of the payload (domain.ContentIdentity.Hash) when it
// has one and the payload is a JSON object (every event that passed the
// gate); otherwise, and for every other domain, the lowercase hex SHA-256
// of the RFC 8785 canonical form of the payload (CanonicalHash), so that a
// copy that differs only in member order or whitespace is the same
// content. It is the one owner of the rule: the validator, the redriver
// and reconciliation all derive and compare content through it.
func ContentHash(dom string, data []byte) string {
	if c, ok := content(dom); ok {
		if doc, err := domain.Decode(data); err == nil {
			return c.Hash(doc)
		}
	}
	return CanonicalHash(data)
}

// CheckedContentHash is ContentHash(env.Domain, data) for an event the
// gate checked into env: the domain's hash may use what the envelope
// already holds (domain.ContentIdentity.Checked: DSCSA's event hash ID),
// so that it is not derived twice.
func CheckedContentHash(env envelope.Envelope, data []byte) string {
	return CheckedDocHash(env, data, nil)
}

// CheckedDocHash is CheckedContentHash of an event the gate checked in
// its decoded form doc (domain.Decode of data; nil: decoded here), so
// that the event is decoded once.
func CheckedDocHash(env envelope.Envelope, data []byte, doc domain.Doc) string {
	if c, ok := content(env.Domain); ok && c.Checked != nil {
		if doc == nil {
			var err error
			if doc, err = domain.Decode(data); err != nil {
				return ContentHash(env.Domain, data)
			}
		}
		return c.Checked(env, doc)
	}
	return ContentHash(env.Domain, data)
}

// CanonicalHash is the lowercase hex SHA-256 of the RFC 8785 canonical
// form of data (record.Canonical); bytes that are no JSON document (never
// an event that passed the gate, but possibly a LEDGER entry someone else
// wrote) are hashed as they are. It is the content hash of IdentityJCS.
func CanonicalHash(data []byte) string {
	if c, err := record.Canonical(data); err == nil {
		data = c
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// HashMatches reports whether hash, recorded with identity (the LEDGER
// entry's ContentHash and ContentIdentity headers, or a key state's), is
// the content hash of data (an event of domain dom) by that identity: the
// current one (ContentHash), IdentityJCS for one recorded before the
// domain's identity was recorded, or one the domain recorded its hashes by
// before (domain.ContentIdentity.Earlier, e.g. DSCSA's event hash ID
// before the exact content was added). Any other identity matches
// nothing.
func HashMatches(dom, identity, hash string, data []byte) bool {
	switch id := RecordedIdentity(identity); {
	case id == Identity(dom):
		return hash == ContentHash(dom, data)
	case id == IdentityJCS:
		return hash == CanonicalHash(data)
	default:
		c, ok := content(dom)
		if !ok {
			return false
		}
		earlier, ok := c.Earlier[id]
		if !ok {
			return false
		}
		doc, err := domain.Decode(data)
		return err == nil && hash == earlier(doc)
	}
}

package idempotency

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/eventhash"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/record"
)

// IdentityJCS names the default content identity: the SHA-256 of the RFC
// 8785 canonical form of the payload. Hashes recorded before identities
// were recorded (an empty identity) are of this kind.
const IdentityJCS = "jcs"

// IdentityEventHashExact names DSCSA's content identity: the CBV 2.0
// event hash ID (the domain's own, dscsa.ContentIdentityEventHash) and
// the event's exact content (eventhash.ExactDigest), so that two events
// with one event hash ID are one event only when no value differs (the
// hash is blind to a quantity's digits beyond a float's, to the
// sub-millisecond digits of a time, to an extension element's structure).
// Hashes recorded as dscsa.ContentIdentityEventHash, by the event hash
// as deadletter computed it before 2026-12-07, keep validating
// (HashMatches, eventhash.LegacyID).
const IdentityEventHashExact = dscsa.ContentIdentityEventHash + "+exact"

// Identity returns the content identity of domain dom's events: the
// domain's own (domain.ContentIdentifier), with the exact content added
// to an event hash ID (IdentityEventHashExact), or IdentityJCS.
func Identity(dom string) string {
	if ci, ok := identifier(dom); ok {
		if ci.ContentIdentity() == dscsa.ContentIdentityEventHash {
			return IdentityEventHashExact
		}
		return ci.ContentIdentity()
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

// identifiers are the registered domains' domain.ContentIdentifiers, by
// name (read once: the registry builds its specs on every call, and the
// content hash is derived per event).
var identifiers = func() map[string]domain.ContentIdentifier {
	out := map[string]domain.ContentIdentifier{}
	for _, spec := range registry.All() {
		if ci, ok := spec.Checker.(domain.ContentIdentifier); ok {
			out[spec.Name] = ci
		}
	}
	return out
}()

// identifier returns dom's domain.ContentIdentifier, if it has one.
func identifier(dom string) (domain.ContentIdentifier, bool) {
	ci, ok := identifiers[dom]
	return ci, ok
}

// ContentHash is what two events of domain dom with one idempotency key
// must share to be duplicates of each other (else an
// IDEMPOTENCY_CONFLICT), in the domain's content identity (Identity): for
// a domain.ContentIdentifier its digest of the payload when the payload
// is a JSON object (every event that passed the gate), with the exact
// content for an event hash ID (IdentityEventHashExact); otherwise, and for
// every other domain, the lowercase hex SHA-256 of the RFC 8785 canonical
// form of the payload (CanonicalHash), so that a copy that differs only in
// member order or whitespace is the same content. It is the one owner of
// the rule: the validator, the redriver and reconciliation all derive and
// compare content through it.
func ContentHash(dom string, data []byte) string {
	if ci, ok := identifier(dom); ok {
		if doc, err := gate.Decode(data); err == nil {
			if ci.ContentIdentity() == dscsa.ContentIdentityEventHash {
				return exactHash(ci.ContentDigest(doc), doc)
			}
			return ci.ContentDigest(doc)
		}
	}
	return CanonicalHash(data)
}

// exactHash is the IdentityEventHashExact hash of an event whose event
// hash ID's digest is digest: the SHA-256 of that digest and the event's
// exact content digest.
func exactHash(digest string, doc map[string]any) string {
	sum := sha256.Sum256([]byte(digest + "\n" + eventhash.ExactDigest(doc, nil)))
	return hex.EncodeToString(sum[:])
}

// CheckedContentHash is ContentHash(env.Domain, data) for an event the
// gate checked into env: a DSCSA envelope's EventHashID is the ID the
// domain's digest is of (dscsa.Checker.ContentDigest), so it is not
// derived twice (the exact content is).
func CheckedContentHash(env envelope.Envelope, data []byte) string {
	if ci, ok := identifier(env.Domain); ok && env.EventHashID != "" {
		if d, ok := eventHashDigest(ci, env.EventHashID); ok {
			if doc, err := gate.Decode(data); err == nil {
				return exactHash(d, doc)
			}
		}
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
// domain's identity was recorded, or, for a domain whose identity is
// IdentityEventHashExact, dscsa.ContentIdentityEventHash for one recorded
// before the exact content was added (the digest of the event hash ID as
// deadletter computed it then, eventhash.LegacyID). Any other identity
// matches nothing.
func HashMatches(dom, identity, hash string, data []byte) bool {
	switch id := RecordedIdentity(identity); {
	case id == Identity(dom):
		return hash == ContentHash(dom, data)
	case id == IdentityJCS:
		return hash == CanonicalHash(data)
	case id == dscsa.ContentIdentityEventHash && Identity(dom) == IdentityEventHashExact:
		doc, err := gate.Decode(data)
		if err != nil {
			return false
		}
		d, _ := eventhash.Digest(eventhash.LegacyID(doc, nil))
		return hash == d
	}
	return false
}

// eventHashDigest returns the digest of an envelope's EventHashID when it
// is the content identity of ci (DSCSA's CBV 2.0 event hash ID).
func eventHashDigest(ci domain.ContentIdentifier, id string) (string, bool) {
	if ci.ContentIdentity() != dscsa.ContentIdentityEventHash {
		return "", false
	}
	return eventhash.Digest(id)
}

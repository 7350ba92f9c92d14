package dscsa

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/dscsa/eventhash"
	"github.com/deadletter/deadletter/shared/envelope"
)

// The DSCSA content identities (domain.ContentIdentity).
const (
	// ContentIdentityExact is DSCSA's content identity: the CBV 2.0 event
	// hash ID and the event's exact content (eventhash.ExactDigest), so
	// that two events with one event hash ID are one event only when no
	// value differs (the hash is blind to a quantity's digits beyond a
	// float's, to the sub-millisecond digits of a time, to an extension
	// element's structure).
	ContentIdentityExact = ContentIdentityEventHash + "+exact"
	// ContentIdentityEventHash is the identity of hashes recorded before
	// 2026-12-07: the digest of the event hash ID alone, as deadletter
	// computed it then (eventhash.LegacyID). Such hashes keep matching
	// their events; nothing new is derived by it.
	ContentIdentityEventHash = "cbv2-event-hash"
)

// contentIdentity is the DSCSA domain's content identity (Spec.Content):
// the same event as XML or JSON, with reordered lists, other namespace
// prefixes, another @context, time-zone notation or recordTime is one
// content; any other value (a bizStep, a quantity, an EPC, a time's
// sub-millisecond digits...) another.
func contentIdentity() *domain.ContentIdentity {
	return &domain.ContentIdentity{
		Name:    ContentIdentityExact,
		Hash:    contentHash,
		Checked: checkedContentHash,
		Earlier: map[string]func(domain.Doc) string{ContentIdentityEventHash: legacyContentHash},
	}
}

// contentHash is the ContentIdentityExact hash of an event: exactHash of
// the digest of its normalized CBV 2.0 event hash ID (eventhash.KeyID, the
// one its key is of; never the reference's ID of the envelope, which can
// tell the XML and JSON forms of one event apart).
func contentHash(doc domain.Doc) string {
	d, _ := eventhash.Digest(eventhash.KeyID(doc, nil))
	return exactHash(d, doc)
}

// checkedContentHash is contentHash for an event Check accepted into env:
// env's EventHashID is the reference's ID (of an event from JSON, as Check
// derives it), which is the key's ID this hash is of for nearly every
// event (eventhash.SameIDs), so it is not derived twice (the exact content
// is); else the key's ID is derived. The shown ID of an event from an XML
// document is the reference's for that form (Checker.CheckXML), so the
// envelope's ID is taken only when it is the key's in either form: never
// a hash of the wrong ID, whichever form Check was told.
func checkedContentHash(env envelope.Envelope, doc domain.Doc) string {
	if eventhash.SameIDs(doc, nil, eventhash.FromJSON) && eventhash.SameIDs(doc, nil, eventhash.FromXML) {
		if d, ok := eventhash.Digest(env.EventHashID); ok {
			return exactHash(d, doc)
		}
	}
	return contentHash(doc)
}

// exactHash is the ContentIdentityExact hash of an event whose event hash
// ID's digest is digest: the lowercase hex SHA-256 of that digest, a line
// feed and the event's exact content digest.
func exactHash(digest string, doc domain.Doc) string {
	sum := sha256.Sum256([]byte(digest + "\n" + eventhash.ExactDigest(doc, nil)))
	return hex.EncodeToString(sum[:])
}

// legacyContentHash is the ContentIdentityEventHash hash of an event: the
// digest of its event hash ID as deadletter computed it before 2026-12-07
// (eventhash.LegacyID).
func legacyContentHash(doc domain.Doc) string {
	d, _ := eventhash.Digest(eventhash.LegacyID(doc, nil))
	return d
}

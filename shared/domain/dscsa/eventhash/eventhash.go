// Package eventhash computes the EPCIS event hash ID of CBV 2.0 (section
// "EPCIS Event Hash ID"): a representation-independent fingerprint of one
// EPCIS event, "ni:///sha-256;<64 hex>?ver=CBV2.0" (RFC 6920), over a
// pre-hash string built from the event's data in the canonical property
// order, so that the same event with its lists in another order, another
// time-zone notation, CBV URNs instead of web URIs or EPC URNs instead of
// GS1 Digital Link URIs gets the same ID, and a change of a hashed value
// another one.
//
// The input is one event in the EPCIS 2.0 JSON / JSON-LD form, decoded with
// numbers as json.Number (package gate's Decode), and the JSON-LD context
// that declares its namespace prefixes (the event's own "@context", or its
// document's).
//
// Where the standard's text leaves room, the ID is the one the reference
// implementation of its authors computes (github.com/RalphTro/
// epcis-event-hash-generator, commit 5d2f1c38), over the same model of an
// event (model.go): every JSON member a node (name, text, children), a
// list one node per entry, an object's "#text" its text; the pre-hash
// string is
//
//   - eventType=<type>;
//   - the fields of the canonical property order (eventTime,
//     eventTimeZoneOffset, certificationInfo, parentID, epcList,
//     inputEPCList, childEPCs, quantityList, childQuantityList,
//     inputQuantityList, outputEPCList, outputQuantityList, action,
//     transformationID, bizStep, disposition, persistentDisposition,
//     readPoint, bizLocation, sensorElementList with sensorMetadata and
//     sensorReport in their own orders), each "<name>=<value>", repeated
//     ones sorted, a structure as its name followed by its fields; the
//     user extensions of a structure (a member of a namespace ending in
//     "/") at its end;
//   - then everything not consumed (other fields, extensions, what a
//     structure holds outside its order, with the names of the structures
//     it is in), each "<name>=<value>" followed by its children, sorted,
//     except recordTime, eventID, type and errorDeclaration.
//
// Values are trimmed; the times of the order in UTC with milliseconds
// (microseconds rounded half to even); CBV 1.x URNs as CBV web URIs;
// numbers as Python writes a float (an integral one as an integer);
// EPC URNs and GS1 Digital Link URIs on any host as constrained canonical
// Digital Link URIs on id.gs1.org; the bare words of CBV and GS1
// vocabularies (bizStep, disposition, business-transaction and
// source/destination types, sensor types, exceptions, components, error
// reasons) as their web URIs, and any other value of the event equal to
// one of them too; compact IRIs of a prefix the @context (an array)
// declares expanded, in member names as "{namespace}local", and values with
// the gs1, epcis or cbv prefix expanded whether declared or not (the
// algorithm's rule; the reference expands them only when declared). JSON
// true and false are "True" and "False", null "None".
//
// Two derivations share that model. KeyID is the one above, normalized so
// that the XML and JSON forms of one event have one ID: deadletter keys an
// event without an eventID by it, and the DSCSA content identity is built
// on it; it never changes for an event once stored. ReferenceID is the ID
// as the reference implementation computes it, the one a person sees
// (envelope.EventHashID): it differs from KeyID only where the reference
// does, on purpose (compact IRIs with the gs1, epcis or cbv prefix a
// document does not declare again are kept as written; an XML event's
// ilmd names the CBV master data "{urn:epcglobal:cbv:mda}local", its
// XML namespace, where JSON names it "cbvmda:local"), so it needs to know
// whether the event was read from XML (Origin).
//
// Exact (exact.go) is what the ID leaves out: the event's exact content,
// which package idempotency adds to the ID to tell duplicates from
// conflicts. LegacyID (legacy.go) is the ID as deadletter computed it
// before 2026-12-07, kept for the hashes recorded then.
package eventhash

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
)

// Version is the CBV version of the algorithm, as the ID names it.
const Version = "CBV2.0"

// Prefix begins every ID this package returns.
const Prefix = "ni:///sha-256;"

// ID is KeyID: the event hash ID deadletter keys an event without an
// eventID by.
func ID(ev map[string]any, ctx any) string { return KeyID(ev, ctx) }

// KeyID returns the normalized event hash ID of ev (SHA-256), with the
// namespace prefixes of ctx (a JSON-LD @context: a string, an object or
// an array of them; nil for the event's own "@context"): the one an event
// without an eventID is keyed by and the DSCSA content identity is built
// on, the same for the XML and JSON forms of one event. It never fails:
// any JSON object has an ID.
func KeyID(ev map[string]any, ctx any) string { return hashID(PreHash(ev, ctx)) }

// Origin is the form an event was read from, which ReferenceID needs: the
// reference implementation models an XML event from its elements, a JSON
// one from its members.
type Origin uint8

// The origins of an event.
const (
	// FromJSON: an EPCIS 2.0 JSON / JSON-LD event (or an event whose
	// origin is not known).
	FromJSON Origin = iota
	// FromXML: an EPCIS 1.2 or 2.0 XML event, mapped to JSON by package
	// document.
	FromXML
)

// ReferenceID returns the event hash ID of ev as the reference
// implementation computes it (see the package documentation), for an
// event read from the form from says: the ID a person sees. ctx is as for
// KeyID. Never use it for a key or a content hash: the XML and JSON forms
// of one event may get two IDs.
func ReferenceID(ev map[string]any, ctx any, from Origin) string {
	return hashID(ReferencePreHash(ev, ctx, from))
}

// ReferencePreHash returns the pre-hash string ReferenceID hashes.
func ReferencePreHash(ev map[string]any, ctx any, from Origin) string {
	if ctx == nil {
		ctx = ev["@context"]
	}
	h := newHasher(ev, ctx)
	h.reference, h.xml = true, from == FromXML
	return h.preHash(h.model(ev))
}

// IDs returns KeyID(ev, ctx) and ReferenceID(ev, ctx, from), deriving the
// second only for an event where the reference differs from the key (a
// compact IRI of gs1, epcis or cbv the document does not declare, CBV
// master data in an XML ilmd), so that the two cost one derivation for
// nearly every event.
func IDs(ev map[string]any, ctx any, from Origin) (key, ref string) {
	if ctx == nil {
		ctx = ev["@context"]
	}
	h := newHasher(ev, ctx)
	h.xml = from == FromXML
	key = hashID(h.preHash(h.model(ev)))
	if !h.diverges {
		return key, key
	}
	return key, ReferenceID(ev, ctx, from)
}

// SameIDs reports whether ReferenceID(ev, ctx, from) is KeyID(ev, ctx),
// by a walk over ev cheaper than a derivation: true when ev has no string
// value with the gs1, epcis or cbv prefix its context does not declare
// and, from XML, no CBV master data (a member "cbvmda:...") in its ilmd.
// False says only that they may differ.
func SameIDs(ev map[string]any, ctx any, from Origin) bool {
	if ctx == nil {
		ctx = ev["@context"]
	}
	ns := namespaces(ctx)
	var same func(v any, inILMD bool) bool
	same = func(v any, inILMD bool) bool {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if k == "@context" {
					continue
				}
				if from == FromXML && inILMD && strings.HasPrefix(k, mdaPrefix) || !same(c, inILMD || k == "ilmd") {
					return false
				}
			}
		case []any:
			for _, c := range x {
				if !same(c, inILMD) {
					return false
				}
			}
		case string:
			p, rest, ok := strings.Cut(strings.TrimSpace(x), ":")
			if _, std := standardPrefixes[p]; ok && std && !strings.HasPrefix(rest, "//") {
				_, declared := ns[p]
				return declared
			}
		}
		return true
	}
	return same(ev, false)
}

// hashID is the ID of a pre-hash string.
func hashID(pre string) string {
	d := sha256.New()
	_, _ = io.WriteString(d, pre)
	var sum [sha256.Size]byte
	var out [len(Prefix) + 2*sha256.Size + len("?ver=") + len(Version)]byte
	n := copy(out[:], Prefix)
	hex.Encode(out[n:], d.Sum(sum[:0]))
	n += 2 * sha256.Size
	n += copy(out[n:], "?ver=")
	copy(out[n:], Version)
	return string(out[:])
}

// Digest returns the lowercase hex SHA-256 digest an event hash ID names
// (the 64 hex digits between Prefix and "?ver="), and whether id is an ID
// this package returns.
func Digest(id string) (string, bool) {
	const n = len(Prefix) + 2*sha256.Size
	if len(id) != n+len("?ver=")+len(Version) || id[:len(Prefix)] != Prefix || id[n:] != "?ver="+Version {
		return "", false
	}
	d := id[len(Prefix):n]
	for i := 0; i < len(d); i++ {
		if c := d[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", false
		}
	}
	return d, true
}

// PreHash returns the pre-hash string KeyID hashes (see the package
// documentation).
func PreHash(ev map[string]any, ctx any) string {
	if ctx == nil {
		ctx = ev["@context"]
	}
	h := newHasher(ev, ctx)
	return h.preHash(h.model(ev))
}

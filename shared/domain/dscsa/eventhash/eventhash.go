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
// Exact (exact.go) is what the ID leaves out: the event's exact content,
// which package idempotency adds to the ID to tell duplicates from
// conflicts. LegacyID (legacy.go) is the ID as deadletter computed it
// before 2026-12-07, kept for the hashes recorded then.
package eventhash

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
)

// Version is the CBV version of the algorithm, as the ID names it.
const Version = "CBV2.0"

// Prefix begins every ID this package returns.
const Prefix = "ni:///sha-256;"

// ID returns the event hash ID of ev (SHA-256), with the namespace
// prefixes of ctx (a JSON-LD @context: a string, an object or an array of
// them; nil for the event's own "@context"). It never fails: any JSON
// object has an ID.
func ID(ev map[string]any, ctx any) string {
	d := sha256.New()
	_, _ = io.WriteString(d, PreHash(ev, ctx))
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

// PreHash returns the pre-hash string of ev (see the package
// documentation).
func PreHash(ev map[string]any, ctx any) string {
	if ctx == nil {
		ctx = ev["@context"]
	}
	h := newHasher(ev, ctx)
	return h.preHash(h.model(ev))
}

// Package record holds deadletter's quarantine records. A quarantine chain
// is the append-only list of sealed Records of one quarantined event (one
// DLQID), in stream order. Its pure core lives here:
//
//   - Canonical: RFC 8785 JSON Canonicalization Scheme (JCS).
//   - Seal, Marshal, VerifySeal, Parse: the audit hash of a record.
//   - NewPayload, Payload.Bytes: byte-exact preservation of an event body.
//   - VerifyChain, ChainVerifier: integrity of stored chains (seals, links,
//     forks), in batch or streaming over many chains.
//   - FromFailure, DLQIDFor: the first record of a chain.
//   - Fold: the current State of an event from its chain.
//
// # The seal
//
// Every stored record is a JSON object carrying a member "audit_hash". An
// inspector verifies it in any language, without deadletter's code, from the
// stored bytes alone:
//
//  1. Decode the stored bytes as UTF-8 JSON. The top level must be an object;
//     no object anywhere may name the same member twice.
//  2. Remove the top-level member "audit_hash" and keep its value H (a
//     string of 64 lowercase hexadecimal digits). Keep every other member,
//     including members this recipe does not know.
//  3. Serialize what remains with the JSON Canonicalization Scheme of
//     RFC 8785: members sorted by the UTF-16 code units of their names, no
//     insignificant whitespace, strings escaped as ECMAScript's
//     JSON.stringify does, numbers in ECMAScript form. Records contain only
//     strings, integers (all within ±(2^53−1), so exact in every JSON
//     implementation), booleans, arrays, objects and null.
//  4. Compute SHA-256 over the UTF-8 bytes of step 3 and write it as 64
//     lowercase hexadecimal digits. The record is intact when this equals H.
//
// In Python, with the RFC 8785 reference package "rfc8785" (or any JCS
// implementation):
//
//	import hashlib, json, rfc8785
//	doc = json.loads(stored_bytes)
//	h = doc.pop("audit_hash")
//	assert hashlib.sha256(rfc8785.dumps(doc)).hexdigest() == h
//
// Without a JCS package, json.dumps(doc, sort_keys=True,
// separators=(",", ":"), ensure_ascii=False).encode() gives the same bytes
// for records: they hold integers only, and Python's escaping matches
// JCS; its code-point order differs from UTF-16 order only for member
// names mixing characters above U+FFFF with U+E000..U+FFFF.
//
// Times are RFC 3339 strings in UTC with up to nine fractional digits and no
// trailing zeros ("2025-03-01T12:00:00.5Z"), as Go writes a UTC time.Time;
// the seal covers the string, not the instant, so a writer must not
// re-format them. Re-formatting the JSON itself (whitespace, member order,
// equivalent string escapes) does not change the seal.
//
// # The chain
//
// Record i of a chain has Index i; record 0 has PrevHash "" and every later
// record has PrevHash equal to the AuditHash of the record before it, and
// the same DLQID. Seals are checked by VerifySeal (and VerifyChain); Fold
// checks the links and the lifecycle transitions but not the seals.
package record

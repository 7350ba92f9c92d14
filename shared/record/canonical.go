package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Errors of canonicalization and of reading stored records.
var (
	// ErrInvalidJSON: the bytes are not a single well-formed UTF-8 JSON
	// value, or an object names a member twice.
	ErrInvalidJSON = errors.New("record: invalid JSON")
	// ErrNotObject: the stored record is valid JSON but not an object.
	ErrNotObject = errors.New("record: not a JSON object")
	// ErrUnsafeNumber: a number of the record is not an integer within
	// ±(2^53−1), so JSON implementations could read it differently.
	ErrUnsafeNumber = errors.New("record: number is not an integer within ±(2^53-1)")
)

// auditHashMember is the member that the seal excludes from what it hashes.
const auditHashMember = "audit_hash"

// maxSafeInteger is 2^53−1, the largest integer every JSON reader (IEEE-754
// doubles) represents exactly.
const maxSafeInteger = 1<<53 - 1

// Canonical returns the RFC 8785 (JCS) canonical form of the JSON document
// raw: object members sorted by the UTF-16 code units of their names, no
// insignificant whitespace, JCS string escaping and ECMAScript number
// serialization. Duplicate member names and invalid UTF-8 are rejected with
// ErrInvalidJSON. The error does not quote the document.
func Canonical(raw []byte) ([]byte, error) {
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidJSON, reasonOf(err))
	}
	return out, nil
}

// reasonOf returns the library's error message cut before anything it
// quotes from the input, so that payload values never reach an error.
func reasonOf(err error) string {
	msg := err.Error()
	if i := strings.IndexAny(msg, ":\"'"); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}

// sealed is what reading a stored record's top level yields.
type sealed struct {
	// hash is the hex SHA-256 of the canonical record without audit_hash.
	hash string
	// stored is the value of the audit_hash member; hasStored tells
	// whether the member was present.
	stored    string
	hasStored bool
	// members holds the raw values of the link members (dlq_id, index,
	// prev_hash) for chain verification.
	members map[string]json.RawMessage
}

// linkMembers are the members that chain verification reads.
var linkMembers = map[string]bool{"dlq_id": true, "index": true, "prev_hash": true}

// readSealed parses the stored record raw, removes its top-level
// audit_hash member and hashes the canonical form of the rest.
func readSealed(raw []byte) (sealed, error) {
	if !utf8.Valid(raw) {
		return sealed{}, fmt.Errorf("%w: not UTF-8", ErrInvalidJSON)
	}
	body, s, err := stripAuditHash(raw)
	if err != nil {
		return sealed{}, err
	}
	if err := checkNumbers(body); err != nil {
		return sealed{}, err
	}
	canon, err := Canonical(body)
	if err != nil {
		return sealed{}, err
	}
	sum := sha256.Sum256(canon)
	s.hash = hex.EncodeToString(sum[:])
	return s, nil
}

// stripAuditHash re-writes the top-level object of raw without its
// audit_hash member (members keep their raw values), rejecting duplicate
// top-level members and trailing data. Nested objects are checked by
// Canonical.
func stripAuditHash(raw []byte) ([]byte, sealed, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil {
		return nil, sealed{}, fmt.Errorf("%w: %s", ErrInvalidJSON, reasonOf(err))
	} else if tok != json.Delim('{') {
		return nil, sealed{}, ErrNotObject
	}
	s := sealed{members: make(map[string]json.RawMessage, len(linkMembers))}
	body := make([]byte, 0, len(raw))
	body = append(body, '{')
	seen := make(map[string]bool, 32)
	for dec.More() {
		key, value, err := nextMember(dec)
		if err != nil {
			return nil, sealed{}, err
		}
		if seen[key] {
			return nil, sealed{}, fmt.Errorf("%w: duplicate member", ErrInvalidJSON)
		}
		seen[key] = true
		if linkMembers[key] {
			s.members[key] = value
		}
		if key == auditHashMember {
			if err := json.Unmarshal(value, &s.stored); err != nil {
				return nil, sealed{}, fmt.Errorf("%w: audit_hash is not a string", ErrInvalidJSON)
			}
			s.hasStored = true
			continue
		}
		body = appendMember(body, key, value)
	}
	if err := endOfObject(dec); err != nil {
		return nil, sealed{}, err
	}
	return append(body, '}'), s, nil
}

// nextMember reads one member name and its raw value.
func nextMember(dec *json.Decoder) (string, json.RawMessage, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s", ErrInvalidJSON, reasonOf(err))
	}
	key, ok := tok.(string)
	if !ok {
		return "", nil, fmt.Errorf("%w: member name expected", ErrInvalidJSON)
	}
	var value json.RawMessage
	if err := dec.Decode(&value); err != nil {
		return "", nil, fmt.Errorf("%w: %s", ErrInvalidJSON, reasonOf(err))
	}
	return key, value, nil
}

// appendMember appends `"key":value` to an object being written, with a
// separating comma unless it is the first member.
func appendMember(body []byte, key string, value json.RawMessage) []byte {
	if len(body) > 1 {
		body = append(body, ',')
	}
	name, _ := json.Marshal(key) // a string always marshals; Canonical re-escapes it
	body = append(body, name...)
	body = append(body, ':')
	return append(body, value...)
}

// endOfObject consumes the closing brace and requires the end of input.
func endOfObject(dec *json.Decoder) error {
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidJSON, reasonOf(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the record", ErrInvalidJSON)
	}
	return nil
}

// checkNumbers requires every number token of the JSON document doc
// (outside strings) to be an integer within ±(2^53−1): larger integers or
// fractions would canonicalize to a rounded value, and two records that
// differ only there would share a seal.
func checkNumbers(doc []byte) error {
	inString, escaped := false, false
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		switch {
		case inString:
			inString, escaped = stringState(c, escaped)
		case c == '"':
			inString = true
		case c == '-' || (c >= '0' && c <= '9'):
			j := numberEnd(doc, i)
			if !safeInteger(doc[i:j]) {
				return ErrUnsafeNumber
			}
			i = j - 1
		}
	}
	return nil
}

// stringState advances the scanner over one byte c inside a string: it
// reports whether the string continues and whether the next byte is
// escaped.
func stringState(c byte, escaped bool) (inString, nextEscaped bool) {
	switch {
	case escaped:
		return true, false
	case c == '\\':
		return true, true
	case c == '"':
		return false, false
	}
	return true, false
}

// numberEnd returns the index after the number token starting at i.
func numberEnd(doc []byte, i int) int {
	j := i + 1
	for j < len(doc) && strings.IndexByte("0123456789.eE+-", doc[j]) >= 0 {
		j++
	}
	return j
}

// safeInteger reports whether tok is a decimal integer within ±(2^53−1).
func safeInteger(tok []byte) bool {
	n, err := strconv.ParseInt(string(tok), 10, 64)
	return err == nil && n <= maxSafeInteger && n >= -maxSafeInteger
}

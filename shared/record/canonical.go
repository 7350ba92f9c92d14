package record

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

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
// audit_hash member and hashes the canonical form of the rest. The whole
// record is canonicalized first (which validates it and rejects duplicate
// members at every level); removing a member from a canonical object
// leaves it canonical.
func readSealed(raw []byte) (sealed, error) {
	if err := checkNumbers(raw); err != nil {
		return sealed{}, err
	}
	canon, err := Canonical(raw)
	if err != nil {
		return sealed{}, err
	}
	if len(canon) == 0 || canon[0] != '{' {
		return sealed{}, ErrNotObject
	}
	s := sealed{members: make(map[string]json.RawMessage, len(linkMembers))}
	body, err := s.split(canon)
	if err != nil {
		return sealed{}, err
	}
	sum := sha256.Sum256(body)
	s.hash = hex.EncodeToString(sum[:])
	return s, nil
}

// split walks the top-level members of the canonical object canon,
// keeping the link members and the audit_hash value in s, and returns
// canon without its audit_hash member.
func (s *sealed) split(canon []byte) ([]byte, error) {
	body := canon
	for i := 1; i < len(canon) && canon[i] != '}'; {
		keyEnd := stringEnd(canon, i)
		valueEnd := valueEnd(canon, keyEnd+1)
		key, value := canon[i+1:keyEnd-1], json.RawMessage(canon[keyEnd+1:valueEnd])
		if linkMembers[string(key)] {
			s.members[string(key)] = value
		}
		if string(key) == auditHashMember {
			if err := json.Unmarshal(value, &s.stored); err != nil {
				return nil, fmt.Errorf("%w: audit_hash is not a string", ErrInvalidJSON)
			}
			s.hasStored = true
			body = without(canon, i, valueEnd)
		}
		i = valueEnd
		if canon[i] == ',' {
			i++
		}
	}
	return body, nil
}

// without returns a copy of the canonical object canon without the member
// spanning canon[start:end], and without the comma that separated it.
func without(canon []byte, start, end int) []byte {
	if canon[end] == ',' {
		end++
	} else if canon[start-1] == ',' {
		start--
	}
	out := make([]byte, 0, len(canon)-(end-start))
	out = append(out, canon[:start]...)
	return append(out, canon[end:]...)
}

// stringEnd returns the index after the JSON string starting at canon[i]
// (a '"'). canon is valid canonical JSON.
func stringEnd(canon []byte, i int) int {
	for j := i + 1; j < len(canon); j++ {
		switch canon[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(canon)
}

// valueEnd returns the index after the JSON value starting at canon[i].
// canon is valid canonical JSON (no whitespace), and the value is a
// member of the top-level object.
func valueEnd(canon []byte, i int) int {
	switch canon[i] {
	case '"':
		return stringEnd(canon, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(canon); j++ {
			switch canon[j] {
			case '"':
				j = stringEnd(canon, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(canon)
	}
	j := i // a number or a literal
	for j < len(canon) && canon[j] != ',' && canon[j] != '}' {
		j++
	}
	return j
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

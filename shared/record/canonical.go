package record

import (
	"bytes"
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
	if out, ok := canonicalFast(raw); ok {
		return out, nil
	}
	return canonicalLibrary(raw)
}

// canonicalLibrary is Canonical by the general RFC 8785 library, for every
// document the fast path declines (see canonfast.go).
func canonicalLibrary(raw []byte) ([]byte, error) {
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
	// members holds the values of the link members (dlq_id, domain,
	// index, prev_hash) for chain verification, in linkMember order.
	members [4]linkValue
}

// linkValue is one link member as read: decoded when it is a plain string
// or integer, else kept raw for json.Unmarshal.
type linkValue struct {
	present bool
	str     string
	isStr   bool
	num     int
	isNum   bool
	raw     json.RawMessage
}

// linkMember returns the position of a link member in sealed.members, or
// -1 for any other name.
func linkMember(name []byte) int {
	switch string(name) {
	case "dlq_id":
		return 0
	case "domain":
		return 1
	case "index":
		return 2
	case "prev_hash":
		return 3
	}
	return -1
}

// readLinkValue reads the canonical JSON value v of a link member.
func readLinkValue(v []byte) linkValue {
	lv := linkValue{present: true}
	if len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
		lv.str, lv.isStr = string(v[1:len(v)-1]), true
		return lv
	}
	if n, err := strconv.Atoi(string(v)); err == nil {
		lv.num, lv.isNum = n, true
		return lv
	}
	lv.raw = bytes.Clone(v)
	return lv
}

// readSealed parses the stored record raw, removes its top-level
// audit_hash member and hashes the canonical form of the rest. The whole
// record is canonicalized first (which validates it and rejects duplicate
// members at every level); removing a member from a canonical object
// leaves it canonical.
func readSealed(raw []byte) (sealed, error) {
	// The fast path accepts safe integers only, so a document it
	// canonicalizes needs no separate number check. Its output lives in
	// the pooled canonicalizer until putFast.
	c := getFast()
	defer putFast(c)
	canon, ok := c.canonical(raw)
	if !ok {
		if err := checkNumbers(raw); err != nil {
			return sealed{}, err
		}
		var err error
		if canon, err = canonicalLibrary(raw); err != nil {
			return sealed{}, err
		}
	}
	if len(canon) == 0 || canon[0] != '{' {
		return sealed{}, ErrNotObject
	}
	var s sealed
	start, end, err := s.split(canon)
	if err != nil {
		return sealed{}, err
	}
	h := sha256.New()
	h.Write(canon[:start])
	h.Write(canon[end:])
	var sum [sha256.Size]byte
	s.hash = hex.EncodeToString(h.Sum(sum[:0]))
	return s, nil
}

// split walks the top-level members of the canonical object canon,
// keeping copies of the link members and the audit_hash value in s. The
// canonical object without audit_hash is canon[:start] + canon[end:]
// (start == end when there is no audit_hash member).
func (s *sealed) split(canon []byte) (start, end int, err error) {
	start, end = len(canon), len(canon)
	for i := 1; i < len(canon) && canon[i] != '}'; {
		keyEnd := stringEnd(canon, i)
		valueEnd := valueEnd(canon, keyEnd+1)
		key, value := canon[i+1:keyEnd-1], canon[keyEnd+1:valueEnd]
		if j := linkMember(key); j >= 0 {
			s.members[j] = readLinkValue(value)
		}
		if string(key) == auditHashMember {
			if err := json.Unmarshal(value, &s.stored); err != nil {
				return 0, 0, fmt.Errorf("%w: audit_hash is not a string", ErrInvalidJSON)
			}
			s.hasStored = true
			start, end = memberSpan(canon, i, valueEnd)
		}
		i = valueEnd
		if canon[i] == ',' {
			i++
		}
	}
	return start, end, nil
}

// memberSpan returns the span of the member canon[start:end] of a
// canonical object together with the comma that separates it.
func memberSpan(canon []byte, start, end int) (int, int) {
	if canon[end] == ',' {
		end++
	} else if canon[start-1] == ',' {
		start--
	}
	return start, end
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

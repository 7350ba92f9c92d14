// Package domain holds what every event domain's checks share: the
// idempotency-key derivation, event-time normalization, typed access to a
// decoded JSON document, the Checker interface a domain implements and the
// Spec that describes it. The domain rules themselves live in one
// subpackage per domain (pharmacy, dscsa, fsma), each exporting its Spec;
// package registry lists them, and the validation gate (package gate) calls
// their checkers.
package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
)

// Key derives a deterministic idempotency key "<domain>_<32 hex>" from the
// identity parts: SHA-256 over the domain and the parts, each separated by
// a unit separator (0x1f), truncated to 128 bits. Parts are strings, so
// identifiers keep their leading zeros; callers normalize times to UTC
// before passing them.
func Key(domain string, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(domain))
	for _, p := range parts {
		h.Write([]byte{0x1f})
		h.Write([]byte(p))
	}
	sum := h.Sum(nil)
	return domain + "_" + hex.EncodeToString(sum[:16])
}

// SplitID splits a dlq id of Key's form, "<domain>_<rest>", into its
// domain and the rest (the first "_" separates them: a domain name has
// none). ok is false unless both are non-empty. It checks nothing else:
// whether id is a subject token is the caller's (subjects.ValidToken).
func SplitID(id string) (dom, rest string, ok bool) {
	dom, rest, ok = strings.Cut(id, "_")
	if !ok || dom == "" || rest == "" {
		return "", "", false
	}
	return dom, rest, true
}

// DomainOfID returns the domain of a dlq id ("" when id is not of Key's
// form, SplitID).
func DomainOfID(id string) string {
	dom, _, _ := SplitID(id)
	return dom
}

// ParseTime parses an RFC 3339 time that carries a UTC offset ("Z" or
// "±hh:mm") and returns it in UTC. A time without an offset is ambiguous
// and rejected with UnparseableEventTime; field names the JSON field.
func ParseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, codes.Errorf(codes.UnparseableEventTime,
			"%s is not an RFC 3339 date-time with a UTC offset", field)
	}
	return t.UTC(), nil
}

// Doc is a decoded JSON object (numbers as json.Number).
type Doc = map[string]any

// String returns doc[key] when it is a non-empty string after trimming.
func String(doc Doc, key string) (string, bool) {
	s, ok := doc[key].(string)
	if !ok {
		return "", false
	}
	s = strings.TrimSpace(s)
	return s, s != ""
}

// Object returns doc[key] when it is a JSON object.
func Object(doc Doc, key string) (Doc, bool) {
	o, ok := doc[key].(map[string]any)
	return o, ok
}

// Array returns doc[key] when it is a JSON array.
func Array(doc Doc, key string) ([]any, bool) {
	a, ok := doc[key].([]any)
	return a, ok
}

// Number returns doc[key] when it is a JSON number.
func Number(doc Doc, key string) (json.Number, bool) {
	n, ok := doc[key].(json.Number)
	return n, ok
}

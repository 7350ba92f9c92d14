package dscsa

import (
	"strings"

	"github.com/deadletter/deadletter/shared/gs1"
)

// cset82 marks the characters of GS1 AI encodable character set 82, the
// alphabet of serial numbers (AI 21), lots (AI 10) and GLN extensions.
var cset82 = func() (t [256]bool) {
	const s = `!"%&'()*+,-./0123456789:;<=>?ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz`
	for i := 0; i < len(s); i++ {
		t[s[i]] = true
	}
	return t
}()

// validAI82 reports whether s is 1 to max characters of set 82.
func validAI82(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !cset82[s[i]] {
			return false
		}
	}
	return true
}

// unescape decodes %XX escapes (EPC URNs and Digital Link paths escape
// the set-82 characters that are reserved in URIs). It allocates only
// when s contains an escape; ok is false for a malformed escape.
func unescape(s string) (string, bool) {
	n := strings.IndexByte(s, '%')
	if n < 0 {
		return s, true
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:n]...)
	for i := n; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			b = append(b, c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", false
		}
		b = append(b, hi<<4|lo)
		i += 2
	}
	return string(b), true
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// allDigits reports whether s is non-empty and all ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// digitalLinkPath returns the path of an http(s) URI (the GS1 Digital
// Link form), without its query string and fragment; ok is false when s is
// not an http(s) URI with a host. The host is not checked: any resolver
// may be used.
func digitalLinkPath(s string) (path string, ok bool) {
	switch {
	case hasPrefixFold(s, "https://"):
		s = s[len("https://"):]
	case hasPrefixFold(s, "http://"):
		s = s[len("http://"):]
	default:
		return "", false
	}
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	i := strings.IndexByte(s, '/')
	switch {
	case i == 0: // no host
		return "", false
	case i < 0: // host only
		return "", true
	}
	return s[i:], true
}

// afterAI finds the first path segment equal to ai (a Digital Link
// primary key such as "01" or "414") and returns the path that follows it,
// without the leading slash ("<value>/<ai>/<value>...").
func afterAI(path, ai string) (rest string, ok bool) {
	for path != "" {
		path = path[1:] // drop the '/'
		seg, tail, found := strings.Cut(path, "/")
		if seg == ai {
			return tail, true
		}
		if !found {
			return "", false
		}
		path = path[len(seg):]
	}
	return "", false
}

// primaryKey finds the first path segment that is a GS1 Digital Link
// primary key's application identifier ("01", "00", "8003"...) and returns
// it and the path that follows it, without the leading slash; a value
// after it ("/01/<GTIN>/21/00") is not a key. ok is false when there is
// none.
func primaryKey(path string) (ai, rest string, ok bool) {
	for path != "" {
		path = path[1:] // drop the '/'
		seg, tail, found := strings.Cut(path, "/")
		if _, key := gs1.DigitalLinkKey(seg); key {
			return seg, tail, true
		}
		if !found {
			return "", "", false
		}
		path = path[len(seg):]
	}
	return "", "", false
}

// qualifier returns the value of the key qualifier or data attribute ai
// among the AI/value pairs of a Digital Link path that follow the primary
// key's value ("21/<serial>/10/<lot>"); ok is false when the pairs are
// malformed (a segment that is not a numeric AI, or an AI without a value
// segment). A trailing slash is tolerated.
func qualifier(pairs, ai string) (value string, ok bool) {
	seen := false
	for pairs != "" {
		k, rest, found := strings.Cut(pairs, "/")
		if !allDigits(k) || !found {
			return "", false
		}
		v, tail, _ := strings.Cut(rest, "/")
		if k == ai && !seen {
			value, seen = v, true
		}
		pairs = tail
	}
	return value, true
}

package record

import (
	"bytes"
	"slices"
	"sync"
	"unicode/utf8"
)

// The fast canonicalizer.
//
// canonicalFast produces the RFC 8785 form of the documents records are
// made of: objects, arrays, strings, true/false/null and integers within
// ±(2^53−1) written without fraction or exponent. It is a single pass over
// the bytes with no intermediate tree and few allocations, about ten times
// faster than the general library on a record. For anything else, and for
// every malformed input, it declines (ok false) and Canonical falls back to
// the library, so errors and every unusual form (fractions, exponents,
// surrogate escapes, member names that UTF-8 byte order would sort
// differently from UTF-16 order) keep the library's behaviour exactly.
// Differential tests and a fuzz target compare the two on many inputs.

// fastMaxDepth bounds nesting on the fast path. Each object level copies its
// members once, so work is O(size × depth); deeper documents go to the
// library, which is O(size).
const fastMaxDepth = 32

// fastMaxIntegerDigits is the longest integer token the fast path accepts:
// 2^53−1 has 16 digits.
const fastMaxIntegerDigits = 16

// member is one parsed object member: its decoded name and where its
// canonical value is in the output.
// Offsets only, no pointers: sorting moves no pointers (no write barriers).
type member struct {
	nameOff, nameEnd     int // decoded (unescaped) UTF-8 name in fastCanon.names
	valueStart, valueEnd int
}

// fastCanon is the state of one fast canonicalization.
type fastCanon struct {
	in    []byte
	pos   int
	out   []byte
	names []byte   // decoded member names of the objects being parsed
	tmp   []byte   // scratch for reordering one object
	mems  []member // members of the objects being parsed (a stack)
	depth int
}

var fastPool = sync.Pool{New: func() any { return &fastCanon{} }}

// canonicalFast returns the canonical form of raw and true, or false when
// raw is outside what the fast path handles (including malformed input).
func canonicalFast(raw []byte) ([]byte, bool) {
	c := getFast()
	defer putFast(c)
	out, ok := c.canonical(raw)
	if !ok {
		return nil, false
	}
	return bytes.Clone(out), true
}

// getFast takes a canonicalizer from the pool; putFast returns it.
func getFast() *fastCanon { return fastPool.Get().(*fastCanon) }

// putFast returns c to the pool; what c.canonical returned is then invalid.
func putFast(c *fastCanon) {
	c.in = nil
	fastPool.Put(c)
}

// canonical is canonicalFast into c's own buffer, valid until c is reused.
func (c *fastCanon) canonical(raw []byte) ([]byte, bool) {
	c.in, c.pos, c.depth = raw, 0, 0
	c.out, c.names, c.mems = c.out[:0], c.names[:0], c.mems[:0]
	if !c.value() {
		return nil, false
	}
	c.skipSpace()
	if c.pos != len(c.in) {
		return nil, false
	}
	return c.out, true
}

// skipSpace skips JSON whitespace.
func (c *fastCanon) skipSpace() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// value parses one value at c.pos and appends its canonical form to c.out.
func (c *fastCanon) value() bool {
	c.skipSpace()
	if c.pos >= len(c.in) {
		return false
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object()
	case b == '[':
		return c.array()
	case b == '"':
		c.pos++
		var ok bool
		c.out, ok = c.str(c.out, true)
		return ok
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	case b == '-' || (b >= '0' && b <= '9'):
		return c.integer()
	}
	return false
}

// literal consumes the literal lit.
func (c *fastCanon) literal(lit string) bool {
	if !bytes.HasPrefix(c.in[c.pos:], []byte(lit)) || !c.tokenEnds(c.pos+len(lit)) {
		return false
	}
	c.pos += len(lit)
	c.out = append(c.out, lit...)
	return true
}

// tokenEnds reports whether a literal or number ending at i is followed by
// the end of input, whitespace or a structural character that can follow a
// value, as the library requires.
func (c *fastCanon) tokenEnds(i int) bool {
	if i >= len(c.in) {
		return true
	}
	switch c.in[i] {
	case ',', ']', '}', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// integer consumes an integer token without fraction or exponent, of at
// most 16 digits and within ±(2^53−1), writing "-0" as "0".
func (c *fastCanon) integer() bool {
	start, i := c.pos, c.pos
	neg := c.in[i] == '-'
	if neg {
		i++
	}
	digits := i
	for i < len(c.in) && c.in[i] >= '0' && c.in[i] <= '9' {
		i++
	}
	n := i - digits
	if n == 0 || n > fastMaxIntegerDigits || (n > 1 && c.in[digits] == '0') || !c.tokenEnds(i) {
		return false
	}
	var v uint64
	for _, d := range c.in[digits:i] {
		v = v*10 + uint64(d-'0')
	}
	if v > maxSafeInteger {
		return false
	}
	c.pos = i
	if v == 0 {
		c.out = append(c.out, '0')
		return true
	}
	c.out = append(c.out, c.in[start:i]...)
	return true
}

// str consumes a string whose opening quote was consumed, appending to dst
// its JCS form (with quotes) when quoted, else its decoded bytes.
func (c *fastCanon) str(dst []byte, quoted bool) ([]byte, bool) {
	if quoted {
		dst = append(dst, '"')
	}
	in := c.in
	run := c.pos // start of bytes copied as they are
	for i := c.pos; i < len(in); {
		b := in[i]
		switch {
		case b == '"':
			dst = append(dst, in[run:i]...)
			c.pos = i + 1
			if quoted {
				dst = append(dst, '"')
			}
			return dst, true
		case b < 0x20:
			return dst, false // raw control character: invalid JSON
		case b == '\\':
			dst = append(dst, in[run:i]...)
			if i+1 >= len(in) {
				return dst, false
			}
			var r rune
			n := 2
			switch in[i+1] {
			case '"':
				r = '"'
			case '\\':
				r = '\\'
			case '/':
				r = '/'
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			case 'u':
				if i+6 > len(in) {
					return dst, false
				}
				h, ok := hex4(in[i+2 : i+6])
				if !ok || (h >= 0xD800 && h <= 0xDFFF) {
					return dst, false // surrogates: the library's path
				}
				r, n = rune(h), 6
			default:
				return dst, false
			}
			if quoted {
				dst = appendEscaped(dst, r)
			} else {
				dst = utf8.AppendRune(dst, r)
			}
			i += n
			run = i
		case b < 0x80:
			i++
		default:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size <= 1 {
				return dst, false
			}
			i += size
		}
	}
	return dst, false
}

// appendEscaped appends the rune r as JCS (ECMAScript JSON.stringify)
// writes it inside a string.
func appendEscaped(dst []byte, r rune) []byte {
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 {
		const hexDigits = "0123456789abcdef"
		return append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
	}
	return utf8.AppendRune(dst, r)
}

// appendQuoted appends the decoded string s in JCS form, with quotes.
func appendQuoted(dst, s []byte) []byte {
	dst = append(dst, '"')
	run := 0
	for i, b := range s {
		if b < 0x20 || b == '"' || b == '\\' {
			dst = append(dst, s[run:i]...)
			dst = appendEscaped(dst, rune(b))
			run = i + 1
		}
	}
	dst = append(dst, s[run:]...)
	return append(dst, '"')
}

// hex4 decodes four hexadecimal digits.
func hex4(b []byte) (uint16, bool) {
	var v uint16
	for _, d := range b {
		switch {
		case d >= '0' && d <= '9':
			d -= '0'
		case d >= 'a' && d <= 'f':
			d -= 'a' - 10
		case d >= 'A' && d <= 'F':
			d -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint16(d)
	}
	return v, true
}

// array parses an array at c.pos.
func (c *fastCanon) array() bool {
	if c.depth++; c.depth > fastMaxDepth {
		return false
	}
	c.pos++
	c.out = append(c.out, '[')
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		c.depth--
		return true
	}
	for {
		if !c.value() {
			return false
		}
		c.skipSpace()
		if c.pos >= len(c.in) {
			return false
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
			c.out = append(c.out, ',')
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			c.depth--
			return true
		default:
			return false
		}
	}
}

// object parses an object at c.pos: the member values are written to
// c.out in document order, then the object is rewritten in place with its
// members sorted by name.
func (c *fastCanon) object() bool {
	if c.depth++; c.depth > fastMaxDepth {
		return false
	}
	c.pos++
	start := len(c.out)
	base := len(c.mems)
	namesBase := len(c.names)
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, '{', '}')
		c.depth--
		return true
	}
	for {
		c.skipSpace()
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return false
		}
		c.pos++
		nameOff := len(c.names)
		var ok bool
		if c.names, ok = c.str(c.names, false); !ok {
			return false
		}
		nameEnd := len(c.names)
		// Names that UTF-8 byte order and UTF-16 order could sort apart
		// (U+E000 and above) go to the library.
		for _, b := range c.names[nameOff:] {
			if b >= 0xEE {
				return false
			}
		}
		c.skipSpace()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return false
		}
		c.pos++
		vs := len(c.out)
		if !c.value() {
			return false
		}
		c.mems = append(c.mems, member{nameOff: nameOff, nameEnd: nameEnd, valueStart: vs, valueEnd: len(c.out)})
		c.skipSpace()
		if c.pos >= len(c.in) {
			return false
		}
		if c.in[c.pos] == ',' {
			c.pos++
			continue
		}
		if c.in[c.pos] != '}' {
			return false
		}
		c.pos++
		break
	}
	mems := c.mems[base:]
	names := c.names
	name := func(m member) []byte { return names[m.nameOff:m.nameEnd] }
	slices.SortFunc(mems, func(a, b member) int { return bytes.Compare(name(a), name(b)) })
	for i := 1; i < len(mems); i++ {
		if bytes.Equal(name(mems[i-1]), name(mems[i])) {
			return false // duplicate member: the library reports it
		}
	}
	c.tmp = append(c.tmp[:0], '{')
	for i, m := range mems {
		if i > 0 {
			c.tmp = append(c.tmp, ',')
		}
		c.tmp = appendQuoted(c.tmp, name(m))
		c.tmp = append(c.tmp, ':')
		c.tmp = append(c.tmp, c.out[m.valueStart:m.valueEnd]...)
	}
	c.tmp = append(c.tmp, '}')
	c.out = append(c.out[:start], c.tmp...)
	c.mems = c.mems[:base]
	c.names = c.names[:namesBase]
	c.depth--
	return true
}

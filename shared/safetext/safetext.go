// Package safetext makes text from payloads safe to print to a terminal
// or a log: it is the one place that escapes the characters a terminal
// acts on instead of showing. dlqctl's tables and text lines (package
// services/dlqctl/cli) and the services' JSON log lines (package
// telemetry's LogHandler) go through it.
//
// Escaped: the C0 controls (U+0000–U+001F, so ESC, CR, LF and TAB too),
// DEL (U+007F), the C1 controls (U+0080–U+009F, among them the 8-bit CSI
// and OSC), the bidirectional overrides and isolates (U+202A–U+202E,
// U+2066–U+2069), the line and paragraph separators (U+2028, U+2029), and
// bytes that are not UTF-8. An escape is \n, \r or \t for those three,
// \u followed by four hex digits for another character, \x and two hex
// digits for a byte that is not UTF-8; all but the last are also JSON
// escapes, so escaped JSON stays valid and means the same.
package safetext

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"sync"
	"unicode/utf8"
)

// unsafe reports whether r is a character a terminal may act on.
func unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// appendEscaped appends s to b, escaping what unsafe reports (keeping \n
// and \t as they are when keepLines).
func appendEscaped(b []byte, s []byte, keepLines bool) []byte {
	for len(s) > 0 {
		r, n := utf8.DecodeRune(s)
		switch {
		case r == utf8.RuneError && n <= 1:
			b = fmt.Appendf(b, `\x%02x`, s[0])
		case keepLines && (r == '\n' || r == '\t'):
			b = append(b, byte(r))
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r == '\t':
			b = append(b, `\t`...)
		case unsafe(r):
			b = fmt.Appendf(b, `\u%04x`, r)
		default:
			b = append(b, s[:n]...)
		}
		s = s[n:]
	}
	return b
}

// clean reports whether s needs no escape.
func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			for _, r := range s[i:] {
				if r == utf8.RuneError || unsafe(r) {
					return false
				}
			}
			return true
		}
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// Escape returns s on one line with every character a terminal may act
// on escaped, line breaks and tabs included: what a table cell or a value
// inside a text line shows.
func Escape(s string) string {
	if clean(s) {
		return s
	}
	return string(appendEscaped(make([]byte, 0, len(s)+16), []byte(s), false))
}

// Writer escapes what passes through it like Escape, except that it keeps
// line breaks and tabs: the writer of a program's whole output (tables,
// text lines, pretty-printed payloads, JSON), whose own lines and columns
// stay as they are. A character split across two writes is escaped whole:
// the writer holds the start of an incomplete one until the next write.
// A Writer is safe for concurrent use.
type Writer struct {
	w    io.Writer
	mu   sync.Mutex
	tail []byte
	buf  []byte
}

// NewWriter returns a Writer onto w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes p to the underlying writer, escaped; it reports len(p)
// written when the underlying write succeeds.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	data := p
	if len(w.tail) > 0 {
		data = append(w.tail, p...)
		w.tail = nil
	}
	// Hold an incomplete character at the end (at most 3 bytes).
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	if cut < len(data) {
		w.tail = append([]byte(nil), data[cut:]...)
	}
	w.buf = appendEscaped(w.buf[:0], data[:cut], true)
	if _, err := w.w.Write(w.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap is the writer w escapes onto (for output that is the program's
// own and acts on the terminal on purpose, such as a progress bar).
func (w *Writer) Unwrap() io.Writer { return w.w }

// idShape is what an id a caller names (a dlq id, an approval id, a drain
// id) must look like to be logged as it is: ASCII letters, digits, '-'
// and '_' (every id the services make), at most 96 bytes.
var idShape = regexp.MustCompile(`^[A-Za-z0-9_-]{1,96}$`)

// LogID is a caller-named id as a log may hold it: itself when it has an
// id's shape, else (text a caller chose, which may hold anything, payload
// values included) only a prefix of its SHA-256.
func LogID(s string) string {
	if idShape.MatchString(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// rawControls are characters that must never reach the terminal raw from
// a cell or a value of a text line.
const rawControls = "\x00\x07\x1b\r\x7f\u0085\u009b\u009d\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"

// TestTableEscapes: a cell holding each kind of terminal escape stays one
// cell of one line: the table has exactly its rows, every line the same
// number of columns, nothing raw.
func TestTableEscapes(t *testing.T) {
	for _, tc := range []struct{ name, cell string }{
		{"OSC 52 clipboard write", "SUP-1\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07"},
		{"erase line", "\x1b[2KSUP-2"},
		{"carriage return", "SUP-3\rSUP-OK"},
		{"line feed forging a row", "SUP-4\n5  5  fsma  OK  validation  1d  2025-01-01T00:00:00Z  forged"},
		{"tab", "SUP\t5"},
		{"DEL and NUL", "SUP\x7f\x00"},
		{"C1 CSI and OSC", "SUP\u009b2K\u009d0;x\u009c"},
		{"NEL", "SUP\u0085next"},
		{"bidi override", "Müller & Söhne \u202e<Großhandel>"},
		{"bidi embeddings and isolates", "\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069SUP"},
		{"not UTF-8", "SUP\xff\x9b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			tb := newTable(&b, "OPEN", "SUPPLIER", "CODE")
			tb.row("1", tc.cell, "INVALID_QUANTITY")
			tb.row("2", "Pharmacie Saint-Étienne", "OK")
			tb.flush()
			out := b.String()
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != 3 {
				t.Fatalf("%d lines, want 3:\n%q", len(lines), out)
			}
			if strings.ContainsAny(out, rawControls+"\t") || !strings.Contains(lines[1], "INVALID_QUANTITY") {
				t.Errorf("raw control character or broken row:\n%q", out)
			}
			for _, l := range lines {
				if n := len(strings.Fields(l)); n < 3 {
					t.Errorf("line %q has %d fields", l, n)
				}
			}
		})
	}
}

// TestTextfEscapes: every string, error and string-typed value of a text
// line is escaped; the format's own line break stays.
func TestTextfEscapes(t *testing.T) {
	type code string
	var b bytes.Buffer
	textf(&b, "%s %v %s %d\n", "a\x1b]52;c;eA==\x07", errors.New("b\r\nforged"), code("c\u202e"), 7)
	if got, want := b.String(), `a\u001b]52;c;eA==\u0007 b\r\nforged c\u202e 7`+"\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestOutputWriterEscapes: an unknown command named with escapes is
// reported with none of them raw.
func TestOutputWriterEscapes(t *testing.T) {
	var out, errb bytes.Buffer
	code := ExecuteContext(t.Context(), []string{"no-such-command-\x1b]52;c;eA==\x07\u202e"}, IO{Out: &out, Err: &errb})
	if code != ExitUsage {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if strings.ContainsAny(out.String()+errb.String(), rawControls) || !strings.Contains(errb.String(), "no-such-command-") {
		t.Errorf("stderr %q", errb.String())
	}
}

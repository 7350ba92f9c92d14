package safetext

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestEscape: each kind of character a terminal acts on is escaped, on
// one line; the trade's ordinary text passes unchanged.
func TestEscape(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"trade name", "Müller & Söhne <Großhandel>", "Müller & Söhne <Großhandel>"},
		{"accents and quotes", `Pharmacie Saint-Étienne "Centre"`, `Pharmacie Saint-Étienne "Centre"`},
		{"replacement character as text", "a\uFFFDb", "a\uFFFDb"},
		{"OSC 52 clipboard write", "SUP-1\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07", `SUP-1\u001b]52;c;Y3VybCBldmlsIHwgc2g=\u0007`},
		{"erase line", "\x1b[2KSUP-2", `\u001b[2KSUP-2`},
		{"carriage return", "SUP-3\rSUP-OK", `SUP-3\rSUP-OK`},
		{"line feed forging a row", "SUP-4\nFAKE  0  0  fsma", `SUP-4\nFAKE  0  0  fsma`},
		{"tab breaking columns", "SUP\t5", `SUP\t5`},
		{"NUL and BEL", "a\x00b\x07", `a\u0000b\u0007`},
		{"DEL", "a\x7fb", `a\u007fb`},
		{"C1 CSI", "a\u009b31mred", `a\u009b31mred`},
		{"C1 OSC", "a\u009d0;title\u009c", `a\u009d0;title\u009c`},
		{"bidi override RLO", "SUP-\u202egnp.exe", `SUP-\u202egnp.exe`},
		{"bidi embeddings", "\u202a\u202b\u202c\u202d", `\u202a\u202b\u202c\u202d`},
		{"bidi isolates", "\u2066a\u2067b\u2068c\u2069", `\u2066a\u2067b\u2068c\u2069`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"not UTF-8", "a\xffb\xc3", `a\xffb\xc3`},
		{"8-bit CSI byte", "a\x9b31m", `a\x9b31m`},
		{"long", strings.Repeat("é\x1b", 1000), strings.Repeat(`é\u001b`, 1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Escape(tc.in); got != tc.want {
				t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestWriter: the writer keeps lines and tabs, escapes the rest, keeps a
// character split across writes whole, and leaves JSON valid and equal.
func TestWriter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"lines and tabs kept", []string{"A\tB\nc\td\n"}, "A\tB\nc\td\n"},
		{"escape and CR", []string{"x\x1b[2K\ry\n"}, `x\u001b[2K\ry` + "\n"},
		{"rune split across writes", []string{"M\xc3", "\xbcller \xe2\x80", "\xae\n"}, "Müller " + `\u202e` + "\n"},
		{"bad byte then good", []string{"a\xff", "b"}, `a\xffb`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			w := NewWriter(&b)
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); err != nil || n != len(s) {
					t.Fatalf("Write: %d, %v", n, err)
				}
			}
			if b.String() != tc.want {
				t.Errorf("got %q, want %q", b.String(), tc.want)
			}
		})
	}
	// JSON through the writer stays valid and decodes to the same value.
	in := map[string]string{"supplier_id": "SUP\x1b]52;c;eA==\x07\u202e\u009b\x7f\r\n"}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := NewWriter(&b).Write(raw); err != nil {
		t.Fatal(err)
	}
	var out map[string]string
	if err := json.Unmarshal(b.Bytes(), &out); err != nil || out["supplier_id"] != in["supplier_id"] {
		t.Fatalf("JSON through the writer: %v, %q", err, b.String())
	}
	if bytes.ContainsAny(b.Bytes(), "\x1b\r\u202e\u009b\x7f") {
		t.Errorf("raw control characters left: %q", b.String())
	}
}

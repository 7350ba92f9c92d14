package anchor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLastLine reads the last non-empty line of an export file from
// its end, whatever its length.
func TestLastLine(t *testing.T) {
	long := strings.Repeat("Müller & Söhne <Großhandel> ", 5000) // longer than a read chunk
	for _, tc := range []struct {
		name, text, want string
		max              int64
		fails            bool
	}{
		{name: "empty", text: "", want: ""},
		{name: "one line", text: `{"a":1}`, want: `{"a":1}`},
		{name: "trailing newlines", text: "{\"a\":1}\n{\"a\":2}\n\n\n", want: `{"a":2}`},
		{name: "a line longer than a chunk", text: "x\n" + long + "\n", want: strings.TrimSpace(long)},
		{name: "the only line longer than a chunk", text: long, want: strings.TrimSpace(long)},
		{name: "a line longer than the bound", text: "x\n" + long + "\n", max: 1000, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "checkpoints.jsonl")
			if err := os.WriteFile(p, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			max := tc.max
			if max == 0 {
				max = MaxLine
			}
			got, err := LastLine(p, max)
			if tc.fails != (err != nil) {
				t.Fatalf("err %v, want failure %v", err, tc.fails)
			}
			if !tc.fails && string(got) != tc.want {
				t.Errorf("got %.80q, want %.80q", got, tc.want)
			}
		})
	}
}

// TestParseLineRefuses: a line that is no usable anchor is refused with
// ErrAnchor, one row per bad input.
func TestParseLineRefuses(t *testing.T) {
	for _, tc := range []struct{ name, line string }{
		{"not JSON", `Müller & Söhne <Großhandel>`},
		{"no Merkle root", `{"version":1,"count":1}`},
		{"a bad Merkle root", `{"version":2,"merkle_root":"\"<Pharmacie Saint-Étienne>\"","tree_size":1,"count":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseLine([]byte(tc.line), "", false); !errors.Is(err, ErrAnchor) {
				t.Errorf("err %v, want ErrAnchor", err)
			}
		})
	}
}

package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLastLine: verify --anchor sends the last non-empty line of the
// export file.
func TestLastLine(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want string
		bad                 bool
	}{
		{name: "one line", content: `{"a":1}` + "\n", want: `{"a":1}`},
		{name: "several lines, trailing blank", content: "{\"a\":1}\n{\"a\":2}\n\n", want: `{"a":2}`},
		{name: "no newline at the end", content: "{\"a\":1}\n{\"a\":3}", want: `{"a":3}`},
		{name: "empty", content: "", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := lastLine(path)
			if (err != nil) != tc.bad || got != tc.want {
				t.Fatalf("lastLine = %q, %v; want %q (error %v)", got, err, tc.want, tc.bad)
			}
		})
	}
	if _, err := lastLine(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing file gave no error")
	}
}

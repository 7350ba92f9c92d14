package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/services/deadletter/stack"
)

// TestAnchorsRotate (issue 40, O4): `deadletter anchors rotate` moves the
// checkpoints of an earlier store aside under a name with the time, its
// bytes intact, and refuses what it must without touching the directory.
func TestAnchorsRotate(t *testing.T) {
	at := time.Date(2026, 12, 7, 18, 17, 0, 0, time.UTC)
	moved := "checkpoints.before-20261207T181700Z.jsonl"
	earlier := `{"version":2,"last_seq":41,"merkle_root":"` + strings.Repeat("ab", 32) + `","note":"Müller & Söhne <陈伟>"}` + "\n"
	for _, tc := range []struct {
		name   string
		files  map[string]string // the anchor directory before
		args   []string          // after `anchors`; --anchor-dir DIR is appended
		err    error
		after  []string // the anchor directory's files after
		output string
	}{
		{name: "rotate", files: map[string]string{stack.ExportFile: earlier, stack.SigningKeyFile: "SA..."}, args: []string{"rotate"},
			after: []string{stack.SigningKeyFile, moved}, output: "dlqctl verify --anchor"},
		{name: "nothing to rotate", files: map[string]string{stack.SigningKeyFile: "SA..."}, args: []string{"rotate"}, err: errNoAnchors,
			after: []string{stack.SigningKeyFile}},
		{name: "an empty export file", files: map[string]string{stack.ExportFile: ""}, args: []string{"rotate"}, err: errNoAnchors,
			after: []string{stack.ExportFile}},
		{name: "twice in the same second", files: map[string]string{stack.ExportFile: earlier, moved: earlier}, args: []string{"rotate"},
			after: []string{stack.ExportFile, moved}},
		{name: "no action", files: map[string]string{stack.ExportFile: earlier}, args: nil, err: errAnchorsUsage,
			after: []string{stack.ExportFile}},
		{name: "an unknown action", files: map[string]string{stack.ExportFile: earlier}, args: []string{"rm"}, err: errAnchorsUsage,
			after: []string{stack.ExportFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			args := tc.args
			if len(args) > 0 {
				args = append(slices.Clone(args), "--anchor-dir", dir)
			}
			err := runAnchors(args, &out, func() time.Time { return at })
			switch {
			case tc.err != nil && !errors.Is(err, tc.err):
				t.Errorf("err %v, want %v", err, tc.err)
			case tc.err == nil && tc.name != "twice in the same second" && err != nil:
				t.Errorf("err %v", err)
			case tc.name == "twice in the same second" && err == nil:
				t.Error("a second rotation in the same second overwrote the first's file")
			}
			if !strings.Contains(out.String(), tc.output) {
				t.Errorf("output lacks %q:\n%s", tc.output, out.String())
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			if want := slices.Sorted(slices.Values(tc.after)); !slices.Equal(got, want) {
				t.Errorf("anchor directory holds %q, want %q", got, want)
			}
			for _, name := range []string{moved, stack.ExportFile} {
				if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil && tc.files[stack.ExportFile] == earlier && string(b) != earlier {
					t.Errorf("%s holds %q, not the earlier store's checkpoints", name, b)
				}
			}
		})
	}
}

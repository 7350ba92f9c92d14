package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
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

// TestNewestCheckpoint: verify shows when the newest checkpoint was
// written, its age and what it covers.
func TestNewestCheckpoint(t *testing.T) {
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		rep  api.VerifyReply
		want string
	}{
		{name: "none", rep: api.VerifyReply{}, want: "none"},
		{name: "seconds old", rep: api.VerifyReply{Checkpoints: 1, NewestCheckpointAt: &at, NewestCheckpointAgeSeconds: 4.2,
			NewestCheckpointLastSeq: 17}, want: "2025-03-01T12:00:00Z (4s ago), covers up to seq 17"},
		{name: "hours old", rep: api.VerifyReply{Checkpoints: 3, NewestCheckpointAt: &at, NewestCheckpointAgeSeconds: 3 * 3600,
			NewestCheckpointLastSeq: 5}, want: "2025-03-01T12:00:00Z (3h ago), covers up to seq 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := newestCheckpoint(tc.rep); got != tc.want {
				t.Errorf("newestCheckpoint = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPrintReconcileRekeyed: the LEDGER entries keyed otherwise now are
// counted on the LEDGER ENTRIES line and listed with their current key.
func TestPrintReconcileRekeyed(t *testing.T) {
	var out strings.Builder
	a := &app{io: IO{Out: &out}, now: time.Now}
	stored := time.Date(2026, 3, 12, 9, 15, 0, 0, time.UTC)
	a.printReconcile(api.ReconcileReply{Ledger: api.LedgerReconcile{Entries: 3, Sourced: 1, Unsourced: 2, Rekeyed: 1,
		RekeyedEntries: []api.LedgerEntry{{Seq: 7, Subject: "ledger.dscsa.dscsa_5b1e0c8a", SourceSeq: 4, Stored: stored,
			Reason: api.UnsourcedKeyMismatch, CurrentKey: "dscsa_0f9e8d7c"}}}})
	for _, want := range []string{"1 keyed otherwise now", "LEDGER ENTRIES KEYED OTHERWISE NOW", "ledger.dscsa.dscsa_5b1e0c8a", "dscsa_0f9e8d7c", api.UnsourcedKeyMismatch} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

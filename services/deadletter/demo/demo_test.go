package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
)

// TestStory runs the demo on a smaller batch: every step ends as told, and
// the story and summary are printed.
func TestStory(t *testing.T) {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sum, err := Run(ctx, Config{Events: 200, DataDir: t.TempDir(), Out: &out, Rate: 1000, PasswordCost: access.MinBcryptCost})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if sum.Malformed != 10 || sum.QuarantinedValidation != 10 || sum.QuarantinedExhausted != 190 {
		t.Errorf("quarantined %d validation, %d exhausted; want 10 and 190\n%s", sum.QuarantinedValidation, sum.QuarantinedExhausted, out.String())
	}
	if sum.Drained.Committed != 190 || sum.DownstreamKeys != 191 || sum.Committed != 191 {
		t.Errorf("drain committed %d, downstream keys %d, LEDGER %d; want 190, 191, 191\n%s",
			sum.Drained.Committed, sum.DownstreamKeys, sum.Committed, out.String())
	}
	for _, want := range []string{"DOWN", "back UP", "Dry run", "Reconcile", "unaccounted: 0", "ok=true", "summary"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("story lacks %q\n%s", want, out.String())
		}
	}
}

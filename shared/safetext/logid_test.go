package safetext

import (
	"strings"
	"testing"
)

// TestLogID: an id a caller names reaches the log as it is only with
// an id's shape; other text (a payload value pasted as an id) only as a
// hash prefix.
func TestLogID(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		kept     bool
	}{
		{"a dlq id", "pharmacy_0123456789abcdef0123456789abcdef", true},
		{"an approval id", "appr-20261206T025258-9f72bcda790848fa", true},
		{"a payload value", "Müller & Söhne <Großhandel>", false},
		{"spaces and quotes", `John "RPH" Smith`, false},
		{"too long", strings.Repeat("a", 97), false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := LogID(tc.id)
			if (got == tc.id) != tc.kept || (!tc.kept && !strings.HasPrefix(got, "sha256:")) {
				t.Errorf("LogID(%q) = %q", tc.id, got)
			}
		})
	}
}

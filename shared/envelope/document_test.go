package envelope_test

import (
	"testing"

	"github.com/deadletter/deadletter/shared/envelope"
)

func TestDocumentPosition(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    envelope.Document
		want string
	}{
		{"first of one", envelope.Document{Index: 0, Count: 1}, "event 1 of 1"},
		{"thousands", envelope.Document{Index: 4_811, Count: 10_000}, "event 4,812 of 10,000"},
		{"a million", envelope.Document{Index: 999_999, Count: 1_000_000}, "event 1,000,000 of 1,000,000"},
		{"count unknown", envelope.Document{Index: 41}, "event 42 (of a document whose size is not known)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.d.Position(); got != tc.want {
				t.Errorf("Position() = %q, want %q", got, tc.want)
			}
		})
	}
	d := envelope.Document{SHA256: "ab12", Offset: 100, Length: 50}
	if got, want := d.Original(), "DOCUMENTS object ab12, bytes 100 to 150"; got != want {
		t.Errorf("Original() = %q, want %q", got, want)
	}
}

package envelope

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/subjects"
)

// TestRedriveOf: the redrive headers are honoured on both replay subjects
// (REPLAYS' replay.> of earlier redrivers, EVENTS' redriven.>), which only
// the redriver may publish to, and ignored on any other subject.
func TestRedriveOf(t *testing.T) {
	h := nats.Header{}
	h.Set(DLQID, "pharmacy_ab")
	h.Set(RedriveCount, "3")
	for _, tc := range []struct {
		name, subject string
		wantID        string
		wantCount     int
	}{
		{"redriven", subjects.Redriven("pharmacy", "dispense", "pharmacy_ab", 3), "pharmacy_ab", 3},
		{"replay of an earlier redriver", subjects.Replay("pharmacy", "dispense"), "pharmacy_ab", 3},
		{"event: a publisher's headers", subjects.Event("pharmacy", "dispense"), "", 0},
		{"lookalike prefix", "redrivenx.pharmacy.dispense.pharmacy_ab.3", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, n := RedriveOf(tc.subject, h)
			if id != tc.wantID || n != tc.wantCount {
				t.Errorf("RedriveOf(%q) = %q, %d; want %q, %d", tc.subject, id, n, tc.wantID, tc.wantCount)
			}
		})
	}
	if id, n := RedriveOf(subjects.Redriven("pharmacy", "dispense", "pharmacy_ab", 3), nil); id != "" || n != 0 {
		t.Errorf("no headers: %q, %d", id, n)
	}
}

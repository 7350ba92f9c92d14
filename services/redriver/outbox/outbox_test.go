package outbox

import (
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
)

// TestClearMark: only the n-th event, when it is the event in hand and
// still marked, loses its mark.
func TestClearMark(t *testing.T) {
	at := time.Date(2025, 3, 14, 10, 0, 0, 0, time.UTC)
	ev := api.DrainEvent{Action: api.ActionPaused, Actor: "Müller & Söhne <Großhandel>", At: at, Unrecorded: true}
	other := ev
	other.At = at.Add(time.Second)
	recorded := ev
	recorded.Unrecorded = false
	for _, tc := range []struct {
		name   string
		events []api.DrainEvent
		n      int
		want   bool
	}{
		{"the marked event", []api.DrainEvent{recorded, ev}, 2, true},
		{"another event at its place", []api.DrainEvent{recorded, other}, 2, false},
		{"already recorded", []api.DrainEvent{recorded}, 1, false},
		{"no event at n", []api.DrainEvent{ev}, 2, false},
		{"n below 1", []api.DrainEvent{ev}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &api.DrainState{Events: tc.events}
			if got := ClearMark(st, ev, tc.n); got != tc.want {
				t.Fatalf("ClearMark = %v, want %v", got, tc.want)
			}
			if tc.want && st.Events[tc.n-1].Unrecorded {
				t.Error("the mark is still set")
			}
		})
	}
}

// TestMsgID: one message id per drain and event number.
func TestMsgID(t *testing.T) {
	if got := MsgID("d-1", 3); got != "drain-d-1-3" {
		t.Errorf("MsgID = %q", got)
	}
}

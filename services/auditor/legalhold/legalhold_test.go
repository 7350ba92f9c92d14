package legalhold

import (
	"slices"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/hold"
)

// TestSweepEvery: a quarter of the max age, between 100 ms and a minute.
func TestSweepEvery(t *testing.T) {
	for _, tt := range []struct{ maxAge, want time.Duration }{
		{0, time.Minute}, {3 * time.Second, 750 * time.Millisecond}, {100 * time.Millisecond, 100 * time.Millisecond},
		{6 * 365 * 24 * time.Hour, time.Minute},
	} {
		if got := SweepEvery(tt.maxAge); got != tt.want {
			t.Errorf("SweepEvery(%s) = %s, want %s", tt.maxAge, got, tt.want)
		}
	}
}

// TestQueue: what a record of the live view, a sweep and a retry queue,
// and that Take hands copies last and empties the queue.
func TestQueue(t *testing.T) {
	party := "Müller & Söhne <Großhandel>"
	active := api.Hold{ID: "hold-party", Status: api.HoldActive, Target: api.HoldTarget{PartyID: party}}
	lifted := api.Hold{ID: "hold-lifted", Status: api.HoldLifted, Target: api.HoldTarget{DLQID: "pharmacy_1"}}
	head := chain.Head{DLQID: "pharmacy_2", Domain: "pharmacy", PartyID: party}
	for _, tc := range []struct {
		name string
		run  func(q *Queue)
		want []Work
	}{
		{"a new chain of a held party gets the place", func(q *Queue) { q.OnRecord(head, hold.FromHead(head), nil, true) },
			[]Work{{Kind: Place, HoldID: "hold-party", DLQID: "pharmacy_2", Domain: "pharmacy"}}},
		{"a chain carrying both: the lift, then the copy", func(q *Queue) {
			q.OnRecord(head, hold.FromHead(head), func(id string) bool { return true }, true)
		}, []Work{{Kind: Lift, HoldID: "hold-lifted", DLQID: "pharmacy_2", Domain: "pharmacy"},
			{Kind: Copy, DLQID: "pharmacy_2", Domain: "pharmacy"}}},
		{"no copy without LEGALHOLD", func(q *Queue) {
			q.OnRecord(head, hold.FromHead(head), func(id string) bool { return id == "hold-party" }, false)
		}, nil},
		{"a sweep copies what is behind and lifts", func(q *Queue) {
			q.Copied("pharmacy_1", 2)
			q.Sweep([]Held{{DLQID: "pharmacy_1", Domain: "pharmacy", Records: 3, Holds: []string{"hold-lifted"}},
				{DLQID: "pharmacy_3", Domain: "pharmacy", Records: 1}}, true)
		}, []Work{{Kind: Lift, HoldID: "hold-lifted", DLQID: "pharmacy_1", Domain: "pharmacy"},
			{Kind: Copy, DLQID: "pharmacy_1", Domain: "pharmacy"}, {Kind: Copy, DLQID: "pharmacy_3", Domain: "pharmacy"}}},
		{"a sweep of copied chains queues nothing", func(q *Queue) {
			q.Copied("pharmacy_3", 1)
			q.Sweep([]Held{{DLQID: "pharmacy_3", Domain: "pharmacy", Records: 1}}, true)
		}, nil},
		{"a retry is queued", func(q *Queue) { q.Retry(Work{Kind: Copy, DLQID: "pharmacy_4", Domain: "pharmacy"}) },
			[]Work{{Kind: Copy, DLQID: "pharmacy_4", Domain: "pharmacy"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := NewQueue(hold.NewStore(nil, nil))
			q.Set(active)
			q.Set(lifted)
			tc.run(q)
			got := q.Take()
			key := func(w Work) string { return string(rune('0'+w.Kind)) + w.DLQID + w.HoldID }
			slices.SortFunc(got, func(a, b Work) int {
				if a.Kind != b.Kind {
					return int(a.Kind) - int(b.Kind)
				}
				if key(a) < key(b) {
					return -1
				}
				return 1
			})
			if !slices.Equal(got, tc.want) {
				t.Errorf("queued %+v, want %+v", got, tc.want)
			}
			if again := q.Take(); len(again) != 0 {
				t.Errorf("Take left %+v", again)
			}
		})
	}
}

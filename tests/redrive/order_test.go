package redrive

import (
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/record"
)

// TestFilteredDrainKeepsKeyOrder: one serial's commissioning, shipping and
// receiving are quarantined; a drain whose filter selects only the later
// two (by dlq id, by time range) replays nothing of the key: the dry run
// and the drain's status report them held_by_earlier, naming the
// commissioning. A drain that says ignore_order replays them, and their
// chains record it.
func TestFilteredDrainKeepsKeyOrder(t *testing.T) {
	e := newEnv(t)
	first := e.dscsaEvent(t, "commissioning", "SERORD1", "2024-02-05T10:00:00Z", 101)
	later := []event{
		e.dscsaEvent(t, "shipping", "SERORD1", "2024-02-06T10:00:00Z", 102),
		e.dscsaEvent(t, "receiving", "SERORD1", "2024-02-07T10:00:00Z", 103),
	}
	e.quarantineOutage(t, []event{first})
	// The later events are first seen after since.
	var since time.Time
	_, st, err := e.chain(t, first.key)
	if err != nil {
		t.Fatal(err)
	}
	since = st.FirstSeen.Add(time.Millisecond)
	e.quarantineOutage(t, later)
	e.startRedriver(t, redriverConfig())
	e.down.down.Store(false)

	filters := []struct {
		name string
		f    api.DrainFilter
	}{
		{"dlq ids", api.DrainFilter{DLQIDs: []string{later[0].key, later[1].key}}},
		{"since", api.DrainFilter{Domain: "dscsa", Since: &since}},
		{"error code and since", api.DrainFilter{ErrorCodes: []string{string(st.ErrorCode)}, Since: &since}},
	}
	for _, tc := range filters {
		t.Run(tc.name, func(t *testing.T) {
			var rep api.DrainStartReply
			e.requestJSON(t, api.DrainStart, api.DrainStartRequest{Filter: tc.f, DryRun: true}, &rep)
			p := rep.Plan
			if p == nil || p.Selected != 2 || p.HeldByEarlier != 2 || len(p.HeldBy) != 1 ||
				p.HeldBy[0].DLQID != first.key || p.HeldBy[0].Holds != 2 {
				t.Fatalf("plan %+v, want 2 selected, both held by %s", p, first.key)
			}
			ds := e.waitDrain(t, e.startDrain(t, api.DrainStartRequest{Filter: tc.f, RatePerSecond: ptr(0.0)}), 30*time.Second)
			if ds.Status != api.DrainCompleted || ds.Selected != 2 || ds.Held != 2 || ds.HeldByEarlier != 2 || ds.Committed != 0 ||
				len(ds.HeldBy) != 1 || ds.HeldBy[0].DLQID != first.key || ds.Remaining != 0 {
				t.Fatalf("drain %s %+v held by %+v", ds.Status, ds.DrainCounts, ds.HeldBy)
			}
			for _, ev := range append([]event{first}, later...) {
				if n := e.down.acceptedOf(ev.key); n != 0 {
					t.Errorf("%s accepted %d times, want none", ev.key, n)
				}
			}
		})
	}

	t.Run("ignore order", func(t *testing.T) {
		f := filters[1].f
		var rep api.DrainStartReply
		e.requestJSON(t, api.DrainStart, api.DrainStartRequest{Filter: f, DryRun: true, IgnoreOrder: true}, &rep)
		if p := rep.Plan; p == nil || p.Selected != 2 || p.HeldByEarlier != 0 || len(p.HeldBy) != 0 {
			t.Fatalf("plan %+v, want 2 selected, none held", p)
		}
		ds := e.waitDrain(t, e.startDrain(t, api.DrainStartRequest{Filter: f, RatePerSecond: ptr(0.0), MaxConcurrency: 1, IgnoreOrder: true}), 30*time.Second)
		if ds.Committed != 2 || ds.Held != 0 || ds.Remaining != 0 {
			t.Fatalf("drain %s %+v", ds.Status, ds.DrainCounts)
		}
		e.committedOnce(t, later)
		for _, ev := range later {
			recs, _, err := e.chain(t, ev.key)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, r := range recs {
				if r.Kind == record.KindRedriveRequested {
					found = r.IgnoreOrder && r.DrainID == ds.DrainID
				}
			}
			if !found {
				t.Errorf("%s: no redrive_requested record of drain %s says ignore_order", ev.key, ds.DrainID)
			}
		}
		if _, cs, _ := e.chain(t, first.key); cs.Status != record.StatusOpen || e.down.acceptedOf(first.key) != 0 {
			t.Errorf("the commissioning is %s, accepted %d: it was not selected", cs.Status, e.down.acceptedOf(first.key))
		}
	})
}
